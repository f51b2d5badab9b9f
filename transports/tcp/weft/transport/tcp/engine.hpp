// weft/transport/tcp/engine.hpp — what a TCP transport owns and how a wait makes progress.
//
// The engine holds the connections, the listener (tcp/listener.hpp), the posted operations and
// the early messages (tcp/early_queues.hpp), at one address while Asio's handlers refer to it.
// This header declares it and defines what every request goes through (wait, test, cancel); the
// rest is defined by concern in tcp/meeting.hpp (start-up and orderly close), tcp/host.hpp (socket
// options, congestion control, crowding), tcp/sending.hpp, tcp/receiving.hpp and tcp/failure.hpp,
// which weft/transport/tcp.hpp includes together.
#pragma once

#include "weft/bootstrap/failure_watch.hpp"
#include "weft/bootstrap/secret.hpp"
#include "weft/bootstrap/store.hpp"
#include "weft/bootstrap/tcp_store_protocol.hpp"
#include "weft/detail/operation_pool.hpp"
#include "weft/detail/owning_process.hpp"
#include "weft/detail/request_handle.hpp"
#include "weft/error.hpp"
#include "weft/transport.hpp"
#include "weft/transport/tcp/config.hpp"
#include "weft/transport/tcp/early_queues.hpp"
#include "weft/transport/tcp/listener.hpp"
#include "weft/transport/tcp/wire.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace weft::tcp::detail {

class engine : public weft::detail::retiring<engine> {
 public:
  using operation_type = operation;

