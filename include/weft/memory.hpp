// weft/memory.hpp — host_memory, the memory space of ordinary CPU memory.
#pragma once

#include <cstddef>
#include <cstring>
#include <new>
#include <span>
#include <string_view>

#include "weft/ops.hpp"
#include "weft/transport.hpp"

namespace weft {

class host_memory {
 public:
  static constexpr std::string_view name = "host";

  void copy(std::span<std::byte> dst, std::span<const std::byte> src) const {
    if (!src.empty() && dst.data() != src.data()) std::memcpy(dst.data(), src.data(), src.size());
  }

  template <class T, class Op>
  void combine(std::span<T> dst, std::span<const T> a, std::span<const T> b, const Op& op) const {
    T* out = dst.data();
    const T* left = a.data();
    const T* right = b.data();
    const std::size_t count = dst.size();
    for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<T>(op(left[i], right[i]));
  }

  template <class T, class Op>
  void finalize(std::span<T> data, const Op& op, int ranks) const {
    for (T& value : data) value = weft::finalize(op, value, ranks);
  }

  std::byte* allocate(std::size_t bytes) const {
    return static_cast<std::byte*>(::operator new (bytes == 0 ? 1 : bytes, std::align_val_t{64}));
  }
  void deallocate(std::byte* pointer, std::size_t) const {
    ::operator delete (pointer, std::align_val_t{64});
  }
};
static_assert(memory_space<host_memory>);

}  // namespace weft
