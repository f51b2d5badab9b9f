// weft/stream/processes/sharing.hpp — what a stream-ordered rank needs of its backend to
// share memory with other processes, the memory space it hands out, and the backend on host
// threads.
#pragma once

#include "weft/memory.hpp"
#include "weft/stream/backend.hpp"
#include "weft/stream/host_streams.hpp"
#include "weft/transport/shm/pool.hpp"
#include "weft/transport/shm/region.hpp"

#include <concepts>
#include <cstddef>
#include <string>
#include <string_view>

namespace weft::stream {

// weft::stream::sharing_backend<B> — a weft::stream::backend whose device memory other
// processes can map:
//   1. make_pool(device, bytes): memory of `device` that peers map (B::pool_type: data(),
//      bytes(): its size as made, at least `bytes` (a device may round it up); descriptor(): a
//      file descriptor to hand over, or -1; handle(): bytes to hand over, or empty; way(): how
//      it is shared, for describe());
//   2. map_pool(device, descriptor, handle, bytes): a peer's pool, of the bytes() it made,
//      mapped for `device` (B::mapped_type: data()); the descriptor, when not -1, becomes the
//      mapping's;
//   3. register_host(p, n) / unregister_host(p): host memory (the ranks' regions) that the
//      device's streams then wait on and write;
//   4. devices(): how many devices this process sees.
template <class B>
concept sharing_backend = weft::stream::backend<B> &&
    requires(B& b, int device, int fd, std::string_view handle, std::size_t n, std::byte* p,
             typename B::pool_type& pool, typename B::mapped_type& mapped) {
  { b.make_pool(device, n) } -> std::same_as<typename B::pool_type>;
  { b.map_pool(device, fd, handle, n) } -> std::same_as<typename B::mapped_type>;
  { pool.data() } -> std::same_as<std::byte*>;
  { pool.bytes() } -> std::same_as<std::size_t>;
  { pool.descriptor() } -> std::same_as<int>;
  { pool.handle() } -> std::same_as<std::string>;
  { mapped.data() } -> std::same_as<std::byte*>;
  {b.register_host(p, n)};
  {b.unregister_host(p)};
  { b.devices() } -> std::same_as<int>;
};

// The memory space of a stream-ordered rank: the backend's (copies and combines on the rank's
// stream), with allocations from the rank's pool while it has room. A send from the pool is
// read by the receiver in place; from anywhere else it is staged there first.
template <class Inner>
class pooled_memory : public Inner {
 public:
  pooled_memory(Inner inner, weft::shm::detail::pool* shared)
      : Inner(std::move(inner)), pool_(shared) {}

  std::byte* allocate(std::size_t bytes) const {
    if (std::byte* pointer = pool_->take(bytes)) return pointer;
    return Inner::allocate(bytes);
  }
  void deallocate(std::byte* pointer, std::size_t bytes) const {
    if (pool_->contains(pointer, 1)) {
      pool_->give_back(pointer, bytes);
    } else {
      Inner::deallocate(pointer, bytes);
    }
  }
  bool in_pool(const std::byte* pointer, std::size_t bytes) const {
    return pool_->contains(pointer, bytes);
  }

 private:
  weft::shm::detail::pool* pool_;
};

// The backend on host threads (weft::stream::host_streams) with its pool in a memfd region:
// the stream-ordered protocol between processes with no GPU, for tests and for programs
// written for GPUs on a machine without one.
class host_sharing : public weft::stream::host_streams {
 public:
  static constexpr std::string_view tuning_key = "host-stream";

  class pool_type {
   public:
    explicit pool_type(weft::shm::detail::mapping region) : region_(std::move(region)) {}
    std::byte* data() const { return region_.base(); }
    std::size_t bytes() const { return region_.bytes(); }
    int descriptor() const { return region_.descriptor(); }
    std::string handle() const { return {}; }
    std::string_view way() const { return "memfd"; }

   private:
    weft::shm::detail::mapping region_;
  };
  class mapped_type {
   public:
    explicit mapped_type(weft::shm::detail::mapping region) : region_(std::move(region)) {}
    std::byte* data() const { return region_.base(); }

   private:
    weft::shm::detail::mapping region_;
  };

  pool_type make_pool(int, std::size_t bytes) {
    return pool_type(weft::shm::detail::create_region(bytes));
  }
  mapped_type map_pool(int, int descriptor, std::string_view, std::size_t bytes) {
    auto region = weft::shm::detail::map_region(descriptor, bytes, "a peer's pool");
    region.forget_descriptor();
    return mapped_type(std::move(region));
  }
  void register_host(std::byte*, std::size_t) {}
  void unregister_host(std::byte*) {}
  int devices() const { return 1; }
};
static_assert(sharing_backend<host_sharing>);

}  // namespace weft::stream
