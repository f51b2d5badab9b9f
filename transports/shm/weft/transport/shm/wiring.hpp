// weft/transport/shm/wiring.hpp — how the ranks of one host get each other's regions.
//
// Each rank listens on a Unix socket in the abstract namespace (no file to leave behind), named
// in the bootstrap store with the host it runs on. Every rank connects to every other, presents
// the job's secret, and is handed the peer's region descriptor (SCM_RIGHTS) and size (a
// stream-ordered rank hands over its flags' region and its device pool the same way); the
// socket's credentials (SO_PEERCRED) name the peer's process, which the engine then watches
// through a pidfd. Ranks on different hosts are refused, naming both hosts.
#pragma once

#include "weft/bootstrap/secret.hpp"
#include "weft/bootstrap/store.hpp"
#include "weft/detail/this_host.hpp"
#include "weft/error.hpp"
#include "weft/transport.hpp"
#include "weft/transport/shm/region.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace weft::shm::detail {

// A peer's region, its process, and the pidfd that says when the process ends (-1: none).
struct peer_link {
  mapping region;
  pid_t pid = 0;
  int pidfd = -1;
};

// The host as the abstract socket namespace sees it: boot id and network namespace.
inline std::string host_identity() {
  return weft::detail::boot_id() + "/" + weft::detail::namespace_of("net");
}

inline std::string host_name() {
  char name[256] = {0};
  ::gethostname(name, sizeof name - 1);
  return name;
}

class socket_fd {
 public:
  explicit socket_fd(int fd = -1) : fd_(fd) {}
  socket_fd(socket_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  socket_fd& operator=(socket_fd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~socket_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

inline sockaddr_un abstract_address(const std::string& name, socklen_t& length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  address.sun_path[0] = '\0';
  std::memcpy(address.sun_path + 1, name.data(),
              std::min(name.size(), sizeof address.sun_path - 2));
  length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 +
                                  std::min(name.size(), sizeof address.sun_path - 2));
  return address;
}

// Waits until `fd` is ready for `events` or the deadline passes (false).
inline bool ready(int fd, short events, deadline_clock::time_point deadline) {
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - deadline_clock::now());
    if (left.count() <= 0) return false;
    pollfd one{fd, events, 0};
    const int got = ::poll(&one, 1, static_cast<int>(std::min<long long>(left.count(), 100)));
    if (got > 0) return true;
    if (got < 0 && errno != EINTR) return false;
  }
}

// Reads exactly `bytes` by the deadline.
inline bool read_all(int fd, void* into, std::size_t bytes, deadline_clock::time_point deadline) {
  auto* out = static_cast<char*>(into);
  while (bytes > 0) {
    if (!ready(fd, POLLIN, deadline)) return false;
    const ssize_t got = ::recv(fd, out, bytes, MSG_DONTWAIT);
    if (got == 0) return false;
    if (got < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return false;
    }
    out += got;
    bytes -= static_cast<std::size_t>(got);
  }
  return true;
}

inline constexpr char hello_magic[8] = {'W', 'E', 'F', 'T', 'S', 'H', 'M', '2'};
inline constexpr std::size_t most_descriptors = 4;
inline constexpr std::size_t most_payload = 4096;

// What a rank hands each peer that presents the secret: up to most_descriptors file
// descriptors (SCM_RIGHTS) and a payload of at most most_payload bytes that says what they are.
struct handover {
  std::vector<int> descriptors;
  std::string payload;
};

// What a peer was handed, and the process that handed it (SO_PEERCRED) with a pidfd that says
// when that process ends (-1: none). The descriptors are the receiver's to close.
struct fetched {
  std::vector<int> descriptors;
  std::string payload;
  pid_t pid = 0;
  int pidfd = -1;
};