  engine(int rank, int size, bootstrap::store* meeting, const config& settings)
      : rank_(rank),
        size_(size),
        settings_(settings),
        listener_(io_),
        early_(size, settings.unexpected_limit, settings.early_buffer_cache) {
    if (size < 1 || rank < 0 || rank >= size) {
      throw error(errc::invalid_argument, "tcp transport: rank " + std::to_string(rank) + " of " +
                                              std::to_string(size) + " ranks");
    }
    if (settings.secret.size() > bootstrap::max_secret_bytes) {
      throw error(errc::invalid_argument, "tcp transport: the secret is longer than 256 bytes");
    }
    connections_.resize(static_cast<std::size_t>(size));
    posted_.resize(static_cast<std::size_t>(size));
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
  ~engine() { close(); }
  void close();  // an orderly close, once (tcp/meeting.hpp)

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::string listening_address() const { return listener_.address(); }
  std::uint64_t rejected_connections() const { return listener_.turned_away(); }
  std::size_t unexpected_bytes() const { return early_.held_bytes(); }
  std::size_t kept_buffer_bytes() const { return early_.kept_buffer_bytes(); }
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

  operation* post_send(int peer, std::span<const std::byte> data, tag_t tag);
  operation* post_recv(int peer, std::span<std::byte> data, tag_t tag);
  bool finished(operation* op);

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
      if (!op->is_send && op->peer != rank_)
        source = connections_[static_cast<std::size_t>(op->peer)].get();
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
    if (take_back()) return;  // retired while it lived: nothing touches its buffer any more
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
          message* kept = early_.hold(op->peer, op->tag, op->size);
          std::memcpy(kept->bytes(), op->in, c.filled);  // the bytes read so far
          c.target = nullptr;
          c.early = kept;
          c.sink = kept->bytes();
        }
        release(op);
        return;
    }
  }

  // Moves what can move without blocking; throws peer_lost once a rank is known lost
  // (tcp/failure.hpp).
  void poll();
  // The messages in the unexpected queues that no receive has claimed (early_message_transport).
  std::size_t early_messages(std::span<weft::early_message> found) const {
    return early_.unclaimed(found);
  }
  // Tells every connected rank that `culprit` failed (tcp/failure.hpp).
  void report_lost(int culprit, std::string_view reason);

 private:
  // How long writing farewells (goodbye, abort notices) may take: a peer that is not inside its
  // transport does not read them.
  static constexpr std::chrono::milliseconds notice_time{200};

  bool any_sends_queued() const {
    return std::any_of(connections_.begin(), connections_.end(), [](const auto& owned) {
      return owned && owned->open && !owned->sends.empty();
    });
  }

  // Start-up and orderly close (tcp/meeting.hpp): listen, publish, connect to the lower
  // ranks and accept the higher ones, each connection opened by a hello and acknowledged.
  struct greeting;  // an accepted connection's hello while it is being read
  void start_up(bootstrap::store& meeting);
  void meet(bootstrap::store& meeting);
  std::string key_of(int peer) const;
  std::string cpus_key_of(int peer) const;
  void listen(bootstrap::store& meeting);
  std::vector<std::byte> hello() const;
  void connect(int peer, const std::string& where);
  template <class Done>
  void connect_socket(tcp::socket& socket, std::shared_ptr<std::vector<tcp::endpoint>> targets,
                      std::size_t next, Done done);
  void adopt(int peer, connection* raw);
  void greet(std::shared_ptr<tcp::socket> socket);
  void refuse(std::shared_ptr<tcp::socket> socket, const std::string& why);
  void read_refusal(tcp::socket& socket, int peer);
  std::string who() const;

  // The host (tcp/host.hpp): its address, socket options, congestion control, its CPUs and
  // whether its ranks outnumber them.
  std::string own_address();
  void tune(tcp::socket& socket);
  static void size_buffers(tcp::socket& socket, int bytes);
  void adapt_to_crowding(bootstrap::store& meeting, deadline_clock::time_point deadline);
  static std::string congestion_of(int handle);
  static bool set_congestion(int handle, const std::string& name);
  std::string choose_congestion(int handle) const;
  void settle_congestion(tcp::socket& socket) const;
  static cpu_set_t own_cpus();
  static std::string describe_cpus(const cpu_set_t& cpus);
  static bool read_cpus(const std::string& text, cpu_set_t& into);
  static bool same_host(const tcp::socket& socket);

  // Sending (tcp/sending.hpp): frames queued per connection, written several per system call.
  static void write_header(operation& op, frame kind, tag_t tag, std::size_t length);
  void queue_control(connection& c, frame kind, std::vector<std::byte> payload);
  void flush(connection& c);
  void arm_write(connection& c);
  static void orphan(operation* op);

  // Receiving (tcp/receiving.hpp): frames read from the socket into their receive, or into an
  // early message that waits for one.
  void read_ready(connection& c);
  std::size_t receive(connection& c, std::span<std::byte> into, bool& emptied);
  void drain(connection& c);
  bool parse_header(connection& c);
  bool route(connection& c);
  void finish_payload(connection& c);
  void deliver_early(operation* op, message* m);
  void resume(connection& c);
  void resume_paused();
  operation* take_posted(int peer, tag_t tag);
  static void complete_pair_locally(operation* sent, operation* receive);

  // Failure (tcp/failure.hpp): a connection that ended, and telling every rank.
  void lose(connection& c, const std::string& why);
  void lose_after_reading(connection& c, const std::string& why);
  void broadcast_abort();

  // A fresh operation for a send or receive of `size` bytes (its buffer is the caller's to set).
  operation* start(bool is_send, int peer, tag_t tag, std::size_t size) {
    weft::detail::check_peer(rank_, size_, peer, is_send ? "send to" : "receive from");
    operation* op = pool_.acquire();
    hand_out();
    op->is_send = is_send;
    op->peer = peer;
    op->tag = tag;
    op->size = size;
    op->state = status::posted;
    return op;
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

  weft::detail::owning_process owner_;
  // Destroyed after every socket. Only the thread that waits on this transport runs it, so
  // Asio's internal locking is switched off.
  asio::io_context io_{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE};
  int rank_;
  int size_;
  config settings_;
  listener listener_;
  std::vector<std::unique_ptr<connection>> connections_;  // by peer rank; none for this rank
  std::vector<std::unique_ptr<connection>> pending_connects_;
  int connected_ = 0;
  std::optional<std::string> setup_failure_;
  errc setup_code_ = errc::transport;  // errc::mismatch: the ranks' world sizes differ
  bool started_ = false;               // met every peer: a hello now is a stranger's
  std::size_t connects_ended_ = 0;     // connections to lower ranks made, failed or refused
  std::vector<std::deque<operation*>> posted_;  // posted receives, by peer
  early_queues early_;                          // messages that came before their receive
  std::deque<operation*> self_sends_;
  std::vector<std::string> peer_reason_;                // why each lost peer is lost
  std::unique_ptr<bootstrap::failure_watch> failures_;  // the job's notice, through the store
  int lost_rank_ = -1;             // a rank lost without a goodbye: every wait fails
  std::string given_up_reason_;    // another rank declared this one lost: every wait fails
  bool closing_ = false;           // closing: read and drop, report nothing
  bool crowded_ = false;           // this host runs more ranks than this process has CPUs
  std::string system_congestion_;  // a new socket's congestion control (the system's)
  std::string local_congestion_;   // connections to this host's ranks': choose_congestion (empty:
                                   // the system's)
  std::string lost_reason_;
  weft::detail::operation_pool<operation> pool_;
};

}  // namespace weft::tcp::detail
