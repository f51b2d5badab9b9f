// weft/transport/shm/pool.hpp — the shared-memory transport's memory space: host memory whose
// allocations come from the pool at the end of this rank's region, which every peer maps.
//
// A send of at least config::lend_bytes from pool memory is lent, not copied (shm/region.hpp):
// the receiver reads it straight from the pool, once. The communicator's scratch comes from the
// pool, and so can a user's buffers:
//
//   auto& memory = comm.memory();
//   std::byte* bytes = memory.allocate(n * sizeof(float));   // 64-byte aligned, in the pool
//   ...
//   memory.deallocate(bytes, n * sizeof(float));
//
// When the pool (WEFT_SHM_POOL_BYTES) is used up, allocate() falls back to ordinary host memory,
// which is sent through the slots: slower, never an error.
#pragma once

#include "weft/memory.hpp"

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>

namespace weft::shm {

namespace detail {

// First-fit over [base, base + bytes) in 64-byte units, neighbours merged when given back.
class pool {
 public:
  pool(std::byte* base, std::size_t bytes) : base_(base), bytes_(bytes) {
    if (bytes_ >= unit) free_.emplace(0, bytes_ / unit * unit);
  }

  bool contains(const std::byte* pointer, std::size_t bytes) const {
    return base_ != nullptr && pointer >= base_ && bytes <= bytes_ &&
           static_cast<std::size_t>(pointer - base_) <= bytes_ - bytes;
  }
  std::size_t offset_of(const std::byte* pointer) const {
    return static_cast<std::size_t>(pointer - base_);
  }

  // nullptr when no free run is long enough.
  std::byte* take(std::size_t bytes) {
    const std::size_t need = rounded(bytes);
    std::lock_guard<std::mutex> hold(lock_);
    for (auto run = free_.begin(); run != free_.end(); ++run) {
      if (run->second < need) continue;
      const std::size_t at = run->first;
      const std::size_t left = run->second - need;
      free_.erase(run);
      if (left != 0) free_.emplace(at + need, left);
      return base_ + at;
    }
    return nullptr;
  }

  void give_back(std::byte* pointer, std::size_t bytes) {
    std::size_t at = offset_of(pointer);
    std::size_t length = rounded(bytes);
    std::lock_guard<std::mutex> hold(lock_);
    auto next = free_.lower_bound(at);
    if (next != free_.end() && at + length == next->first) {
      length += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto before = std::prev(next);
      if (before->first + before->second == at) {
        at = before->first;
        length += before->second;
        free_.erase(before);
      }
    }
    free_.emplace(at, length);
  }

 private:
  static constexpr std::size_t unit = 64;
  static std::size_t rounded(std::size_t bytes) {
    return bytes == 0 ? unit : (bytes + unit - 1) / unit * unit;
  }

  std::byte* base_;
  std::size_t bytes_;
  std::mutex lock_;
  std::map<std::size_t, std::size_t> free_;  // offset -> length of each free run
};

}  // namespace detail

// Host memory, allocated from this rank's pool while it has room (weft::memory_space).
class pool_memory : public host_memory {
 public:
  pool_memory() = default;
  explicit pool_memory(detail::pool* shared) : pool_(shared) {}

  std::byte* allocate(std::size_t bytes) const {
    if (pool_ != nullptr) {
      if (std::byte* pointer = pool_->take(bytes)) return pointer;
    }
    return host_memory::allocate(bytes);
  }
  void deallocate(std::byte* pointer, std::size_t bytes) const {
    if (pool_ != nullptr && pool_->contains(pointer, 1)) {
      pool_->give_back(pointer, bytes);
    } else {
      host_memory::deallocate(pointer, bytes);
    }
  }
  // Whether [pointer, pointer + bytes) lies in the pool (so a send of it can be lent).
  bool in_pool(const std::byte* pointer, std::size_t bytes) const {
    return pool_ != nullptr && pool_->contains(pointer, bytes);
  }

 private:
  detail::pool* pool_ = nullptr;
};
static_assert(memory_space<pool_memory>);

}  // namespace weft::shm
