// weft/transport/tcp/host.hpp — what the TCP transport asks of the host it runs on.
//
// Socket options (TCP_NODELAY, buffer sizes), the congestion control of connections between
// ranks on one host (config::local_congestion; docs/tuning.md, "Congestion control between
// ranks on one host"), this host's own address, and whether the ranks on it outnumber the CPUs
// they may run on (a crowded host: smaller buffers, shorter spins; docs/tuning.md, "Crowded
// hosts").
#pragma once

#include "weft/bootstrap/store.hpp"
#include "weft/detail/lists.hpp"
#include "weft/transport/tcp/engine.hpp"

#include <boost/asio/ip/host_name.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace weft::tcp::detail {

// The first non-loopback IPv4 address this host's name resolves to; loopback if none.
inline std::string engine::own_address() {
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

inline void engine::tune(tcp::socket& socket) {
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  size_buffers(socket, settings_.socket_buffer_bytes);
}

inline void engine::size_buffers(tcp::socket& socket, int bytes) {
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
inline void engine::adapt_to_crowding(bootstrap::store& meeting,
                                      deadline_clock::time_point deadline) {
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
    size_buffers(connections_[static_cast<std::size_t>(peer)]->socket,
                 settings_.crowded_socket_buffer_bytes);
  }
}

// Congestion control. A connection keeps the one it was made under: one that paces (BBR) still
// paces after a switch, so every connection starts under config::local_congestion's choice (set
// on the listening socket, which accepted ones inherit, and on a connecting one before it
// connects), and one that turns out to reach another host goes back to the system's (settle).
inline std::string engine::congestion_of(int handle) {
  char name[64] = {};
  socklen_t length = sizeof(name) - 1;
  if (::getsockopt(handle, IPPROTO_TCP, TCP_CONGESTION, name, &length) != 0) return {};
  return std::string(name, ::strnlen(name, length));
}

inline bool engine::set_congestion(int handle, const std::string& name) {
  return ::setsockopt(handle, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                      static_cast<socklen_t>(name.size())) == 0;
}

// The first of config::local_congestion's names the kernel takes for this socket (one that is
// not built in, not loaded or not allowed to this user is refused); empty if none.
inline std::string engine::choose_congestion(int handle) const {
  std::string_view names = settings_.local_congestion;
  while (!names.empty()) {
    const std::string name(weft::detail::next_item(names));
    if (!name.empty() && set_congestion(handle, name)) return name;
  }
  return {};
}

inline void engine::settle_congestion(tcp::socket& socket) const {
  if (!local_congestion_.empty() && local_congestion_ != system_congestion_ &&
      !system_congestion_.empty() && !same_host(socket)) {
    set_congestion(socket.native_handle(), system_congestion_);
  }
}

// The CPUs this thread may run on (all the machine has, if the system cannot say).
inline cpu_set_t engine::own_cpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) return allowed;
  const unsigned count = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned cpu = 0; cpu < count && cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, &allowed);
  return allowed;
}

// "0,1,5": the CPUs in the set, for the store.
inline std::string engine::describe_cpus(const cpu_set_t& cpus) {
  std::string out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &cpus)) continue;
    if (!out.empty()) out += ',';
    out += std::to_string(cpu);
  }
  return out;
}

// Adds the CPUs `text` lists (describe_cpus' form) to `into`; false if it is not that form.
inline bool engine::read_cpus(const std::string& text, cpu_set_t& into) {
  std::string_view rest = text;
  while (!rest.empty()) {
    const std::string_view item = weft::detail::next_item(rest);
    int cpu = -1;
    const auto [last, failure] = std::from_chars(item.data(), item.data() + item.size(), cpu);
    if (failure != std::errc{} || last != item.data() + item.size() || cpu < 0 ||
        cpu >= CPU_SETSIZE)
      return false;
    CPU_SET(cpu, &into);
  }
  return !text.empty();
}

// Whether the connection stays on this host: to a loopback address, or to one of its own.
inline bool engine::same_host(const tcp::socket& socket) {
  boost::system::error_code failure;
  const auto remote = socket.remote_endpoint(failure).address();
  if (failure) return false;
  const auto local = socket.local_endpoint(failure).address();
  return !failure && (remote.is_loopback() || remote == local);
}

}  // namespace weft::tcp::detail
