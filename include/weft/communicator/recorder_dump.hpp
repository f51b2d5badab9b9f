// weft/communicator/recorder_dump.hpp — where flight recorders write (weft/recorder.hpp): the
// process's live recorders, the records of one (when its communicator fails) or of all (on
// SIGUSR1) appended to WEFT_RECORDER_DIR/rank-<world rank>.jsonl (0600, in a directory made
// 0700), else a summary line on stderr.
//
// SIGUSR1: the first recorder of a process installs a handler unless the program has one (a
// program's own handler is left alone); it wakes a thread of the registry's, which writes every
// live recorder. The handler only writes a byte to a pipe.
#pragma once

#include "weft/detail/env.hpp"
#include "weft/detail/write_whole.hpp"
#include "weft/recorder.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace weft::detail {

class recorder_registry {
 public:
  // The process's registry (never destroyed: its thread may outlive static destruction).
  static recorder_registry& instance() {
    static recorder_registry* const registry = new recorder_registry();
    return *registry;
  }

  void add(const flight_recorder* recorder) {
    std::lock_guard guard(lock_);
    live_.push_back(recorder);
    if (!listening_) listen_for_signal();
  }
  void remove(const flight_recorder* recorder) {
    std::lock_guard guard(lock_);
    live_.erase(std::remove(live_.begin(), live_.end(), recorder), live_.end());
  }

  // Writes one recorder's records, saying why.
  void write(const flight_recorder& recorder, std::string_view reason) {
    std::lock_guard guard(writing_);
    write_locked(recorder, reason);
  }

  // Writes every live recorder's records (SIGUSR1).
  void write_all(std::string_view reason) {
    std::lock_guard guard(lock_);
    std::lock_guard writing(writing_);
    for (const flight_recorder* recorder : live_) write_locked(*recorder, reason);
  }

 private:
  recorder_registry() = default;

  void write_locked(const flight_recorder& recorder, std::string_view reason) {
    const auto directory = env::text("WEFT_RECORDER_DIR");
    if (!directory) {
      const std::string line = recorder.summary() + " [" + std::string(reason) + "]\n";
      static_cast<void>(::write(STDERR_FILENO, line.data(), line.size()));
      return;
    }
    const std::string folder(*directory);
    if (::mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST) return;
    const std::string path = folder + "/rank-" + std::to_string(recorder.world_rank()) + ".jsonl";
    const int file = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (file < 0) return;
    static_cast<void>(write_whole(file, recorder.json_lines(reason)));
    ::close(file);
  }

  // SIGUSR1, unless the program handles it: a byte down the pipe wakes the writer thread.
  void listen_for_signal() {
    listening_ = true;
    struct sigaction current {};
    if (::sigaction(SIGUSR1, nullptr, &current) != 0 || current.sa_handler != SIG_DFL ||
        (current.sa_flags & SA_SIGINFO) != 0) {
      return;
    }
    int ends[2];
    if (::pipe2(ends, O_CLOEXEC) != 0) return;
    signal_pipe() = ends[1];
    struct sigaction wanted {};
    wanted.sa_handler = [](int) {
      const int saved = errno;
      const char byte = 1;
      static_cast<void>(::write(signal_pipe(), &byte, 1));
      errno = saved;
    };
    ::sigemptyset(&wanted.sa_mask);
    wanted.sa_flags = SA_RESTART;
    std::thread([this, reading = ends[0]] {
      char byte = 0;
      while (true) {
        const auto got = ::read(reading, &byte, 1);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return;
        write_all("SIGUSR1");
      }
    }).detach();
    ::sigaction(SIGUSR1, &wanted, nullptr);
  }
  static int& signal_pipe() {
    static int descriptor = -1;
    return descriptor;
  }

  std::mutex lock_;     // live_
  std::mutex writing_;  // one writer at a time (lines of two recorders never interleave)
  std::vector<const flight_recorder*> live_;
  bool listening_ = false;
};

// A communicator's recorder, registered while it lives (shared with the lanes of its calls in
// flight, which record into it).
class recorder_handle {
 public:
  recorder_handle() = default;
  recorder_handle(std::size_t capacity, std::vector<int> world_ranks, int rank,
                  std::uint32_t context) {
    if (capacity == 0) return;
    recorder_ = std::make_shared<flight_recorder>(capacity, std::move(world_ranks), rank, context);
    recorder_registry::instance().add(recorder_.get());
    registered_ = true;
  }
  // A lane's: records into `parent`'s recorder without registering it again.
  static recorder_handle sharing(const recorder_handle& parent) {
    recorder_handle lane;
    lane.recorder_ = parent.recorder_;
    return lane;
  }
  recorder_handle(recorder_handle&& other) noexcept
      : recorder_(std::move(other.recorder_)),
        registered_(std::exchange(other.registered_, false)) {}
  recorder_handle& operator=(recorder_handle&& other) noexcept {
    std::swap(recorder_, other.recorder_);
    std::swap(registered_, other.registered_);
    return *this;
  }
  ~recorder_handle() {
    if (registered_) recorder_registry::instance().remove(recorder_.get());
  }

  flight_recorder* get() const { return recorder_.get(); }
  flight_recorder* operator->() const { return recorder_.get(); }
  explicit operator bool() const { return recorder_ != nullptr; }

  // The call failed with `failure`: recorded, and the records written for a timeout, a lost
  // peer or a mismatch.
  void failed(const error& failure, int step, std::uint64_t bytes_sent) const {
    if (!recorder_ || !recorder_->failed(failure.what(), failure.culprit(), step, bytes_sent))
      return;
    const errc code = failure.code();
    if (code == errc::timeout || code == errc::peer_lost || code == errc::mismatch) {
      recorder_registry::instance().write(*recorder_, to_string(code));
    }
  }

 private:
  std::shared_ptr<flight_recorder> recorder_;
  bool registered_ = false;
};

}  // namespace weft::detail
