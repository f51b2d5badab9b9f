// weft/detail/this_host.hpp — what names this boot of this host and this process's namespaces,
// for transports that must tell whether two processes share a host, a network namespace (the
// abstract Unix sockets) or a PID namespace (pids and pidfds). Linux; empty strings elsewhere.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <fstream>
#include <string>

namespace weft::detail {

// This boot of this host (/proc/sys/kernel/random/boot_id).
inline std::string boot_id() {
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  return boot;
}

// This process's namespace of `kind` ("net", "pid", ...), as /proc/self/ns names it.
inline std::string namespace_of(const char* kind) {
  char link[128] = {0};
  const ssize_t length =
      ::readlink((std::string("/proc/self/ns/") + kind).c_str(), link, sizeof link - 1);
  return length > 0 ? std::string(link, static_cast<std::size_t>(length)) : std::string();
}

}  // namespace weft::detail
