// weft/transport/tcp/meeting.hpp — how TCP ranks meet, and how they part.
//
// Each rank listens, publishes host:port (and the CPUs it may run on) in the bootstrap store,
// connects to every lower rank and accepts every higher one. A connection opens with a hello
// (protocol version, both ranks, the world size, the job's secret) and an acknowledgement; a
// connection that says anything else is logged and closed, at start-up and for the rest of the
// job. An orderly close sends goodbye after what is still queued and drains the peer's half.
#pragma once

#include "weft/bootstrap/environment.hpp"
#include "weft/bootstrap/secret.hpp"
#include "weft/bootstrap/store.hpp"
#include "weft/error.hpp"
#include "weft/transport/tcp/engine.hpp"
#include "weft/transport/tcp/listener.hpp"

#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace weft::tcp::detail {

// An orderly close: goodbye after whatever is still queued, then end our half of each
// connection and read (and drop) what the peer still sends until it closes its half. Closing
// with unread bytes would send a reset, which can destroy our goodbye before the peer reads it
// and make an orderly close look like a crash. Both phases give up after notice_time (a peer
// that is not inside its transport does not answer).
inline void engine::close() {
  if (closing_) return;
  closing_ = true;
  if (owner_.forked()) {
    // A forked child's copy: the connections are the parent's. Close this copy of each socket
    // (the parent's stay open) without a goodbye or a shutdown, which would end them for both;
    // the failure watch's thread and lifeline are the parent's too.
    static_cast<void>(failures_.release());
    io_.notify_fork(asio::execution_context::fork_child);
    boost::system::error_code ignored;
    for (auto& owned : connections_) {
      if (owned) owned->socket.close(ignored);
    }
    listener_.close();
    return;
  }
  failures_.reset();  // an orderly end: its lifeline is withdrawn
  // After a loss, the job's notice again before the goodbye: a peer may read this goodbye before
  // the notice from the rank that sent it first, and must still learn why this rank left.
  if (lost_rank_ >= 0) broadcast_abort();
  for (auto& owned : connections_) {
    if (owned && owned->open) queue_control(*owned, frame::goodbye, {});
  }
  const auto limit = deadline_clock::now() + notice_time;
  io_.restart();
  while (any_sends_queued() && io_.run_one_until(limit) != 0) {
  }
  for (auto& owned : connections_) {
    boost::system::error_code ignored;
    if (owned && owned->open) owned->socket.shutdown(tcp::socket::shutdown_send, ignored);
  }
  auto any_open = [&] {
    return std::any_of(connections_.begin(), connections_.end(),
                       [](const auto& owned) { return owned && owned->open; });
  };
  const auto linger = deadline_clock::now() + notice_time;
  while (any_open() && io_.run_one_until(linger) != 0) {
  }
  for (auto& owned : connections_) {
    if (owned && owned->open) {
      boost::system::error_code ignored;
      owned->socket.close(ignored);
    }
  }
  listener_.close();
}

inline void engine::start_up(bootstrap::store& meeting) {
  // Watched from the start: a rank killed while the others wait for it is a notice that ends
  // their wait (weft/bootstrap/failure_watch.hpp); afterwards connections carry the notices.
  failures_ = std::make_unique<bootstrap::failure_watch>(meeting, settings_.prefix, rank_);
  try {
    meet(meeting);
  } catch (const error& failure) {
    failures_->await_notice(failure);
    failures_->rethrow_if_lost(who());
    throw;
  }
  failures_->started();
  started_ = true;
}

