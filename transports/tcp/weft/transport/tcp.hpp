// weft/transport/tcp.hpp — ranks in different processes or machines, over TCP (Boost.Asio).
//
//   auto job = weft::tcp::session::from_environment();   // weft-run, mpirun, srun or torchrun
//   weft::allreduce(job.comm(), std::span<float>(data), weft::sum{});
//
// Wiring. Every pair of ranks shares one connection, made at start-up: each rank listens,
// publishes host:port in the bootstrap store, connects to every lower rank and accepts every
// higher one. A connection begins with a hello carrying the protocol version, both ranks, the
// world size and the job's secret; a connection that says anything else is logged and closed,
// at start-up and for the rest of the job. TCP_NODELAY, 4 MiB socket buffers; connections
// between ranks on one host use a congestion control that does not pace (config::local_congestion).
//
// Frames. A message travels as a 24-byte header (kind, tag, length) and its payload. A receive
// posted before its message arrives is filled straight from the socket (large payloads are read
// into the receive buffer itself, small ones pass through a 64 KiB inbox that also holds the
// next headers); a message that arrives first waits in the unexpected queue, bounded by
// config::unexpected_limit bytes: past it the connection stops reading, and TCP's flow control
// holds the sender, until receives are posted.
//
// Progress. No background thread: the thread that waits (or tests) runs Asio's event loop
// (io_context::run_one_until) over every connection, so sends and receives with all peers move
// at once, in both directions, and nothing moves while no thread is inside the transport. A
// send is first tried at once (often completing the send before the post returns); what does
// not fit waits for the socket to drain. A wait for a receive first spins, reading that
// receive's connection itself at every poll (one recv, no epoll round trip and no re-arming on
// the way to the data) as well as running the event loop; then it sleeps in epoll (docs/design.md
// has why, measured against a background progress thread).
//
// Files: tcp/config.hpp (settings and their variables), tcp/wire.hpp (frames, operations,
// connections), this header (the engine: start-up and handshake, host tuning, sending,
// receiving, failure; then the transport facade and its session).
//
// Failure. A connection that ends without the peer's goodbye (the process exited, crashed or
// was killed) fails every pending and later request with errc::peer_lost naming that rank, and
// this rank tells every other rank at once (an abort frame), so all ranks learn of it even if
// they were not talking to it. A peer that closed its transport in order (goodbye) fails only
// the requests that need it. The transport is used from one thread at a time.
#pragma once

#include "weft/bootstrap/environment.hpp"
#include "weft/bootstrap/file_store.hpp"
#include "weft/bootstrap/store.hpp"
#include "weft/bootstrap/rendezvous.hpp"
#include "weft/bootstrap/session.hpp"
#include "weft/bootstrap/tcp_store.hpp"
#include "weft/communicator.hpp"
#include "weft/detail/env.hpp"
#include "weft/detail/lists.hpp"
#include "weft/detail/operation_pool.hpp"
#include "weft/detail/request_handle.hpp"
#include "weft/error.hpp"
#include "weft/memory.hpp"
#include "weft/transport.hpp"
#include "weft/transport/tcp/config.hpp"
#include "weft/transport/tcp/wire.hpp"

#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/host_name.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace weft::tcp {