// Serves this rank's handover to the peers that present the secret, on its own thread, until
// every peer has it (or stop()).
class region_server {
 public:
  region_server(const std::string& secret, handover offer, int peers)
      : secret_(secret), offer_(std::move(offer)), peers_(peers) {
    if (offer_.descriptors.size() > most_descriptors || offer_.payload.size() > most_payload) {
      throw error(errc::invalid_argument,
                  "shm transport: a handover holds at most " + std::to_string(most_descriptors) +
                      " descriptors and " + std::to_string(most_payload) + " bytes");
    }
    std::random_device entropy;
    name_ = "weft-shm-" + std::to_string(::getpid()) + "-" + std::to_string(entropy()) +
            std::to_string(entropy());
    listener_ = socket_fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    socklen_t length = 0;
    const sockaddr_un address = abstract_address(name_, length);
    if (listener_.get() < 0 ||
        ::bind(listener_.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0 ||
        ::listen(listener_.get(), 64) != 0) {
      throw error(errc::transport, std::string("shm transport: cannot listen on a Unix socket: ") +
                                       std::strerror(errno));
    }
    thread_ = std::thread([this] { serve(); });
  }
  ~region_server() { stop(); }
  region_server(const region_server&) = delete;
  region_server& operator=(const region_server&) = delete;

  const std::string& name() const { return name_; }
  // Waits, until the deadline, for every peer to have fetched the handover; then stops serving.
  bool finish(deadline_clock::time_point deadline) {
    while (served_.load() < peers_ && deadline_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const bool all = served_.load() >= peers_;
    stop();
    return all;
  }
  void stop() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  void serve() {
    while (!stopping_ && served_.load() < peers_) {
      pollfd one{listener_.get(), POLLIN, 0};
      if (::poll(&one, 1, 50) <= 0) continue;
      socket_fd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (client.get() < 0) continue;
      const auto deadline = deadline_clock::now() + std::chrono::seconds(5);
      char magic[8];
      std::uint32_t length = 0;
      if (!read_all(client.get(), magic, sizeof magic, deadline) ||
          std::memcmp(magic, hello_magic, 8) != 0 ||
          !read_all(client.get(), &length, sizeof length, deadline) || length > 4096)
        continue;
      std::string offered(length, '\0');
      if (!read_all(client.get(), offered.data(), length, deadline) ||
          !bootstrap::same_secret(offered, secret_))
        continue;
      // The answer: how many descriptors and payload bytes, the descriptors attached, then the
      // payload.
      std::uint32_t counts[2] = {static_cast<std::uint32_t>(offer_.descriptors.size()),
                                 static_cast<std::uint32_t>(offer_.payload.size())};
      iovec head{counts, sizeof counts};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * most_descriptors)] = {};
      msghdr message{};
      message.msg_iov = &head;
      message.msg_iovlen = 1;
      if (!offer_.descriptors.empty()) {
        const std::size_t fd_bytes = sizeof(int) * offer_.descriptors.size();
        message.msg_control = control;
        message.msg_controllen = CMSG_SPACE(fd_bytes);
        cmsghdr* header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(fd_bytes);
        std::memcpy(CMSG_DATA(header), offer_.descriptors.data(), fd_bytes);
      }
      if (::sendmsg(client.get(), &message, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof counts))
        continue;
      if (!offer_.payload.empty() &&
          ::send(client.get(), offer_.payload.data(), offer_.payload.size(), MSG_NOSIGNAL) !=
              static_cast<ssize_t>(offer_.payload.size()))
        continue;
      ++served_;
    }
  }