inline void engine::meet(bootstrap::store& meeting) {
  const auto deadline = deadline_clock::now() + settings_.connect_timeout;
  bootstrap::claim_rank(meeting, settings_.prefix + "/tcp-rank/" + std::to_string(rank_), rank_);
  listen(meeting);
  // The CPUs this rank may run on, before the address: a peer that has the address can read
  // them (adapt_to_crowding).
  meeting.set(cpus_key_of(rank_), describe_cpus(own_cpus()));
  // "<world size> <address>": a rank started for another world size is found by every rank
  // that reads it, not only by the one it connects to (a store without a failure watch, as
  // torch.distributed's, carries no notice).
  meeting.set(key_of(rank_), std::to_string(size_) + " " + listener_.address());
  // Accept the higher ranks while connecting to the lower ones.
  listener_.accept(who(), [this](std::shared_ptr<tcp::socket> socket) { greet(socket); });
  for (int peer = 0; peer < rank_; ++peer) {
    auto where = meeting.get(key_of(peer), deadline);
    if (where) {
      const auto space = std::min(where->find(' '), where->size());
      const std::string their_size = where->substr(0, space);
      where = where->substr(std::min(space + 1, where->size()));
      if (their_size != std::to_string(size_) && setup_code_ != errc::mismatch) {
        // (it still gets this rank's hello: a lower rank learns of it from the refusal it sends)
        setup_failure_ = who() + " could not start: " +
                         weft::detail::sizes_differ(who(), std::to_string(size_),
                                                    "rank " + std::to_string(peer), their_size);
        setup_code_ = errc::mismatch;
      }
    }
    if (!where) {
      throw error(errc::timeout,
                  "rank " + std::to_string(rank_) + " timed out after " +
                      std::to_string(settings_.connect_timeout.count()) +
                      " ms at start-up waiting for rank " + std::to_string(peer) +
                      " to publish its address in the " + meeting.describe() + ": rank " +
                      std::to_string(peer) +
                      " has not started, or was given another WEFT_STORE or WEFT_SIZE");
    }
    connect(peer, *where);
  }
  io_.restart();
  // Woken at least every 100 ms to hear of a rank lost meanwhile.
  while (connected_ < size_ - 1 && !setup_failure_ && failures_->lost() < 0 &&
         deadline_clock::now() < deadline) {
    io_.run_one_until(std::min(deadline, deadline_clock::now() + std::chrono::milliseconds(100)));
  }
  if (setup_code_ == errc::mismatch) {
    // This rank's hellos still go out, so that the lower ranks hear of it from the refusals they
    // send (rank 0 reads no other rank's size).
    const auto until = std::min(deadline, deadline_clock::now() + std::chrono::seconds(2));
    while (connects_ended_ < static_cast<std::size_t>(rank_) && deadline_clock::now() < until) {
      io_.run_one_until(until);
    }
  }
  failures_->rethrow_if_lost(who());
  if (setup_failure_) throw error(setup_code_, *setup_failure_);
  if (connected_ < size_ - 1) {
    std::string missing;
    for (int peer = 0; peer < size_; ++peer) {
      if (peer != rank_ && !connections_[static_cast<std::size_t>(peer)]) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(peer);
      }
    }
    throw error(errc::timeout, "rank " + std::to_string(rank_) + " timed out after " +
                                   std::to_string(settings_.connect_timeout.count()) +
                                   " ms at start-up: no connection from rank(s) " + missing +
                                   " (not started, or cannot reach " + listener_.address() + ")");
  }
  adapt_to_crowding(meeting, deadline);
  for (auto& owned : connections_) {
    if (!owned) continue;
    owned->socket.non_blocking(true);
    read_ready(*owned);
  }
}

inline std::string engine::key_of(int peer) const {
  return settings_.prefix + "/tcp/" + std::to_string(peer);
}

inline std::string engine::cpus_key_of(int peer) const {
  return settings_.prefix + "/cpus/" + std::to_string(peer);
}

inline void engine::listen(bootstrap::store& meeting) {
  std::string host = settings_.bind_address;
  if (host.empty()) {
    // The interface that reaches rank 0's store; with a file store, this host's own address.
    host = meeting.local_address();
    if (host.empty()) host = own_address();
  }
  boost::system::error_code failure;
  const auto ip = asio::ip::make_address(host, failure);
  if (failure) {
    throw error(errc::invalid_argument,
                "tcp transport: bind address '" + host + "' is not an IP address");
  }
  listener_.open(ip, rank_, settings_.socket_buffer_bytes, [this](int handle) {
    system_congestion_ = congestion_of(handle);
    local_congestion_ = choose_congestion(handle);
  });
}

