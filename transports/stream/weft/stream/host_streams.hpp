// weft/stream/host_streams.hpp — streams on CPU threads: a backend for the stream-ordered protocol
// that runs the GPU path's protocol (enqueued copies, combines and flag waits) with no GPU.
//
//   weft::stream::local_ranks<weft::stream::host_streams> ranks({}, {0, 0, 0, 0});  // 4 ranks
//   weft::communicator comm(ranks.endpoint(0));
//
// Each stream is a thread that runs the work enqueued on it in order; a flag wait blocks that
// thread until the flag reaches its value. The memory space (host_stream_memory) enqueues its
// copies and combines on its stream, like a device memory space, so a program written for
// weft's CUDA communicators runs unchanged on host memory, and the tests check the protocol
// on any machine. All ranks share one "device" (direct_access is always true).
#pragma once

#include "weft/error.hpp"
#include "weft/memory.hpp"
#include "weft/stream/flags.hpp"
#include "weft/transport.hpp"

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace weft::stream {

namespace detail {
// Wakes the streams waiting on flags when any stream writes one (the host's own writes, by
// abort, are seen within a millisecond).
struct flag_bell {
  std::mutex mutex;
  std::condition_variable rung;
  void ring() {
    std::lock_guard lock(mutex);
    rung.notify_all();
  }
};
}  // namespace detail

// One ordered queue of work on its own thread. A work item that throws makes the stream
// broken, like a sticky device error: idle() then throws what it threw.
class host_stream {
 public:
  explicit host_stream(std::shared_ptr<detail::flag_bell> bell)
      : bell_(std::move(bell)), thread_([this] { run(); }) {}
  host_stream(const host_stream&) = delete;
  host_stream& operator=(const host_stream&) = delete;
  ~host_stream() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    more_.notify_one();
    thread_.join();
  }

  void enqueue(std::function<void()> work) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(work));
    }
    more_.notify_one();
  }

  bool idle() {
    std::lock_guard lock(mutex_);
    if (!failure_.empty()) throw error(errc::transport, "a host stream failed: " + failure_);
    return queue_.empty() && !running_;
  }

  detail::flag_bell& bell() { return *bell_; }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    while (true) {
      more_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      std::function<void()> work = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      lock.unlock();
      std::string failed;
      try {
        if (failure_seen_.empty()) work();  // after a failure, the rest is skipped, as on a device
      } catch (const std::exception& e) {
        failed = e.what();
      } catch (...) {
        failed = "unknown exception";
      }
      lock.lock();
      running_ = false;
      if (!failed.empty() && failure_.empty()) failure_ = failure_seen_ = failed;
    }
  }

  std::shared_ptr<detail::flag_bell> bell_;
  std::mutex mutex_;
  std::condition_variable more_;
  std::deque<std::function<void()>> queue_;
  bool running_ = false;
  bool stopping_ = false;
  std::string failure_;
  std::string failure_seen_;  // read by the stream's own thread only
  std::thread thread_;        // last: starts once the rest is built
};

// Host memory whose operations run on a host_stream, in order (memory_space's rules; rule 1's
// "ordered after every earlier operation" is the stream's order).
class host_stream_memory {
 public:
  static constexpr std::string_view name = "host-stream";

  explicit host_stream_memory(host_stream* stream = nullptr) : stream_(stream) {}

  void copy(std::span<std::byte> dst, std::span<const std::byte> src) const {
    if (src.empty() || dst.data() == src.data()) return;
    stream_->enqueue([dst, src] { host_memory{}.copy(dst, src); });
  }

  template <class T, class Op>
  void combine(std::span<T> dst, std::span<const T> a, std::span<const T> b, const Op& op) const {
    if (dst.empty()) return;
    stream_->enqueue([dst, a, b, op] { host_memory{}.combine(dst, a, b, op); });
  }

  template <class T, class Op>
  void finalize(std::span<T> data, const Op& op, int ranks) const {
    if (data.empty()) return;
    stream_->enqueue([data, op, ranks] { host_memory{}.finalize(data, op, ranks); });
  }

  // Allocated now (nothing touches it before the stream does); freed in stream order.
  std::byte* allocate(std::size_t bytes) const { return host_memory{}.allocate(bytes); }
  void deallocate(std::byte* pointer, std::size_t bytes) const {
    if (pointer == nullptr) return;
    stream_->enqueue([pointer, bytes] { host_memory{}.deallocate(pointer, bytes); });
  }

 private:
  host_stream* stream_;
};
static_assert(memory_space<host_stream_memory>);

// The backend (weft::stream::backend): streams are threads, flags are ordinary memory.
class host_streams {
 public:
  using stream_type = host_stream*;
  using memory_type = host_stream_memory;
  static constexpr std::string_view tuning_key = "host-stream";

  stream_type make_stream(int) { return new host_stream(bell_); }
  void destroy_stream(stream_type s) { delete s; }
  bool idle(stream_type s) { return s->idle(); }
  memory_type memory_on(int, stream_type s) { return memory_type(s); }

  std::uint32_t* allocate_flags(std::size_t n) { return new std::uint32_t[n](); }
  void free_flags(std::uint32_t* flags, std::size_t) { delete[] flags; }

  void write_flag(stream_type s, std::uint32_t* flag, std::uint32_t value) {
    s->enqueue([flag, value, bell = &s->bell()] {
      store_flag(flag, value);
      bell->ring();
    });
  }
  void wait_flag(stream_type s, const std::uint32_t* flag, std::uint32_t value) {
    s->enqueue([flag, value, bell = &s->bell()] {
      std::unique_lock lock(bell->mutex);
      while (!reached(read_flag(flag), value))
        bell->rung.wait_for(lock, std::chrono::milliseconds(1));
    });
  }
  // Several waits as one task (the batched form a GPU backend has).
  void wait_flags(stream_type s, std::span<const flag_wait> waits) {
    s->enqueue([all = std::vector<flag_wait>(waits.begin(), waits.end()), bell = &s->bell()] {
      std::unique_lock lock(bell->mutex);
      for (const auto& w : all) {
        while (!reached(read_flag(w.word), w.value))
          bell->rung.wait_for(lock, std::chrono::milliseconds(1));
      }
    });
  }
  bool direct_access(int, int) { return true; }

 private:
  std::shared_ptr<detail::flag_bell> bell_ = std::make_shared<detail::flag_bell>();
};

}  // namespace weft::stream
