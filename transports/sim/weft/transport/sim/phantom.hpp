// weft/transport/sim/phantom.hpp — buffers that have an address and no memory: what the
// simulator's phantom payload moves, so 4096 ranks of 1 GiB messages fit in one machine.
//
//   weft::sim::phantom<float> gradients(std::size_t{1} << 28);   // 1 GiB of address space
//   weft::allreduce(comm, gradients.span(), weft::sum{});          // timed, never touched
//
// A phantom buffer is address space reserved with no access (PROT_NONE, nothing committed): a
// stray read or write of it faults at once instead of reading garbage. The simulator's
// transport and memory space skip the bytes of any buffer in a phantom range and charge only
// its time; bytes outside them (an algorithm's own small messages) still move.
#pragma once

#include "weft/error.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <span>
#include <string>

namespace weft::sim {

namespace detail {

// Every phantom range of the process: start -> end.
class phantom_ranges {
 public:
  static phantom_ranges& get() {
    static phantom_ranges ranges;
    return ranges;
  }

  std::byte* reserve(std::size_t bytes) {
    const std::size_t size = std::max<std::size_t>(bytes, 1);
    void* start =
        ::mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (start == MAP_FAILED) {
      throw error(errc::transport, "cannot reserve " + std::to_string(size) +
                                       " bytes of address space for a phantom "
                                       "buffer: " +
                                       std::strerror(errno));
    }
    auto* begin = static_cast<std::byte*>(start);
    std::lock_guard lock(mutex_);
    ranges_[begin] = begin + size;
    return begin;
  }

  void release(std::byte* start, std::size_t bytes) {
    if (start == nullptr) return;
    {
      std::lock_guard lock(mutex_);
      ranges_.erase(start);
    }
    ::munmap(start, std::max<std::size_t>(bytes, 1));
  }

  // True when [p, p + bytes) lies in a phantom range (any byte of it, for bytes > 0).
  bool contains(const void* p) const {
    const auto* at = static_cast<const std::byte*>(p);
    std::lock_guard lock(mutex_);
    auto after = ranges_.upper_bound(const_cast<std::byte*>(at));
    if (after == ranges_.begin()) return false;
    const auto& [start, end] = *std::prev(after);
    return at >= start && at < end;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::byte*, std::byte*> ranges_;
};

}  // namespace detail

// True when `p` points into a phantom buffer (or phantom scratch of the simulator).
inline bool is_phantom(const void* p) {
  return p != nullptr && detail::phantom_ranges::get().contains(p);
}

// `count` elements of T that take address space only.
template <class T>
class phantom {
 public:
  explicit phantom(std::size_t count)
      : count_(count), start_(detail::phantom_ranges::get().reserve(count * sizeof(T))) {}
  ~phantom() { detail::phantom_ranges::get().release(start_, count_ * sizeof(T)); }
  phantom(const phantom&) = delete;
  phantom& operator=(const phantom&) = delete;

  std::span<T> span() const { return {reinterpret_cast<T*>(start_), count_}; }
  std::size_t size() const { return count_; }

 private:
  std::size_t count_;
  std::byte* start_;
};

}  // namespace weft::sim