inline std::vector<std::byte> engine::hello() const {
  std::vector<std::byte> out(hello_bytes + settings_.secret.size());
  std::memcpy(out.data(), hello_magic, 8);
  put32(out.data() + 8, protocol_version);
  put32(out.data() + 12, static_cast<std::uint32_t>(rank_));
  put32(out.data() + 16, static_cast<std::uint32_t>(size_));
  put32(out.data() + 20, static_cast<std::uint32_t>(settings_.secret.size()));
  std::memcpy(out.data() + hello_bytes, settings_.secret.data(), settings_.secret.size());
  return out;
}

// Connects to a lower rank: hello out, acknowledgement back.
inline void engine::connect(int peer, const std::string& where) {
  auto [host, port] = bootstrap::split_address(where);
  auto c = std::make_unique<connection>(io_);
  c->peer = peer;
  boost::system::error_code failure;
  tcp::resolver resolver(io_);
  const auto endpoints = resolver.resolve(host, std::to_string(port), failure);
  if (failure) {
    throw error(errc::transport, "rank " + std::to_string(rank_) + " cannot resolve rank " +
                                     std::to_string(peer) + "'s address " + where + ": " +
                                     failure.message());
  }
  auto* raw = c.get();
  pending_connects_.push_back(std::move(c));
  auto greeting = std::make_shared<std::vector<std::byte>>(hello());
  auto reply = std::make_shared<std::array<std::byte, ack_bytes>>();
  auto fail = [this, peer, where](const std::string& what) {
    ++connects_ended_;
    if (!setup_failure_) {
      setup_failure_ = "rank " + std::to_string(rank_) + " could not connect to rank " +
                       std::to_string(peer) + " at " + where + ": " + what;
    }
  };
  auto targets = std::make_shared<std::vector<tcp::endpoint>>(endpoints.begin(), endpoints.end());
  connect_socket(
      raw->socket, targets, 0,
      [this, raw, peer, greeting, reply, fail](boost::system::error_code result) {
        if (result) return fail(result.message());
        tune(raw->socket);
        settle_congestion(raw->socket);
        asio::async_write(
            raw->socket, asio::buffer(*greeting),
            [this, raw, peer, greeting, reply, fail](boost::system::error_code sent, std::size_t) {
              if (sent) return fail(sent.message());
              asio::async_read(
                  raw->socket, asio::buffer(*reply),
                  [this, raw, peer, reply, fail](boost::system::error_code answered, std::size_t) {
                    if (answered) {
                      return fail(answered == asio::error::eof
                                      ? "it closed the connection (is WEFT_SECRET the same on "
                                        "every rank?)"
                                      : answered.message());
                    }
                    if (std::memcmp(reply->data(), hello_magic, 8) == 0 &&
                        get32(reply->data() + 12) == refusal) {
                      return read_refusal(raw->socket, peer);
                    }
                    if (std::memcmp(reply->data(), hello_magic, 8) != 0 ||
                        get32(reply->data() + 8) != protocol_version ||
                        get32(reply->data() + 12) != static_cast<std::uint32_t>(peer)) {
                      return fail("it answered with something other than weft's acknowledgement");
                    }
                    adopt(peer, raw);
                  });
            });
      });
}

// Connects `socket` to the first of `targets` from `next` on that answers, each attempt on a
// socket opened here and given the local congestion control before it connects.
template <class Done>
inline void engine::connect_socket(tcp::socket& socket,
                                   std::shared_ptr<std::vector<tcp::endpoint>> targets,
                                   std::size_t next, Done done) {
  if (next >= targets->size()) return done(asio::error::host_not_found);
  boost::system::error_code failure;
  if (socket.is_open()) socket.close(failure);
  socket.open((*targets)[next].protocol(), failure);
  if (failure) return done(failure);
  if (!local_congestion_.empty()) set_congestion(socket.native_handle(), local_congestion_);
  socket.async_connect((*targets)[next], [this, &socket, targets, next,
                                          done](boost::system::error_code result) mutable {
    if (result && result != asio::error::operation_aborted && next + 1 < targets->size()) {
      return connect_socket(socket, targets, next + 1, std::move(done));
    }
    done(result);
  });
}

