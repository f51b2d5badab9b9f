// weft/buffer.hpp — memory from a transport's memory space, which may be faster to send from
// than memory from elsewhere (the shm transport lends a send from its pool instead of copying it):
//
//   weft::buffer<float, weft::shm::pool_memory> data(comm.memory(), n);  // any memory space
//   weft::allreduce(comm, data.span(), weft::sum{});
//
//   // host spaces only:
//   std::vector<float, weft::allocator<float, weft::shm::pool_memory>> v(n, 1.0f, comm.memory());
//
// The memory space must outlive the buffer (a transport's: free the buffer before the transport
// goes). Whether the CPU may touch the elements is the memory space's to say (host spaces: yes;
// a device space: no, only its copy and combine).
#pragma once

#include "weft/transport.hpp"

#include <cstddef>
#include <span>
#include <utility>

namespace weft {

template <element T, memory_space Memory>
class buffer {
 public:
  buffer(Memory& memory, std::size_t count)
      : memory_(&memory),
        data_(reinterpret_cast<T*>(memory.allocate(count * sizeof(T)))),
        count_(count) {}
  buffer(buffer&& other) noexcept
      : memory_(other.memory_),
        data_(std::exchange(other.data_, nullptr)),
        count_(std::exchange(other.count_, 0)) {}
  buffer& operator=(buffer&& other) noexcept {
    if (this != &other) {
      reset();
      memory_ = other.memory_;
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  ~buffer() { reset(); }

  T* data() const { return data_; }
  std::size_t size() const { return count_; }
  std::span<T> span() const { return {data_, count_}; }
  T& operator[](std::size_t index) const { return data_[index]; }

 private:
  void reset() {
    if (data_ != nullptr)
      memory_->deallocate(reinterpret_cast<std::byte*>(data_), count_ * sizeof(T));
    data_ = nullptr;
    count_ = 0;
  }

  Memory* memory_;
  T* data_;
  std::size_t count_;
};

// A standard allocator over a host memory space (the CPU constructs the elements), for
// containers whose storage should come from a transport: std::vector<T, weft::allocator<T, M>>.
template <class T, memory_space Memory>
class allocator {
 public:
  using value_type = T;

  allocator(Memory& memory) noexcept : memory_(&memory) {}  // NOLINT: converts, as allocators do
  template <class U>
  allocator(const allocator<U, Memory>& other) noexcept : memory_(other.memory()) {}

  T* allocate(std::size_t count) {
    return reinterpret_cast<T*>(memory_->allocate(count * sizeof(T)));
  }
  void deallocate(T* pointer, std::size_t count) noexcept {
    memory_->deallocate(reinterpret_cast<std::byte*>(pointer), count * sizeof(T));
  }
  Memory* memory() const noexcept { return memory_; }

  template <class U>
  bool operator==(const allocator<U, Memory>& other) const noexcept {
    return memory_ == other.memory();
  }

 private:
  Memory* memory_;
};

}  // namespace weft