namespace detail {

// Everything a transport owns; it stays at one address while Asio handlers refer to it.
class engine {
 public:
  engine(int rank, int size, bootstrap::store* meeting, const config& settings)
      : rank_(rank), size_(size), settings_(settings), acceptor_(io_) {
    if (size < 1 || rank < 0 || rank >= size) {
      throw error(errc::invalid_argument, "tcp transport: rank " + std::to_string(rank) + " of " +
                                              std::to_string(size) + " ranks");
    }
    if (settings.secret.size() > bootstrap::store_detail::max_secret_bytes) {
      throw error(errc::invalid_argument, "tcp transport: the secret is longer than 256 bytes");
    }
    connections_.resize(static_cast<std::size_t>(size));
    posted_.resize(static_cast<std::size_t>(size));
    unexpected_.resize(static_cast<std::size_t>(size));
    peer_reason_.resize(static_cast<std::size_t>(size));
    if (size > 1) {
      if (meeting == nullptr) {
        throw error(errc::invalid_argument, "tcp transport: " + std::to_string(size) +
                                                " ranks need a bootstrap store to meet through");
      }
      start_up(*meeting);
    }
  }

  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  // An orderly close: goodbye after whatever is still queued, then end our half of each
  // connection and read (and drop) what the peer still sends until it closes its half. Closing
  // with unread bytes would send a reset, which can destroy our goodbye before the peer reads it
  // and make an orderly close look like a crash. Both phases give up after notice_time (a peer
  // that is not inside its transport does not answer).
  ~engine() {
    closing_ = true;
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
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::string listening_address() const { return address_; }
  std::uint64_t rejected_connections() const { return rejected_.count(); }
  std::size_t unexpected_bytes() const { return unexpected_bytes_; }
  std::size_t kept_buffer_bytes() const { return spare_bytes_; }
  int receive_buffer_bytes(int peer) const {
    const auto& c = connections_.at(static_cast<std::size_t>(peer));
    if (!c) return 0;
    asio::socket_base::receive_buffer_size size;
    boost::system::error_code failure;
    c->socket.get_option(size, failure);
    return failure ? 0 : size.value();
  }
  std::string congestion_control(int peer) const {
    const auto& c = connections_.at(static_cast<std::size_t>(peer));
    return c ? congestion_of(c->socket.native_handle()) : std::string{};
  }

  operation* post_send(int peer, std::span<const std::byte> data, tag_t tag) {
    check_peer(peer, "send to");
    operation* op = pool_.acquire();
    op->is_send = true;
    op->peer = peer;
    op->tag = tag;
    op->out = data.data();
    op->size = data.size();
    op->state = status::posted;
    if (peer == rank_) {
      if (operation* receive = take_posted(rank_, tag)) {
        complete_pair_locally(op, receive);
      } else {
        self_sends_.push_back(op);
      }
      return op;
    }
    connection& c = *connections_[static_cast<std::size_t>(peer)];
    if (!c.open) {
      op->state = status::failed;
      return op;
    }
    write_header(*op, frame::data, tag, data.size());
    c.sends.push_back(op);
    if (c.sends.size() == 1) flush(c);  // try at once: small sends finish before we return
    return op;
  }

  operation* post_recv(int peer, std::span<std::byte> data, tag_t tag) {
    check_peer(peer, "receive from");
    operation* op = pool_.acquire();
    op->is_send = false;
    op->peer = peer;
    op->tag = tag;
    op->in = data.data();
    op->size = data.size();
    op->state = status::posted;
    if (peer == rank_) {
      auto found = std::find_if(self_sends_.begin(), self_sends_.end(),
                                [&](operation* sent) { return sent->tag == tag; });
      if (found != self_sends_.end()) {
        operation* sent = *found;
        self_sends_.erase(found);
        complete_pair_locally(sent, op);
      } else {
        posted_[static_cast<std::size_t>(peer)].push_back(op);
      }
      return op;
    }
    // An early message of this tag from this peer comes first.
    auto& early = unexpected_[static_cast<std::size_t>(peer)];
    for (auto it = early.begin(); it != early.end(); ++it) {
      message* m = it->get();
      if (m->tag != tag || m->claimed != nullptr) continue;
      connection* arriving = connections_[static_cast<std::size_t>(peer)].get();
      if (m->complete) {
        deliver_early(op, m);
        forget_early(early, it);
        resume_paused();
      } else if (arriving != nullptr && arriving->early == m && m->size == op->size) {
        // It is coming in right now: move what has come into the receive and read the rest
        // straight there (a large message that arrived a moment early is not copied twice).
        if (arriving->filled > 0) std::memcpy(op->in, m->bytes(), arriving->filled);
        arriving->early = nullptr;
        arriving->target = op;
        arriving->sink = op->in;
        op->state = status::active;
        unexpected_bytes_ -= m->size;
        forget_early(early, it);
        resume_paused();
      } else {
        m->claimed = op;
        op->source = m;
        op->state = status::active;
      }
      return op;
    }
    connection& c = *connections_[static_cast<std::size_t>(peer)];
    if (!c.open) {
      op->state = status::failed;
      return op;
    }
    posted_[static_cast<std::size_t>(peer)].push_back(op);
    if (c.paused && c.tag == tag) resume(c);  // its message was held back for want of room
    return op;
  }

  // True once done; throws when the operation cannot finish.
  bool finished(operation* op) {
    if (op->state == status::done) return true;
    // Plain pointers, not strings: this runs on every poll of a pending operation, and only the
    // throwing paths below need the words.
    const char* const verb = op->is_send ? "sending " : "receiving ";
    const char* const direction = op->is_send ? " bytes to rank " : " bytes from rank ";
    if (op->state == status::failed && op->size_mismatch) {
      throw error(errc::transport, "rank " + std::to_string(rank_) + " expected " +
                                       std::to_string(op->size) + " bytes from rank " +
                                       std::to_string(op->peer) + " but the message has " +
                                       std::to_string(op->other_size) + " bytes (tag " +
                                       std::to_string(op->tag) + ")");
    }
    if (lost_rank_ >= 0) {
      throw error(errc::peer_lost,
                  "rank " + std::to_string(rank_) + " stopped " + verb + std::to_string(op->size) +
                      direction + std::to_string(op->peer) + ": rank " +
                      std::to_string(lost_rank_) + " is lost (" + lost_reason_ + ")");
    }
    if (op->state == status::failed) {
      throw error(errc::peer_lost, "rank " + std::to_string(rank_) + " cannot finish " + verb +
                                       std::to_string(op->size) + direction +
                                       std::to_string(op->peer) + ": " +
                                       peer_reason_[static_cast<std::size_t>(op->peer)]);
    }
    return false;
  }

  bool wait(operation* op, deadline_clock::time_point deadline) {
    // Poll for a short while first: a message that is microseconds away arrives without the
    // cost of sleeping in epoll and being woken. A receive's own connection is read directly
    // at every poll: through the event loop, bytes cost an epoll_wait, the handler and an
    // epoll_ctl to re-arm before the wait sees them (2 ranks: 8 B calls ~20% and 4 MiB ~25%
    // faster this way). The event loop still runs at every poll, for the other connections
    // and for sends waiting on a full socket. How long it polls: spin_before_sleep.
    const auto spin = spin_before_sleep(op->size);
    if (spin.count() > 0 && !finished(op)) {
      const auto spin_until = std::min(deadline, deadline_clock::now() + spin);
      unsigned polls = 0;
      connection* source = nullptr;  // a receive's connection, read here at every poll
      if (!op->is_send && op->peer != rank_) source = connections_[static_cast<std::size_t>(op->peer)].get();
      do {
        if (source != nullptr) {
          drain(*source);  // reads nothing from a closed or paused connection
          if (finished(op)) return true;
        }
        io_.restart();
        io_.poll();
        if (finished(op)) return true;
        // With more ranks than cores the awaited one may need this core: a crowded host
        // yields it at every poll. With a core per rank nobody is waiting for it, and a yield is
        // a system call for nothing, so only every fourth poll yields.
        if ((++polls & (crowded_ ? 0u : 3u)) == 0) std::this_thread::yield();
      } while (deadline_clock::now() < spin_until);
    }
    while (!finished(op)) {
      if (deadline_clock::now() >= deadline) return false;
      io_.restart();
      if (io_.run_one_until(deadline) == 0) {  // nothing to wait on (a world of one rank)
        std::this_thread::sleep_until(
            std::min(deadline, deadline_clock::now() + std::chrono::milliseconds(1)));
      }
    }
    return true;
  }

  // How long a wait for a message of `bytes` polls before it sleeps: `spin` with a core per
  // rank; on a crowded host small_spin below 64 KiB (all latency: a wake-up from epoll can cost
  // more than the message) and crowded_spin from there (the peer may need this core).
  std::chrono::microseconds spin_before_sleep(std::size_t bytes) const {
    if (!crowded_) return settings_.spin;
    return bytes < inbox_bytes ? settings_.small_spin : settings_.crowded_spin;
  }

  bool test(operation* op) {
    io_.restart();
    io_.poll();
    return finished(op);
  }

  // The request is gone: withdraw the operation, or let it finish on the transport's own.
  void cancel(operation* op) {
    switch (op->state) {
      case status::idle:
      case status::done:
      case status::failed:
        release(op);
        return;
      case status::posted:
        if (op->is_send) {
          auto& queue = op->peer == rank_ ? self_sends_
                                          : connections_[static_cast<std::size_t>(op->peer)]->sends;
          if (op->peer != rank_ && !queue.empty() && queue.front() == op && op->offset > 0) {
            orphan(op);  // partly written: the rest must follow, or the stream breaks
            return;
          }
          queue.erase(std::find(queue.begin(), queue.end(), op));
        } else {
          auto& queue = posted_[static_cast<std::size_t>(op->peer)];
          queue.erase(std::find(queue.begin(), queue.end(), op));
        }
        release(op);
        return;
      case status::active:
        if (op->source != nullptr) {  // waiting on an early message: it stays for the next receive
          op->source->claimed = nullptr;
        } else {
          // Being filled from the socket: the rest lands in an early message, with what is in.
          connection& c = *connections_[static_cast<std::size_t>(op->peer)];
          auto kept = early_message(op->tag, op->size);
          std::memcpy(kept->bytes(), op->in, c.filled);  // the bytes read so far
          c.target = nullptr;
          c.early = kept.get();
          c.sink = kept->bytes();
          unexpected_bytes_ += op->size;
          unexpected_[static_cast<std::size_t>(op->peer)].push_back(std::move(kept));
        }
        release(op);
        return;
    }
  }

  // Tells every connected rank that `culprit` failed (their waits then throw peer_lost naming
  // it), and fails this rank's own pending requests the same way. The notices are written before
  // this returns (for up to notice_time): one may wait behind the tail of a data frame a peer is
  // still reading, and the caller is about to throw and may not enter this transport again until
  // it is destroyed — meanwhile that peer would wait for the data out to its timeout.
  void abort(int culprit, std::string_view reason) {
    if (culprit < 0 || culprit >= size_ || culprit == rank_) return;
    if (lost_rank_ < 0) {
      lost_rank_ = culprit;
      lost_reason_ = std::string(reason);
      broadcast_abort();
    }
    const auto limit = deadline_clock::now() + notice_time;
    io_.restart();
    while (any_sends_queued() && io_.run_one_until(limit) != 0) {
    }
  }

 private:
  // How long writing farewells (goodbye, abort notices) may take: a peer that is not inside its
  // transport does not read them.
  static constexpr std::chrono::milliseconds notice_time{200};

  bool any_sends_queued() const {
    return std::any_of(connections_.begin(), connections_.end(),
                       [](const auto& owned) { return owned && owned->open && !owned->sends.empty(); });
  }

  // ---- start-up ------------------------------------------------------------------------------

  void start_up(bootstrap::store& meeting) {
    const auto deadline = deadline_clock::now() + settings_.connect_timeout;
    listen(meeting);
    // The CPUs this rank may run on, before the address: a peer that has the address can read
    // them (adapt_to_crowding).
    meeting.set(cpus_key_of(rank_), describe_cpus(own_cpus()));
    meeting.set(key_of(rank_), address_);
    // Accept the higher ranks while connecting to the lower ones.
    accept();
    for (int peer = 0; peer < rank_; ++peer) {
      const auto where = meeting.get(key_of(peer), deadline);
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
    while (connected_ < size_ - 1 && !setup_failure_ && io_.run_one_until(deadline) != 0) {
    }
    if (setup_failure_) throw error(errc::transport, *setup_failure_);
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
                                     " (not started, or cannot reach " + address_ + ")");
    }
    adapt_to_crowding(meeting, deadline);
    for (auto& owned : connections_) {
      if (!owned) continue;
      owned->socket.non_blocking(true);
      read_ready(*owned);
    }
  }