// Moves a connecting socket that finished its handshake into the connection table.
inline void engine::adopt(int peer, connection* raw) {
  auto found = std::find_if(pending_connects_.begin(), pending_connects_.end(),
                            [&](auto& owned) { return owned.get() == raw; });
  connections_[static_cast<std::size_t>(peer)] = std::move(*found);
  pending_connects_.erase(found);
  raw->open = true;
  ++connected_;
  ++connects_ended_;
}

// An accepted connection while its hello is read (closed after 5 s without one).
struct engine::greeting {
  explicit greeting(asio::io_context& io) : timer(io) {}
  std::array<std::byte, hello_bytes> fixed{};
  std::vector<std::byte> secret;
  std::array<std::byte, ack_bytes> ack{};
  asio::steady_timer timer;
  std::string from;
  bool over = false;
};

// Reads an accepted connection's hello (tcp/wire.hpp): a higher rank of this job is let in and
// acknowledged, anything else turned away (and logged), a rank of this job started for another
// world size refused with the reason.
inline void engine::greet(std::shared_ptr<tcp::socket> socket) {
  auto state = std::make_shared<greeting>(io_);
  boost::system::error_code ignored;
  const auto remote = socket->remote_endpoint(ignored);
  state->from = remote.address().to_string() + ":" + std::to_string(remote.port());
  auto reject = [this, socket, state](const std::string& why) {
    if (state->over) return;
    state->over = true;
    listener_.greeted();
    listener_.turn_away(who(), "from " + state->from + ": " + why);
    boost::system::error_code closing;
    socket->close(closing);
    state->timer.cancel();
  };
  state->timer.expires_after(std::chrono::seconds(5));
  state->timer.async_wait([reject](boost::system::error_code failure) {
    if (!failure) reject("no hello within 5 s");
  });
  asio::async_read(
      *socket, asio::buffer(state->fixed),
      [this, socket, state, reject](boost::system::error_code failure, std::size_t) {
        if (state->over) return;
        if (failure) return reject("closed before a whole hello (" + failure.message() + ")");
        const std::byte* in = state->fixed.data();
        if (std::memcmp(in, hello_magic, 8) != 0) return reject("not a weft hello");
        if (get32(in + 8) != protocol_version) {
          return reject("protocol version " + std::to_string(get32(in + 8)) +
                        ", this rank speaks " + std::to_string(protocol_version));
        }
        const std::uint32_t peer = get32(in + 12);
        const std::uint32_t their_size = get32(in + 16);
        if (their_size != static_cast<std::uint32_t>(size_) &&
            (started_ || peer <= static_cast<std::uint32_t>(rank_))) {
          return reject("it belongs to a world of " + std::to_string(their_size) + " ranks, not " +
                        std::to_string(size_));
        }
        if (their_size == static_cast<std::uint32_t>(size_) &&
            (peer <= static_cast<std::uint32_t>(rank_) ||
             peer >= static_cast<std::uint32_t>(size_))) {
          return reject("rank " + std::to_string(peer) + " does not connect to rank " +
                        std::to_string(rank_));
        }
        if (peer < static_cast<std::uint32_t>(size_) && connections_[peer])
          return reject("rank " + std::to_string(peer) + " is already connected");
        const std::uint32_t secret_bytes = get32(in + 20);
        if (secret_bytes > bootstrap::max_secret_bytes) return reject("oversized secret");
        state->secret.resize(secret_bytes);
        asio::async_read(
            *socket, asio::buffer(state->secret),
            [this, socket, state, reject, peer](boost::system::error_code failure2, std::size_t) {
              if (state->over) return;
              if (failure2)
                return reject("closed before a whole hello (" + failure2.message() + ")");
              const std::string_view offered(reinterpret_cast<const char*>(state->secret.data()),
                                             state->secret.size());
              if (!bootstrap::same_secret(offered, settings_.secret)) {
                return reject("wrong secret");
              }
              if (get32(state->fixed.data() + 16) != static_cast<std::uint32_t>(size_)) {
                // A rank of this job (it knows the secret), started for another world size:
                // the job cannot start. Every rank hears why, that one first.
                const std::string why = weft::detail::sizes_differ(
                    "rank " + std::to_string(peer), std::to_string(get32(state->fixed.data() + 16)),
                    who(), std::to_string(size_));
                refuse(socket, why);
                failures_->report(static_cast<int>(peer), why);
                if (!setup_failure_ || setup_code_ != errc::mismatch) {
                  setup_failure_ = "rank " + std::to_string(rank_) + " could not start: " + why;
                  setup_code_ = errc::mismatch;
                }
                return reject("its world size differs");
              }
              if (connections_[peer])
                return reject("rank " + std::to_string(peer) + " is already connected");
              state->over = true;
              listener_.greeted();
              state->timer.cancel();
              auto c = std::make_unique<connection>(io_);
              c->peer = static_cast<int>(peer);
              c->socket = std::move(*socket);
              tune(c->socket);
              settle_congestion(c->socket);
              auto* raw = c.get();
              connections_[peer] = std::move(c);
              std::memcpy(state->ack.data(), hello_magic, 8);
              put32(state->ack.data() + 8, protocol_version);
              put32(state->ack.data() + 12, static_cast<std::uint32_t>(rank_));
              raw->open = true;
              ++connected_;
              boost::system::error_code answered;
              asio::write(raw->socket, asio::buffer(state->ack), answered);
              if (answered) lose(*raw, answered.message());
            });
      });
}

