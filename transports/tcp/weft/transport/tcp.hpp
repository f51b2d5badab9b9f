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
// connections), tcp/engine.hpp (what a transport owns; wait, test, cancel), tcp/meeting.hpp
// (start-up and orderly close), tcp/sending.hpp, tcp/receiving.hpp, tcp/failure.hpp, as every
// network transport names them; and tcp's own: tcp/listener.hpp (the accepting socket and what
// it turned away), tcp/early_queues.hpp (messages before their receive), tcp/host.hpp (socket
// options, congestion control, crowding). This header is the transport and its session.
//
// Failure. A connection that ends without the peer's goodbye (the process exited, crashed or
// was killed) fails every pending and later request with errc::peer_lost naming that rank, and
// this rank tells every other rank at once (an abort frame), so all ranks learn of it even if
// they were not talking to it. A peer that closed its transport in order (goodbye) fails only
// the requests that need it. The transport is used from one thread at a time.
#pragma once

#include "weft/bootstrap/session.hpp"
#include "weft/bootstrap/store.hpp"
#include "weft/bootstrap/tcp_meeting.hpp"
#include "weft/detail/engine_facade.hpp"
#include "weft/memory.hpp"
#include "weft/transport.hpp"
#include "weft/transport/tcp/config.hpp"
#include "weft/transport/tcp/engine.hpp"
#include "weft/transport/tcp/failure.hpp"
#include "weft/transport/tcp/host.hpp"
#include "weft/transport/tcp/meeting.hpp"
#include "weft/transport/tcp/receiving.hpp"
#include "weft/transport/tcp/sending.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace weft::tcp {

// The transport: a movable handle on the engine that owns the sockets; rank, size, send, recv,
// wait, test, progress, early_messages and abort are forwarded to it
// (weft/detail/engine_facade.hpp).
class transport : public weft::detail::engine_facade<detail::engine> {
 public:
  static constexpr std::string_view tuning_key = "tcp";
  using config_type = config;

  // Joins a world of `size` ranks as `rank`, meeting the others through `meeting` (not needed
  // for one rank). Returns when connected to every other rank; throws errc::timeout naming the
  // missing ranks after config::connect_timeout.
  transport(int rank, int size, bootstrap::store* meeting,
            const config& settings = config::from_environment())
      : engine_facade(new detail::engine(rank, size, meeting, settings)) {}

  host_memory& memory() { return memory_; }

  // What a job's line says of it (weft::basic_session::describe): ranks, where this rank
  // listens, how long a wait polls before it sleeps.
  std::string describe() const {
    return "tcp (Boost.Asio), " + std::to_string(size()) + " ranks, rank " +
           std::to_string(rank()) + " listening on " + address() + ", waits poll " +
           std::to_string(spin_before_sleep(0).count()) + " us before sleeping in epoll";
  }

  // host:port this rank listens on (published in the store).
  std::string address() const { return engine().listening_address(); }
  // Connections refused so far (bad hello, wrong secret, too many).
  std::uint64_t rejected_connections() const { return engine().rejected_connections(); }
  // Bytes of messages that arrived before their receive and wait in the unexpected queue.
  std::size_t unexpected_bytes() const { return engine().unexpected_bytes(); }
  // Bytes of delivered early messages' buffers kept for the next ones (config::early_buffer_cache).
  std::size_t kept_buffer_bytes() const { return engine().kept_buffer_bytes(); }
  // The receive buffer of the connection to `peer` (SO_RCVBUF as Asio reports it: the size
  // asked for, Linux's doubling undone); 0 for this rank itself.
  int receive_buffer_bytes(int peer) const { return engine().receive_buffer_bytes(peer); }
  // The congestion control of the connection to `peer` ("cubic", "bbr"; TCP_CONGESTION), empty
  // for this rank itself: config::local_congestion's choice for a rank on this host.
  std::string congestion_control(int peer) const { return engine().congestion_control(peer); }
  // How long a wait for a message of `bytes` polls before it sleeps in epoll (config::spin with
  // a core per rank; on a host with more ranks than CPUs, small_spin or crowded_spin).
  std::chrono::microseconds spin_before_sleep(std::size_t bytes) const {
    return engine().spin_before_sleep(bytes);
  }

 private:
  host_memory memory_;
};

static_assert(weft::transport<transport>);
static_assert(weft::early_message_transport<transport>);

// A ready job from the launcher's environment over TCP (weft/bootstrap/session.hpp).
using session = basic_session<transport, config>;

}  // namespace weft::tcp