  std::string key_of(int peer) const { return settings_.prefix + "/tcp/" + std::to_string(peer); }
  std::string cpus_key_of(int peer) const { return settings_.prefix + "/cpus/" + std::to_string(peer); }

  void listen(bootstrap::store& meeting) {
    std::string host = settings_.bind_address;
    if (host.empty()) {
      // The interface that reaches rank 0's store; with a file store, this host's own address.
      if (auto* remote = dynamic_cast<bootstrap::tcp_store*>(&meeting)) {
        host = remote->local_address();
      } else {
        host = own_address();
      }
    }
    boost::system::error_code failure;
    const auto ip = asio::ip::make_address(host, failure);
    if (failure) {
      throw error(errc::invalid_argument,
                  "tcp transport: bind address '" + host + "' is not an IP address");
    }
    const tcp::endpoint where(ip, 0);
    acceptor_.open(where.protocol(), failure);
    if (!failure) {
      system_congestion_ = congestion_of(acceptor_.native_handle());
      local_congestion_ = choose_congestion(acceptor_.native_handle());
    }
    if (!failure && settings_.socket_buffer_bytes > 0)
      acceptor_.set_option(asio::socket_base::receive_buffer_size(settings_.socket_buffer_bytes),
                           failure);
    if (!failure) acceptor_.bind(where, failure);
    if (!failure) acceptor_.listen(asio::socket_base::max_listen_connections, failure);
    if (failure) {
      throw error(errc::transport, "rank " + std::to_string(rank_) + " cannot listen on " + host +
                                       ": " + failure.message());
    }
    std::string shown = ip.is_unspecified() ? asio::ip::host_name() : ip.to_string();
    if (ip.is_v6() && !ip.is_unspecified()) shown = "[" + shown + "]";
    address_ = shown + ":" + std::to_string(acceptor_.local_endpoint().port());
  }

