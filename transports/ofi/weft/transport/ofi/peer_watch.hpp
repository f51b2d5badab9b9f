// weft/transport/ofi/peer_watch.hpp — learning at once that a peer process on this host has
// ended, and keeping a provider call from waiting on it forever.
//
// Every rank publishes its process identity (this host's boot id, its PID namespace and its
// pid) beside its fabric address. A rank watches each peer that shares its host and namespace
// through a pidfd, on a thread of its own that sleeps in poll(2) and so costs nothing until a
// peer exits. Then it
//   1. marks the peer gone, so a wait on it ends with peer_lost and nothing more is posted to it;
//   2. runs the transport's handler, which for libfabric's shm provider replaces this process's
//      mapping of the dead peer's shared region with zeroed private memory and removes the
//      region's file: libfabric 1.17's shm provider guards each region with a spin lock in the
//      region itself, and a process killed while holding it would leave every later send to it
//      spinning forever inside fi_tsend. A zeroed page reads as unlocked and as a full queue,
//      so the call returns -FI_EAGAIN and the wait ends with the error instead;
//   3. keeps an eye on the transport's calls into the provider: one that has not returned 5 s
//      after a peer died is reported on stderr (the provider holds a lock the dead process
//      took), and after stuck_limit the process ends with that message rather than spin on.
//
// Peers on other hosts (or where pidfd_open is missing) are not watched: their death shows as
// the provider's connection error or as the communicator's timeout.
#pragma once

#include "weft/detail/this_host.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace weft::ofi::detail {

// This process as its peers see it: "<boot id>/<pid namespace>/<pid>"; the first two are empty
// where /proc does not say, and then nobody watches it.
inline std::string process_identity() {
  return weft::detail::boot_id() + "/" + weft::detail::namespace_of("pid") + "/" +
         std::to_string(::getpid());
}

// The pid in `identity` when it names a process this one can watch (same boot, same PID
// namespace), else 0.
inline pid_t watchable_pid(const std::string& identity, const std::string& own) {
  const auto host_end = identity.rfind('/');
  const auto own_end = own.rfind('/');
  if (host_end == std::string::npos || own_end == std::string::npos || host_end == 0 ||
      identity.compare(0, host_end, own, 0, own_end) != 0 || own.find("//") != std::string::npos)
    return 0;
  try {
    return static_cast<pid_t>(std::stol(identity.substr(host_end + 1)));
  } catch (const std::exception&) {
    return 0;
  }
}

// Whether process `pid` (on this host) has exited, reaped by its parent or not yet (a zombie
// still answers kill(2), its pidfd does not), waiting up to `patience` for it: a process closes
// its descriptors (so its peers hear it went) a moment before it has ended.
inline bool process_ended(pid_t pid,
                          std::chrono::milliseconds patience = std::chrono::milliseconds(0)) {
#ifdef SYS_pidfd_open
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd >= 0) {
    pollfd exited{fd, POLLIN, 0};
    const bool ended = ::poll(&exited, 1, static_cast<int>(patience.count())) == 1;
    ::close(fd);
    return ended;
  }
#endif
  const auto until = std::chrono::steady_clock::now() + patience;
  while (!(::kill(pid, 0) != 0 && errno == ESRCH)) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Calls into the provider, counted by the one thread that makes them: the count steps on entering