// Answers a hello with a refusal and its reason (what the connecting rank then fails with).
inline void engine::refuse(std::shared_ptr<tcp::socket> socket, const std::string& why) {
  const std::size_t text = std::min(why.size(), max_refusal_bytes);
  std::vector<std::byte> answer(ack_bytes + 4 + text);
  std::memcpy(answer.data(), hello_magic, 8);
  put32(answer.data() + 8, protocol_version);
  put32(answer.data() + 12, refusal);
  put32(answer.data() + 16, static_cast<std::uint32_t>(text));
  std::memcpy(answer.data() + 20, why.data(), text);
  boost::system::error_code ignored;
  asio::write(*socket, asio::buffer(answer), ignored);  // small: the socket's buffer takes it
}

// The rest of a refusal from `peer`: the reason, which fails this rank's start-up.
inline void engine::read_refusal(tcp::socket& socket, int peer) {
  auto length = std::make_shared<std::array<std::byte, 4>>();
  asio::async_read(
      socket, asio::buffer(*length),
      [this, &socket, peer, length](boost::system::error_code failure, std::size_t) {
        const std::size_t bytes =
            failure ? 0 : std::min<std::size_t>(get32(length->data()), max_refusal_bytes);
        auto text = std::make_shared<std::string>(bytes, '\0');
        asio::async_read(socket, asio::buffer(*text),
                         [this, peer, text](boost::system::error_code unread, std::size_t) {
                           ++connects_ended_;
                           if (setup_failure_) return;
                           setup_failure_ =
                               "rank " + std::to_string(rank_) + " could not start: rank " +
                               std::to_string(peer) + " refused its connection" +
                               (unread || text->empty() ? std::string() : ": " + *text);
                           if (!weft::detail::quoted_sizes(*text).empty())
                             setup_code_ = errc::mismatch;
                         });
      });
}

inline std::string engine::who() const { return "rank " + std::to_string(rank_); }

}  // namespace weft::tcp::detail