  // The first non-loopback IPv4 address this host's name resolves to; loopback if none.
  std::string own_address() {
    boost::system::error_code failure;
    tcp::resolver resolver(io_);
    const auto found = resolver.resolve(asio::ip::host_name(), "0", failure);
    if (!failure) {
      for (const auto& entry : found) {
        const auto ip = entry.endpoint().address();
        if (ip.is_v4() && !ip.is_loopback()) return ip.to_string();
      }
    }
    return "127.0.0.1";
  }

  void tune(tcp::socket& socket) {
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    size_buffers(socket, settings_.socket_buffer_bytes);
  }

  static void size_buffers(tcp::socket& socket, int bytes) {
    if (bytes <= 0) return;  // the kernel's autotuning
    boost::system::error_code ignored;
    socket.set_option(asio::socket_base::send_buffer_size(bytes), ignored);
    socket.set_option(asio::socket_base::receive_buffer_size(bytes), ignored);
  }

  // Once every connection is up: when the ranks on this host outnumber the CPUs they may run on
  // between them, the connections between them get the crowded buffer size, and waits yield
  // the core at every poll and sleep sooner (spin_before_sleep). The CPUs are this rank's own
  // if they suffice; otherwise (ranks bound to cores by a launcher) the union of the local
  // ranks' sets, which each published at start-up: two ranks bound to two different cores have
  // one each, two bound to one core share it.
  void adapt_to_crowding(bootstrap::store& meeting, deadline_clock::time_point deadline) {
    std::vector<int> local_peers;
    for (auto& owned : connections_) {
      if (owned && same_host(owned->socket)) local_peers.push_back(owned->peer);
    }
    const int ranks_here = static_cast<int>(local_peers.size()) + 1;  // + 1: this rank
    cpu_set_t cpus = own_cpus();
    bool known = true;
    if (ranks_here > CPU_COUNT(&cpus)) {
      for (const int peer : local_peers) {
        const auto theirs = meeting.get(cpus_key_of(peer), deadline);
        if (!theirs || !read_cpus(*theirs, cpus)) known = false;
      }
    }
    if (known && ranks_here <= CPU_COUNT(&cpus)) return;
    crowded_ = true;
    for (const int peer : local_peers) {
      size_buffers(connections_[static_cast<std::size_t>(peer)]->socket, settings_.crowded_socket_buffer_bytes);
    }
  }

  // Congestion control. A connection keeps the one it was made under: one that paces (BBR) still
  // paces after a switch, so every connection starts under config::local_congestion's choice (set
  // on the listening socket, which accepted ones inherit, and on a connecting one before it
  // connects), and one that turns out to reach another host goes back to the system's (settle).
  static std::string congestion_of(int handle) {
    char name[64] = {};
    socklen_t length = sizeof(name) - 1;
    if (::getsockopt(handle, IPPROTO_TCP, TCP_CONGESTION, name, &length) != 0) return {};
    return std::string(name, ::strnlen(name, length));
  }
  static bool set_congestion(int handle, const std::string& name) {
    return ::setsockopt(handle, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0;
  }
  // The first of config::local_congestion's names the kernel takes for this socket (one that is
  // not built in, not loaded or not allowed to this user is refused); empty if none.
  std::string choose_congestion(int handle) const {
    std::string_view names = settings_.local_congestion;
    while (!names.empty()) {
      const std::string name(weft::detail::next_item(names));
      if (!name.empty() && set_congestion(handle, name)) return name;
    }
    return {};
  }
  void settle_congestion(tcp::socket& socket) const {
    if (!local_congestion_.empty() && local_congestion_ != system_congestion_ && !system_congestion_.empty() &&
        !same_host(socket)) {
      set_congestion(socket.native_handle(), system_congestion_);
    }
  }

  // The CPUs this thread may run on (all the machine has, if the system cannot say).
  static cpu_set_t own_cpus() {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) return allowed;
    const unsigned count = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned cpu = 0; cpu < count && cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, &allowed);
    return allowed;
  }