  std::string secret_;
  handover offer_;
  int peers_;
  std::string name_;
  socket_fd listener_;
  std::atomic<int> served_{0};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// Fetches what `peer` serves at `name` (its region_server), presenting the secret.
inline fetched fetch_handover(const std::string& name, const std::string& secret, int peer,
                              deadline_clock::time_point deadline) {
  const std::string whose = "rank " + std::to_string(peer) + "'s region";
  socket_fd connection;
  socklen_t length = 0;
  const sockaddr_un address = abstract_address(name, length);
  while (true) {
    connection = socket_fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(connection.get(), reinterpret_cast<const sockaddr*>(&address), length) == 0)
      break;
    if ((errno != ECONNREFUSED && errno != EAGAIN && errno != ENOENT) ||
        deadline_clock::now() >= deadline) {
      throw error(errc::transport, "shm transport: cannot reach " + whose + " (" +
                                       std::strerror(errno) +
                                       "): is it on this host, in this network namespace?");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string hello(hello_magic, sizeof hello_magic);
  const auto secret_bytes = static_cast<std::uint32_t>(secret.size());
  hello.append(reinterpret_cast<const char*>(&secret_bytes), sizeof secret_bytes);
  hello += secret;
  if (::send(connection.get(), hello.data(), hello.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(hello.size())) {
    throw error(errc::transport,
                "shm transport: cannot greet " + whose + ": " + std::strerror(errno));
  }
  std::uint32_t counts[2] = {0, 0};
  iovec head{counts, sizeof counts};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * most_descriptors)] = {};
  msghdr message{};
  message.msg_iov = &head;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  if (!ready(connection.get(), POLLIN, deadline) ||
      ::recvmsg(connection.get(), &message, MSG_CMSG_CLOEXEC) !=
          static_cast<ssize_t>(sizeof counts)) {
    throw error(
        errc::transport,
        "shm transport: " + whose + " was not handed over: is WEFT_SECRET the same on every rank?");
  }
  fetched result;
  for (const cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
       header = CMSG_NXTHDR(&message, const_cast<cmsghdr*>(header))) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t n = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < n; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof fd);
      result.descriptors.push_back(fd);
    }
  }
  auto close_all = [&] {
    for (int fd : result.descriptors) ::close(fd);
  };
  if (result.descriptors.size() != counts[0] || counts[1] > most_payload) {
    close_all();
    throw error(errc::transport, "shm transport: " + whose + " came with " +
                                     std::to_string(result.descriptors.size()) + " of its " +
                                     std::to_string(counts[0]) + " descriptors");
  }
  result.payload.resize(counts[1]);
  if (counts[1] != 0 && !read_all(connection.get(), result.payload.data(), counts[1], deadline)) {
    close_all();
    throw error(errc::transport, "shm transport: " + whose + " was cut short");
  }
  ucred owner{};
  socklen_t owner_bytes = sizeof owner;
  if (::getsockopt(connection.get(), SOL_SOCKET, SO_PEERCRED, &owner, &owner_bytes) == 0)
    result.pid = owner.pid;
#ifdef SYS_pidfd_open
  if (result.pid > 0 && result.pid != ::getpid())
    result.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, result.pid, 0));
#endif
  return result;
}

// What the shm transport hands over: its region (one descriptor, its size as the payload).
inline handover region_handover(int descriptor, std::uint64_t bytes) {
  return {{descriptor}, std::string(reinterpret_cast<const char*>(&bytes), sizeof bytes)};
}

// Fetches the region served at `name`: maps it and names its owner's process.
inline peer_link fetch_region(const std::string& name, const std::string& secret, int peer,
                              deadline_clock::time_point deadline) {
  const std::string whose = "rank " + std::to_string(peer) + "'s region";
  fetched got = fetch_handover(name, secret, peer, deadline);
  std::uint64_t bytes = 0;
  if (got.descriptors.size() != 1 || got.payload.size() != sizeof bytes) {
    for (int fd : got.descriptors) ::close(fd);
    if (got.pidfd >= 0) ::close(got.pidfd);
    throw error(errc::transport, "shm transport: " + whose + " came without its descriptor");
  }
  std::memcpy(&bytes, got.payload.data(), sizeof bytes);
  peer_link link;
  link.pid = got.pid;
  link.pidfd = got.pidfd;
  try {
    link.region = map_region(got.descriptors.front(), static_cast<std::size_t>(bytes), whose);
  } catch (...) {
    if (link.pidfd >= 0) ::close(link.pidfd);
    throw;
  }
  link.region.forget_descriptor();
  return link;
}

}  // namespace weft::shm::detail
