// weft/transport/tcp/config.hpp — what a TCP transport can be tuned with, and the variables
// that set it (docs/tuning.md lists them all).
#pragma once

#include "weft/bootstrap/environment.hpp"
#include "weft/detail/env.hpp"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

namespace weft::tcp {

// What a TCP transport can be tuned with; from_environment() reads the WEFT_TCP_* variables.
struct config {
  std::string bind_address;  // where to listen; empty: this side of the route to the TCP store
                             // (loopback for a local store), or with a file store the first
                             // non-loopback IPv4 address of this host's name
  std::string secret;        // every connection must present it (empty: none)
  std::string prefix =
      "weft";  // store keys start with it; a new world over one store needs a new one
  std::chrono::milliseconds connect_timeout{std::chrono::minutes(5)};  // for the whole start-up
  std::size_t unexpected_limit = std::size_t{256} << 20;  // bytes of early messages held
  // Buffers of delivered early messages kept for the next ones, up to this many bytes (0: none).
  // A large buffer from the allocator is a fresh mapping: every page faults as the socket fills
  // it, and freeing it unmaps them all again.
  std::size_t early_buffer_cache = std::size_t{64} << 20;
  // SO_SNDBUF and SO_RCVBUF of every connection (0: the kernel autotunes them), except those
  // between ranks on one host when it runs more ranks than this process has CPUs: then
  // crowded_socket_buffer_bytes. There TCP is two kernel copies per byte on cores the ranks
  // share, and smaller buffers keep the bytes in flight, and the pages that carry them, in
  // cache; with a core per rank, large buffers let a sender run ahead (docs/tuning.md).
  int socket_buffer_bytes = 4 << 20;
  int crowded_socket_buffer_bytes = 1 << 20;
  // How long a wait polls before it sleeps in epoll. With a core per rank nobody needs the core
  // a waiting rank holds, and one that sleeps hands every segment of a large message to a
  // wake-up on the other CPU: it polls for `spin` (docs/tuning.md, "Crowded hosts").
  std::chrono::microseconds spin{20000};
  // On a host with more ranks than CPUs the peer may need this core to push its bytes, so a
  // wait for a message of 64 KiB or more sleeps sooner (crowded_spin), and one for a smaller
  // message, whose time is all latency and which would pay a wake-up per message, polls for
  // small_spin (docs/tuning.md, "Crowded hosts").
  std::chrono::microseconds crowded_spin{50};
  std::chrono::microseconds small_spin{300};
  // The congestion control of the connections between ranks on one host: the first of these
  // comma-separated names the kernel accepts (TCP_CONGESTION); empty, or none accepted: the
  // system's (net.ipv4.tcp_congestion_control). Bytes between them never leave the host, where
  // a congestion control that paces its sends (BBR, when no fq qdisc paces for it) only holds
  // them back (docs/tuning.md, "Congestion control between ranks on one host"). Cubic is
  // Linux's default; reno is the one every user may choose (cubic may be privileged where it is
  // not the default).
  std::string local_congestion = "cubic,reno";

  // What the launch settled (basic_session calls it before building the transport): the job's
  // secret, and the launcher's bind address when it gave one.
  void adopt(const bootstrap::launch& where, const std::string& job_secret) {
    if (!where.bind_address.empty()) bind_address = where.bind_address;
    secret = job_secret;
  }

  // The WEFT_TIMEOUT_MS, WEFT_TCP_*, WEFT_BIND_ADDRESS and WEFT_SECRET variables
  // (docs/tuning.md); a value that cannot be read is refused.
  static config from_environment() {
    namespace env = weft::detail::env;
    constexpr std::uint64_t largest_buffer = std::numeric_limits<int>::max();
    config result;
    if (const auto value = env::timeout()) result.connect_timeout = *value;
    if (const auto value = env::bytes("WEFT_TCP_UNEXPECTED_BYTES", SIZE_MAX))
      result.unexpected_limit = static_cast<std::size_t>(*value);
    if (const auto value = env::bytes("WEFT_TCP_EARLY_CACHE_BYTES", SIZE_MAX))
      result.early_buffer_cache = static_cast<std::size_t>(*value);
    if (const auto value = env::bytes("WEFT_TCP_SOCKET_BUFFER", largest_buffer))
      result.socket_buffer_bytes = static_cast<int>(*value);
    if (const auto value = env::bytes("WEFT_TCP_CROWDED_SOCKET_BUFFER", largest_buffer))
      result.crowded_socket_buffer_bytes = static_cast<int>(*value);
    if (const auto value = env::microseconds("WEFT_TCP_SPIN_US")) result.spin = *value;
    if (const auto value = env::microseconds("WEFT_TCP_CROWDED_SPIN_US"))
      result.crowded_spin = *value;
    if (const auto value = env::microseconds("WEFT_TCP_SMALL_SPIN_US")) result.small_spin = *value;
    // Set but empty: an empty list, which keeps the system's congestion control.
    if (const char* value = std::getenv("WEFT_TCP_LOCAL_CONGESTION"))
      result.local_congestion = value;
    if (const auto value = env::text("WEFT_BIND_ADDRESS")) result.bind_address = *value;
    if (const auto value = env::text("WEFT_SECRET")) result.secret = *value;
    return result;
  }
};

}  // namespace weft::tcp