  // "0,1,5": the CPUs in the set, for the store.
  static std::string describe_cpus(const cpu_set_t& cpus) {
    std::string out;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &cpus)) continue;
      if (!out.empty()) out += ',';
      out += std::to_string(cpu);
    }
    return out;
  }

  // Adds the CPUs `text` lists (describe_cpus' form) to `into`; false if it is not that form.
  static bool read_cpus(const std::string& text, cpu_set_t& into) {
    std::string_view rest = text;
    while (!rest.empty()) {
      const std::string_view item = weft::detail::next_item(rest);
      int cpu = -1;
      const auto [last, failure] = std::from_chars(item.data(), item.data() + item.size(), cpu);
      if (failure != std::errc{} || last != item.data() + item.size() || cpu < 0 || cpu >= CPU_SETSIZE) return false;
      CPU_SET(cpu, &into);
    }
    return !text.empty();
  }

  // Whether the connection stays on this host: to a loopback address, or to one of its own.
  static bool same_host(const tcp::socket& socket) {
    boost::system::error_code failure;
    const auto remote = socket.remote_endpoint(failure).address();
    if (failure) return false;
    const auto local = socket.local_endpoint(failure).address();
    return !failure && (remote.is_loopback() || remote == local);
  }

  std::vector<std::byte> hello() const {
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
  void connect(int peer, const std::string& where) {
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
              [this, raw, peer, greeting, reply, fail](boost::system::error_code sent,
                                                       std::size_t) {
                if (sent) return fail(sent.message());
                asio::async_read(
                    raw->socket, asio::buffer(*reply),
                    [this, raw, peer, reply, fail](boost::system::error_code answered,
                                                   std::size_t) {
                      if (answered) {
                        return fail(answered == asio::error::eof
                                        ? "it closed the connection (is WEFT_SECRET the same on "
                                          "every rank?)"
                                        : answered.message());
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
  void connect_socket(tcp::socket& socket, std::shared_ptr<std::vector<tcp::endpoint>> targets,
                      std::size_t next, Done done) {
    if (next >= targets->size()) return done(asio::error::host_not_found);
    boost::system::error_code failure;
    if (socket.is_open()) socket.close(failure);
    socket.open((*targets)[next].protocol(), failure);
    if (failure) return done(failure);
    if (!local_congestion_.empty()) set_congestion(socket.native_handle(), local_congestion_);
    socket.async_connect((*targets)[next], [this, &socket, targets, next, done](boost::system::error_code result) mutable {
      if (result && result != asio::error::operation_aborted && next + 1 < targets->size()) {
        return connect_socket(socket, targets, next + 1, std::move(done));
      }
      done(result);
    });
  }

  // Moves a connecting socket that finished its handshake into the connection table.
  void adopt(int peer, connection* raw) {
    auto found = std::find_if(pending_connects_.begin(), pending_connects_.end(),
                              [&](auto& owned) { return owned.get() == raw; });
    connections_[static_cast<std::size_t>(peer)] = std::move(*found);
    pending_connects_.erase(found);
    raw->open = true;
    ++connected_;
  }

  // Accepts connections for the life of the transport; only the expected hellos get through.
  void accept() {
    acceptor_.async_accept([this](boost::system::error_code failure, tcp::socket socket) {
      if (failure == asio::error::operation_aborted) return;
      if (!failure) greet(std::make_shared<tcp::socket>(std::move(socket)));
      accept();
    });
  }

  struct greeting {
    explicit greeting(asio::io_context& io) : timer(io) {}
    std::array<std::byte, hello_bytes> fixed{};
    std::vector<std::byte> secret;
    std::array<std::byte, ack_bytes> ack{};
    asio::steady_timer timer;
    std::string from;
    bool over = false;
  };

  void greet(std::shared_ptr<tcp::socket> socket) {
    if (greetings_ >= 256) {  // a flood of connections gets no buffers
      rejected_.note(who(), "(too many connections in their hello at once)");
      return;
    }
    ++greetings_;
    auto state = std::make_shared<greeting>(io_);
    boost::system::error_code ignored;
    const auto remote = socket->remote_endpoint(ignored);
    state->from = remote.address().to_string() + ":" + std::to_string(remote.port());
    auto reject = [this, socket, state](const std::string& why) {
      if (state->over) return;
      state->over = true;
      --greetings_;
      rejected_.note(who(), "from " + state->from + ": " + why);
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
          if (get32(in + 16) != static_cast<std::uint32_t>(size_)) {
            return reject("it belongs to a world of " + std::to_string(get32(in + 16)) +
                          " ranks, not " + std::to_string(size_));
          }
          if (peer <= static_cast<std::uint32_t>(rank_) ||
              peer >= static_cast<std::uint32_t>(size_)) {
            return reject("rank " + std::to_string(peer) + " does not connect to rank " +
                          std::to_string(rank_));
          }
          if (connections_[peer])
            return reject("rank " + std::to_string(peer) + " is already connected");
          const std::uint32_t secret_bytes = get32(in + 20);
          if (secret_bytes > bootstrap::store_detail::max_secret_bytes)
            return reject("oversized secret");
          state->secret.resize(secret_bytes);
          asio::async_read(
              *socket, asio::buffer(state->secret),
              [this, socket, state, reject, peer](boost::system::error_code failure2, std::size_t) {
                if (state->over) return;
                if (failure2)
                  return reject("closed before a whole hello (" + failure2.message() + ")");
                const std::string_view offered(reinterpret_cast<const char*>(state->secret.data()),
                                               state->secret.size());
                if (!bootstrap::store_detail::same_secret(offered, settings_.secret)) {
                  return reject("wrong secret");
                }
                if (connections_[peer])
                  return reject("rank " + std::to_string(peer) + " is already connected");
                state->over = true;
                --greetings_;
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

  std::string who() const { return "rank " + std::to_string(rank_); }

  // ---- sending -------------------------------------------------------------------------------

  static void write_header(operation& op, frame kind, tag_t tag, std::size_t length) {
    put32(op.header.data(), static_cast<std::uint32_t>(kind));
    put32(op.header.data() + 4, 0);
    put64(op.header.data() + 8, tag);
    put64(op.header.data() + 16, length);
  }

  // Queues a frame the transport sends on its own (abort, goodbye).
  void queue_control(connection& c, frame kind, std::vector<std::byte> payload) {
    operation* op = pool_.acquire();
    op->is_send = true;
    op->peer = c.peer;
    op->owned = std::move(payload);
    op->out = op->owned.data();
    op->size = op->owned.size();
    op->orphan = true;
    op->state = status::posted;
    write_header(*op, kind, 0, op->size);
    c.sends.push_back(op);
    if (c.sends.size() == 1) flush(c);
  }

  // Writes queued frames, several per system call, until the queue is empty or the socket full.
  void flush(connection& c) {
    while (c.open && !c.sends.empty()) {
      std::array<asio::const_buffer, 32> pieces;
      std::size_t count = 0;
      for (auto it = c.sends.begin(); it != c.sends.end() && count + 2 <= pieces.size(); ++it) {
        operation& op = **it;
        if (op.offset < header_bytes) {
          pieces[count++] = asio::buffer(op.header.data() + op.offset, header_bytes - op.offset);
        }
        const std::size_t done = op.offset > header_bytes ? op.offset - header_bytes : 0;
        if (op.size > done) pieces[count++] = asio::buffer(op.out + done, op.size - done);
      }
      boost::system::error_code failure;
      std::size_t written = c.socket.write_some(std::span(pieces.data(), count), failure);
      if (failure == asio::error::would_block || failure == asio::error::try_again) {
        arm_write(c);
        return;
      }
      if (failure) return lose(c, failure.message());
      while (written > 0 && !c.sends.empty()) {
        operation* op = c.sends.front();
        const std::size_t left = header_bytes + op->size - op->offset;
        const std::size_t take = std::min(left, written);
        op->offset += take;
        written -= take;
        if (op->offset < header_bytes + op->size) break;
        c.sends.pop_front();
        if (op->orphan) {
          release(op);
        } else {
          op->state = status::done;
        }
      }
    }
  }

  void arm_write(connection& c) {
    if (c.write_armed) return;
    c.write_armed = true;
    c.socket.async_wait(tcp::socket::wait_write, [this, &c](boost::system::error_code failure) {
      c.write_armed = false;
      if (failure == asio::error::operation_aborted || !c.open) return;
      flush(c);
    });
  }

  // ---- receiving -----------------------------------------------------------------------------

  // Reads what the socket has; arms the next wakeup. Arming needs no read after it: a wait
  // started on a registered socket re-arms its epoll entry (EPOLL_CTL_MOD), and the kernel then
  // reports bytes already there as well as bytes still to come.
  void read_ready(connection& c) {
    drain(c);
    if (!c.open || c.paused || c.read_armed) return;
    c.read_armed = true;
    c.socket.async_wait(tcp::socket::wait_read, [this, &c](boost::system::error_code failure) {
      c.read_armed = false;
      if (failure == asio::error::operation_aborted || !c.open) return;
      read_ready(c);
    });
  }

  // Reads into `into`; 0 when the socket has nothing now (or the connection just ended). A read
  // shorter than asked for emptied the socket: it sets `emptied`, and from then on this drain
  // reads nothing more (rather than spend a system call to be told so), leaving what comes next
  // to the armed wait.
  std::size_t receive(connection& c, std::span<std::byte> into, bool& emptied) {
    if (emptied) return 0;
    boost::system::error_code failure;
    const std::size_t got = c.socket.read_some(asio::buffer(into.data(), into.size()), failure);
    emptied = got < into.size();
    if (failure == asio::error::would_block || failure == asio::error::try_again) return 0;
    if (failure) {
      lose(c, failure == asio::error::eof ? std::string("end of stream") : failure.message());
      return 0;
    }
    return got;
  }

  void drain(connection& c) {
    bool emptied = false;
    while (c.open && !c.paused) {
      if (!c.in_payload) {
        if (c.end - c.begin >= header_bytes) {
          if (!parse_header(c)) return;
          continue;
        }
        if (c.begin > 0) {  // keep the partial header at the front
          std::memmove(c.inbox.data(), c.inbox.data() + c.begin, c.end - c.begin);
          c.end -= c.begin;
          c.begin = 0;
        }
        const std::size_t got = receive(c, std::span(c.inbox).subspan(c.end), emptied);
        if (got == 0) return;
        c.end += got;
        continue;
      }
      const std::size_t remaining = c.length - c.filled;
      if (c.end > c.begin) {
        const std::size_t take = std::min(remaining, c.end - c.begin);
        if (c.sink != nullptr) std::memcpy(c.sink + c.filled, c.inbox.data() + c.begin, take);
        c.begin += take;
        c.filled += take;
      } else if (c.sink != nullptr && remaining >= direct_read_bytes) {
        const std::size_t got = receive(c, {c.sink + c.filled, remaining}, emptied);  // in place
        if (got == 0) return;
        c.filled += got;
      } else {
        c.begin = c.end = 0;
        const std::size_t got = receive(c, c.inbox, emptied);
        if (got == 0) return;
        c.end = got;
        continue;
      }
      if (c.filled == c.length) finish_payload(c);
    }
  }

  // Starts the frame whose header is at the front of the inbox; false when it must wait.
  bool parse_header(connection& c) {
    const std::byte* in = c.inbox.data() + c.begin;
    const std::uint32_t kind = get32(in);
    c.tag = get64(in + 8);
    c.length = static_cast<std::size_t>(get64(in + 16));
    if (get32(in + 4) != 0 || kind < 1 || kind > 3 ||
        (kind != static_cast<std::uint32_t>(frame::data) && c.length > max_abort_bytes)) {
      lose(c, "it sent a malformed frame header");
      return false;
    }
    c.kind = static_cast<frame>(kind);
    c.filled = 0;
    c.target = nullptr;
    c.early = nullptr;
    c.sink = nullptr;
    if (c.kind == frame::data) {
      if (!route(c)) {
        c.paused = true;  // header stays in the inbox until a receive or room arrives
        return false;
      }
    } else {
      c.control.resize(c.length);
      c.sink = c.control.data();
    }
    c.begin += header_bytes;
    c.in_payload = true;
    if (c.length == 0) finish_payload(c);
    return true;
  }

  // Picks where a data frame's payload goes: its posted receive, else an early message.
  bool route(connection& c) {
    if (closing_) return true;  // the payload is read and dropped
    if (operation* op = take_posted(c.peer, c.tag)) {
      if (op->size != c.length) {
        op->size_mismatch = true;
        op->other_size = c.length;
        op->state = status::failed;  // the payload is read and dropped
      } else {
        op->state = status::active;
        c.target = op;
        c.sink = op->in;
      }
      return true;
    }
    if (unexpected_bytes_ + c.length > settings_.unexpected_limit) return false;
    auto kept = early_message(c.tag, c.length);
    c.early = kept.get();
    c.sink = kept->bytes();
    unexpected_bytes_ += c.length;
    unexpected_[static_cast<std::size_t>(c.peer)].push_back(std::move(kept));
    return true;
  }

  void finish_payload(connection& c) {
    c.in_payload = false;
    if (c.kind == frame::goodbye) {
      c.goodbye = true;
    } else if (c.kind == frame::abort) {
      if (c.control.size() >= 4) {
        const int failed = static_cast<int>(get32(c.control.data()));
        const std::string reason(reinterpret_cast<const char*>(c.control.data()) + 4,
                                 c.control.size() - 4);
        if (failed != rank_ && lost_rank_ < 0 && failed >= 0 && failed < size_) {
          lost_rank_ = failed;
          lost_reason_ = "reported by rank " + std::to_string(c.peer) + ": " + reason;
        }
      }
    } else if (c.target != nullptr) {
      c.target->state = status::done;
    } else if (c.early != nullptr) {
      message* m = c.early;
      m->complete = true;
      if (operation* waiting = m->claimed) {
        auto& early = unexpected_[static_cast<std::size_t>(c.peer)];
        auto it =
            std::find_if(early.begin(), early.end(), [&](auto& owned) { return owned.get() == m; });
        waiting->source = nullptr;
        deliver_early(waiting, m);
        forget_early(early, it);
        resume_paused();
      }
    }
    c.target = nullptr;
    c.early = nullptr;
    c.sink = nullptr;
  }

  // A message to hold a payload that arrives before its receive: its buffer is the oldest kept
  // one of a fitting size (at least the payload and at most 4 times it), else a new one.
  std::unique_ptr<message> early_message(tag_t tag, std::size_t size) {
    // Kept buffers hold inbox_bytes or more, so a payload below a quarter of that fits none.
    for (auto it = spare_buffers_.begin(); size >= inbox_bytes / 4 && it != spare_buffers_.end(); ++it) {
      if (it->capacity >= size && it->capacity / 4 <= size) {
        buffer kept = std::move(*it);
        spare_bytes_ -= kept.capacity;
        spare_buffers_.erase(it);
        return std::make_unique<message>(tag, size, std::move(kept));
      }
    }
    return std::make_unique<message>(tag, size, buffer{std::unique_ptr<std::byte[]>(new std::byte[size]), size});
  }

  // Removes a delivered early message from its peer's queue, keeping its buffer for the next
  // ones: small buffers are cheap to allocate and go back, and past early_buffer_cache bytes
  // the oldest kept ones go first.
  void forget_early(std::deque<std::unique_ptr<message>>& queue,
                    std::deque<std::unique_ptr<message>>::iterator it) {
    buffer b = std::move((*it)->storage);
    queue.erase(it);
    if (b.capacity < inbox_bytes || b.capacity > settings_.early_buffer_cache) return;
    while (spare_bytes_ + b.capacity > settings_.early_buffer_cache) {
      spare_bytes_ -= spare_buffers_.front().capacity;
      spare_buffers_.erase(spare_buffers_.begin());
    }
    spare_bytes_ += b.capacity;
    spare_buffers_.push_back(std::move(b));
  }

  // Copies a complete early message into its receive and frees the room it held.
  void deliver_early(operation* op, message* m) {
    unexpected_bytes_ -= m->size;
    if (m->size != op->size) {
      op->size_mismatch = true;
      op->other_size = m->size;
      op->state = status::failed;
      return;
    }
    if (m->size > 0) std::memcpy(op->in, m->bytes(), m->size);
    op->state = status::done;
  }

  void resume(connection& c) {
    c.paused = false;
    read_ready(c);
  }

  void resume_paused() {
    for (auto& owned : connections_) {
      if (owned && owned->open && owned->paused) resume(*owned);
    }
  }

  // ---- failure -------------------------------------------------------------------------------

  // The connection to c.peer ended: fail what needs it; without a goodbye, every rank hears.
  void lose(connection& c, const std::string& why) {
    if (!c.open) return;
    c.open = false;
    boost::system::error_code ignored;
    c.socket.close(ignored);
    const auto peer = static_cast<std::size_t>(c.peer);
    const bool orderly = c.goodbye;
    peer_reason_[peer] = orderly ? "rank " + std::to_string(c.peer) + " closed its transport"
                                 : "the connection to rank " + std::to_string(c.peer) + " ended (" +
                                       why + ") without a goodbye: rank " + std::to_string(c.peer) +
                                       " exited, crashed or was killed, or the network failed";
    for (operation* op : c.sends) {
      if (op->orphan) {
        release(op);
      } else {
        op->state = status::failed;
      }
    }
    c.sends.clear();
    if (c.target != nullptr) c.target->state = status::failed;
    c.target = nullptr;
    for (operation* op : posted_[peer]) op->state = status::failed;
    posted_[peer].clear();
    for (auto& m : unexpected_[peer]) {
      if (!m->complete && m->claimed != nullptr) {
        m->claimed->source = nullptr;
        m->claimed->state = status::failed;
        m->claimed = nullptr;
      }
    }
    if (orderly || closing_ || lost_rank_ >= 0) return;
    lost_rank_ = c.peer;
    lost_reason_ = peer_reason_[peer];
    broadcast_abort();
  }

  // Sends (lost_rank_, lost_reason_) to every rank still connected.
  void broadcast_abort() {
    std::vector<std::byte> notice(4 + std::min(lost_reason_.size(), max_abort_bytes - 4));
    put32(notice.data(), static_cast<std::uint32_t>(lost_rank_));
    std::memcpy(notice.data() + 4, lost_reason_.data(), notice.size() - 4);
    for (auto& other : connections_) {
      if (other && other->open) queue_control(*other, frame::abort, notice);
    }
  }

  // ---- bookkeeping ---------------------------------------------------------------------------

  void check_peer(int peer, const char* what) const {
    weft::detail::check_peer(rank_, size_, peer, what);
  }

  operation* take_posted(int peer, tag_t tag) {
    auto& queue = posted_[static_cast<std::size_t>(peer)];
    auto found =
        std::find_if(queue.begin(), queue.end(), [&](operation* op) { return op->tag == tag; });
    if (found == queue.end()) return nullptr;
    operation* op = *found;
    queue.erase(found);
    return op;
  }

  static void complete_pair_locally(operation* sent, operation* receive) {
    if (sent->size != receive->size) {
      receive->size_mismatch = true;
      receive->other_size = sent->size;
      receive->state = status::failed;
      sent->state = status::done;
      return;
    }
    if (sent->size != 0) std::memcpy(receive->in, sent->out, sent->size);
    sent->state = status::done;
    receive->state = status::done;
  }

  // A partly written send whose request is gone keeps its own copy of the rest.
  static void orphan(operation* op) {
    const std::size_t done = op->offset > header_bytes ? op->offset - header_bytes : 0;
    op->owned.assign(op->out + done, op->out + op->size);
    op->out = op->owned.data();
    op->size -= done;
    op->offset = std::min(op->offset, header_bytes);
    op->orphan = true;
  }

  void release(operation* op) {
    op->state = status::idle;
    op->orphan = false;
    op->source = nullptr;
    op->offset = 0;
    op->other_size = 0;
    op->size_mismatch = false;
    op->owned.clear();
    pool_.release(op);
  }

  // First member: destroyed last, after every socket. Only the thread that waits on this
  // transport runs it, so Asio's internal locking is switched off.
  asio::io_context io_{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE};
  int rank_;
  int size_;
  config settings_;
  tcp::acceptor acceptor_;
  std::string address_;
  std::vector<std::unique_ptr<connection>> connections_;  // by peer rank; none for this rank
  std::vector<std::unique_ptr<connection>> pending_connects_;
  int connected_ = 0;
  int greetings_ = 0;
  std::optional<std::string> setup_failure_;
  std::vector<std::deque<operation*>> posted_;                    // posted receives, by peer
  std::vector<std::deque<std::unique_ptr<message>>> unexpected_;  // early messages, by peer
  std::size_t unexpected_bytes_ = 0;
  std::vector<buffer> spare_buffers_;  // of delivered early messages, oldest first
  std::size_t spare_bytes_ = 0;
  std::deque<operation*> self_sends_;
  std::vector<std::string> peer_reason_;  // why each lost peer is lost
  int lost_rank_ = -1;                    // a rank lost without a goodbye: every wait fails
  bool closing_ = false;                  // in the destructor: read and drop, report nothing
  bool crowded_ = false;                  // this host runs more ranks than this process has CPUs
  std::string system_congestion_;         // a new socket's congestion control (the system's)
  std::string local_congestion_;          // connections to this host's ranks': choose_congestion (empty: the system's)
  std::string lost_reason_;
  bootstrap::store_detail::rejection_log rejected_;
  weft::detail::operation_pool<operation> pool_;
};

}  // namespace detail

// The transport: a movable handle on the engine that owns the sockets.
class transport {
 public:
  static constexpr std::string_view tuning_key = "tcp";

  // Cancels its operation when dropped before it completed (weft/detail/request_handle.hpp).
  using request = weft::detail::request_handle<detail::engine, detail::operation>;

  // Joins a world of `size` ranks as `rank`, meeting the others through `meeting` (not needed
  // for one rank). Returns when connected to every other rank; throws errc::timeout naming the
  // missing ranks after config::connect_timeout.
  transport(int rank, int size, bootstrap::store* meeting,
            const config& settings = config::from_environment())
      : engine_(std::make_unique<detail::engine>(rank, size, meeting, settings)) {}

  int rank() const { return engine_->rank(); }
  int size() const { return engine_->size(); }
  host_memory& memory() { return memory_; }

  request send(int peer, std::span<const std::byte> data, tag_t tag) {
    return {engine_->post_send(peer, data, tag), engine_.get()};
  }
  request recv(int peer, std::span<std::byte> data, tag_t tag) {
    return {engine_->post_recv(peer, data, tag), engine_.get()};
  }
  bool wait(request& operation, deadline_clock::time_point deadline) {
    return engine_->wait(operation.operation(), deadline);
  }
  bool test(request& operation) { return engine_->test(operation.operation()); }

  // Tells every rank that `culprit` failed: their pending and later waits throw peer_lost naming
  // it. The communicator calls it when one of its waits fails, so no rank waits out its timeout.
  void abort(int culprit, std::string_view reason) { engine_->abort(culprit, reason); }

  // host:port this rank listens on (published in the store).
  std::string address() const { return engine_->listening_address(); }
  // Connections refused so far (bad hello, wrong secret, too many).
  std::uint64_t rejected_connections() const { return engine_->rejected_connections(); }
  // Bytes of messages that arrived before their receive and wait in the unexpected queue.
  std::size_t unexpected_bytes() const { return engine_->unexpected_bytes(); }
  // Bytes of delivered early messages' buffers kept for the next ones (config::early_buffer_cache).
  std::size_t kept_buffer_bytes() const { return engine_->kept_buffer_bytes(); }
  // The receive buffer of the connection to `peer` (SO_RCVBUF as Asio reports it: the size
  // asked for, Linux's doubling undone); 0 for this rank itself.
  int receive_buffer_bytes(int peer) const { return engine_->receive_buffer_bytes(peer); }
  // The congestion control of the connection to `peer` ("cubic", "bbr"; TCP_CONGESTION), empty
  // for this rank itself: config::local_congestion's choice for a rank on this host.
  std::string congestion_control(int peer) const { return engine_->congestion_control(peer); }
  // How long a wait for a message of `bytes` polls before it sleeps in epoll (config::spin with
  // a core per rank; on a host with more ranks than CPUs, small_spin or crowded_spin).
  std::chrono::microseconds spin_before_sleep(std::size_t bytes) const {
    return engine_->spin_before_sleep(bytes);
  }

 private:
  std::unique_ptr<detail::engine> engine_;
  host_memory memory_;
};

static_assert(weft::transport<transport>);

// A ready job from the launcher's environment over TCP (weft/bootstrap/session.hpp).
using session = basic_session<transport, config>;

}  // namespace weft::tcp