// and on leaving a call, so it is odd while the thread is inside one.
class call_tracker {
 public:
  void step() noexcept {
    calls_.store(calls_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  std::uint64_t sample() const noexcept { return calls_.load(std::memory_order_acquire); }

 private:
  std::atomic<std::uint64_t> calls_{0};
};

// One call into the provider, counted for as long as it lasts (never nested).
struct provider_call {
  explicit provider_call(call_tracker& tracker) noexcept : tracker_(tracker) { tracker_.step(); }
  ~provider_call() { tracker_.step(); }
  provider_call(const provider_call&) = delete;
  provider_call& operator=(const provider_call&) = delete;

 private:
  call_tracker& tracker_;
};

class peer_watch {
 public:
  struct peer {
    int rank = 0;
    pid_t pid = 0;
  };
  // Runs on the watching thread once per peer that exits: (rank, pid).
  using exit_handler = std::function<void(int, pid_t)>;

  // Watches `peers` (ranks of a world of `size`); `describe` names this rank in messages.
  peer_watch(int size, const std::vector<peer>& peers, exit_handler on_exit,
             const call_tracker& calls, std::string describe, std::chrono::milliseconds stuck_limit)
      : gone_(std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(size))),
        on_exit_(std::move(on_exit)),
        calls_(calls),
        who_(std::move(describe)),
        stuck_limit_(stuck_limit) {
    for (int rank = 0; rank < size; ++rank) gone_[static_cast<std::size_t>(rank)] = false;
#ifdef SYS_pidfd_open
    for (const auto& each : peers) {
      const int fd = static_cast<int>(::syscall(SYS_pidfd_open, each.pid, 0));
      if (fd >= 0) watched_.push_back({each, fd});
    }
#endif
    if (watched_.empty()) return;
    stop_ = ::eventfd(0, EFD_CLOEXEC);
    if (stop_ < 0) {
      close_watched();
      return;
    }
    thread_ = std::thread([this] { run(); });
  }

  peer_watch(const peer_watch&) = delete;
  peer_watch& operator=(const peer_watch&) = delete;

  ~peer_watch() { stop(); }

  // Ends the watching thread (idempotent); the handler never runs after this returns.
  void stop() {
    if (thread_.joinable()) {
      const std::uint64_t one = 1;
      [[maybe_unused]] const auto written = ::write(stop_, &one, sizeof one);
      thread_.join();
    }
    close_watched();
    if (stop_ >= 0) ::close(stop_);
    stop_ = -1;
  }

  // True once `rank`'s process has exited (only ever for watched peers).
  bool gone(int rank) const noexcept {
    return gone_[static_cast<std::size_t>(rank)].load(std::memory_order_acquire);
  }
  bool any_gone() const noexcept { return any_gone_.load(std::memory_order_acquire); }
  // Whether `rank`'s process has exited, asked now rather than waiting for the watching thread
  // (for an error that may be its death).
  bool ended(int rank) const noexcept {
    if (gone(rank)) return true;
    for (const auto& each : watched_) {
      if (each.who.rank != rank || each.fd < 0) continue;
      pollfd exited{each.fd, POLLIN, 0};
      return ::poll(&exited, 1, 0) == 1;
    }
    return false;
  }
  std::size_t watched() const noexcept { return watched_.size(); }

  // The pid of a watched peer, 0 for one not watched.
  pid_t pid_of(int rank) const noexcept {
    for (const auto& each : watched_)
      if (each.who.rank == rank) return each.who.pid;
    return 0;
  }

 private:
  struct entry {
    peer who;
    int fd = -1;
  };

  void close_watched() {
    for (auto& each : watched_) {
      if (each.fd >= 0) ::close(each.fd);
      each.fd = -1;
    }
  }

  void run() {
    std::vector<pollfd> fds;
    std::vector<std::size_t> index;  // fds[i + 1] watches watched_[index[i]]
    std::uint64_t last_sample = 0;
    auto unchanged_since = std::chrono::steady_clock::now();
    bool reported = false;
    while (true) {
      fds.assign(1, pollfd{stop_, POLLIN, 0});
      index.clear();
      for (std::size_t i = 0; i < watched_.size(); ++i) {
        if (gone(watched_[i].who.rank)) continue;
        fds.push_back(pollfd{watched_[i].fd, POLLIN, 0});
        index.push_back(i);
      }
      // Sleep until a peer exits; once one has, wake each second to look at the provider calls.
      const int ready = ::poll(fds.data(), fds.size(), any_gone() ? 1000 : -1);
      if (ready < 0 && errno != EINTR) return;
      if (fds[0].revents != 0) return;
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        const auto& who = watched_[index[i - 1]].who;
        if (!any_gone()) first_gone_ = who;  // the one whose lock a stuck call likely waits on
        gone_[static_cast<std::size_t>(who.rank)].store(true, std::memory_order_release);
        any_gone_.store(true, std::memory_order_release);
        if (on_exit_) on_exit_(who.rank, who.pid);
      }
      if (!any_gone()) continue;
      const std::uint64_t now_sample = calls_.sample();
      const auto now = std::chrono::steady_clock::now();
      if (now_sample != last_sample || now_sample % 2 == 0) {
        last_sample = now_sample;
        unchanged_since = now;
        continue;
      }
      const auto stuck = now - unchanged_since;
      if (stuck >= std::chrono::seconds(5) && !reported) {
        reported = true;
        std::fprintf(
            stderr,
            "weft: %s: a call into libfabric has not returned for %lld s since the process "
            "of rank %d (pid %d) on this host ended; the provider waits on a lock the dead "
            "process held and cannot be freed from outside\n",
            who_.c_str(),
            static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(stuck).count()),
            first_gone_.rank, static_cast<int>(first_gone_.pid));
      }
      if (stuck >= stuck_limit_) {
        std::fprintf(
            stderr,
            "weft: %s: ending the process: a call into libfabric has been stuck for "
            "%lld s on a lock held by the process of rank %d (pid %d), which died: the job "
            "lost rank %d\n",
            who_.c_str(),
            static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(stuck).count()),
            first_gone_.rank, static_cast<int>(first_gone_.pid), first_gone_.rank);
        std::abort();
      }
    }
  }

  std::unique_ptr<std::atomic<bool>[]> gone_;
  std::atomic<bool> any_gone_{false};
  exit_handler on_exit_;
  const call_tracker& calls_;
  std::string who_;
  std::chrono::milliseconds stuck_limit_;
  std::vector<entry> watched_;
  peer first_gone_{};  // the first watched peer whose process ended (the watching thread's)
  int stop_ = -1;
  std::thread thread_;
};

// One lock for the whole process around changes to mappings libfabric made: a watcher replaces
// a dead peer's mapping only while no transport of this process is closing its endpoint (which
// unmaps them).
inline std::mutex& mapping_lock() {
  static std::mutex lock;
  return lock;
}

}  // namespace weft::ofi::detail
