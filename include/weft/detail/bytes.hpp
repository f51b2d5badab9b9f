// weft/detail/bytes.hpp — the small vocabulary algorithms are written in: byte ranges, block
// layouts, and a reduction bound to a memory space with its element type erased.
//
// Algorithms are templates over the communicator only; element type and op stay in the facade.
// That keeps the instantiation count at (algorithms x transports) rather than
// (algorithms x transports x types x ops).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>
#include <type_traits>

#include "weft/error.hpp"
#include "weft/ops.hpp"

namespace weft::detail {

using bytes = std::span<std::byte>;
using const_bytes = std::span<const std::byte>;

// Block i of a buffer cut at byte displacements displs[0] = 0 <= displs[1] <= ... <= displs[p].
struct layout {
  std::span<const std::size_t> displs;

  int parts() const { return static_cast<int>(displs.size()) - 1; }
  std::size_t offset(int block) const { return displs[static_cast<std::size_t>(block)]; }
  std::size_t size(int block) const { return offset(block + 1) - offset(block); }
  // Blocks [first, last) as one contiguous byte range.
  std::size_t span_size(int first, int last) const { return offset(last) - offset(first); }
  // The size of the largest block.
  std::size_t largest() const {
    std::size_t most = 0;
    for (int block = 0; block < parts(); ++block) most = std::max(most, size(block));
    return most;
  }
};

// Fills displs (parts + 1 entries) so `count` elements of `element_size` bytes are cut into
// `parts` blocks whose element counts differ by at most one, larger blocks first.
inline void balanced_displacements(std::span<std::size_t> displs, std::size_t count, int parts,
                                   std::size_t element_size) {
  const std::size_t base = count / static_cast<std::size_t>(parts);
  const std::size_t extra = count % static_cast<std::size_t>(parts);
  displs[0] = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(parts); ++i) {
    displs[i + 1] = displs[i] + (base + (i < extra ? 1 : 0)) * element_size;
  }
}

// Fills displs from element counts (counts.size() + 1 entries).
inline void count_displacements(std::span<std::size_t> displs, std::span<const std::size_t> counts,
                                std::size_t element_size) {
  displs[0] = 0;
  for (std::size_t i = 0; i < counts.size(); ++i)
    displs[i + 1] = displs[i] + counts[i] * element_size;
}

inline int mod(int value, int modulus) { return ((value % modulus) + modulus) % modulus; }

// One address per type (no RTTI needed): tells which memory space a reducer was made for.
template <class T>
inline constexpr char type_tag = 0;

// A reduction (element type T, op Op) bound to a memory space, callable on byte ranges:
// combine(dst, a, b) sets dst = a op b elementwise. It does not own the memory space. An op
// that is trivially copyable and small (every built-in one, and the usual user functor) is
// held by value, so a copy of the reducer outlives the call that made it (a stream-ordered
// transport combines after the call has returned); a larger op is referred to.

class reducer {
 public:
  template <class T, class Op, class Memory>
  reducer(Memory& memory, const Op& op, std::type_identity<T>)
      : memory_(&memory),
        memory_type_(&type_tag<std::remove_cv_t<Memory>>),
        op_(held_by_value<Op> ? nullptr : &op),
        element_size_(sizeof(T)),
        commutative_(is_commutative_v<Op>),
        combine_([](void* memory_pointer, const void* op_pointer, bytes dst, const_bytes a,
                    const_bytes b) {
          const std::size_t count = dst.size() / sizeof(T);
          static_cast<Memory*>(memory_pointer)
              ->combine(std::span<T>(reinterpret_cast<T*>(dst.data()), count),
                        std::span<const T>(reinterpret_cast<const T*>(a.data()), count),
                        std::span<const T>(reinterpret_cast<const T*>(b.data()), count),
                        *static_cast<const Op*>(op_pointer));
        }),
        reduce_all_([](void* memory_pointer, const void* op_pointer,
                       std::span<std::byte* const> outs, std::span<const std::byte* const> ins,
                       std::size_t size) {
          reduce_all_with<T>(*static_cast<Memory*>(memory_pointer),
                             *static_cast<const Op*>(op_pointer), outs, ins, size);
        }) {
    if constexpr (held_by_value<Op>)
      std::memcpy(op_value_, static_cast<const void*>(&op), sizeof(Op));
  }

  void operator()(bytes dst, const_bytes a, const_bytes b) const {
    if (!dst.empty()) combine_(memory_, op(), dst, a, b);
  }
  // The same combine run by another memory space of the same type (one bound to another
  // stream, say): a stream-ordered transport's transfer combines on its own stream.
  template <class Memory>
  void apply_in(Memory& memory, bytes dst, const_bytes a, const_bytes b) const {
    if (memory_type_ != &type_tag<std::remove_cv_t<Memory>>) {
      throw error(errc::invalid_argument,
                  "a reduction made for one memory space was applied in another");
    }
    if (!dst.empty()) combine_(&memory, op(), dst, a, b);
  }
  // outs[k] = ins[0] op ins[1] op ... op ins[m-1], folded left to right, for every k (`size`
  // bytes each; with one input, a copy into every output). A memory space with reduce_all
  // (weft::cuda::device_memory: one kernel) does it in one pass; any other combines into
  // outs[0] and copies from there. An output may be the first input, no other.
  template <class Memory>
  void apply_all_in(Memory& memory, std::span<std::byte* const> outs,
                    std::span<const std::byte* const> ins, std::size_t size) const {
    if (memory_type_ != &type_tag<std::remove_cv_t<Memory>>) {
      throw error(errc::invalid_argument,
                  "a reduction made for one memory space was applied in another");
    }
    if (size != 0 && !outs.empty() && !ins.empty()) reduce_all_(&memory, op(), outs, ins, size);
  }
  std::size_t element_size() const { return element_size_; }
  bool commutative() const { return commutative_; }

 private:
  static constexpr std::size_t op_room = 32;
  template <class Op>
  static constexpr bool held_by_value = std::is_trivially_copyable_v<Op> && sizeof(Op) <= op_room &&
                                        alignof(Op) <= 16;
  const void* op() const { return op_ != nullptr ? op_ : static_cast<const void*>(op_value_); }

  template <class T, class Op, class Memory>
  static void reduce_all_with(Memory& memory, const Op& op, std::span<std::byte* const> outs,
                              std::span<const std::byte* const> ins, std::size_t size) {
    const std::size_t count = size / sizeof(T);
    auto out = [&](std::size_t k) { return std::span<T>(reinterpret_cast<T*>(outs[k]), count); };
    auto in = [&](std::size_t i) {
      return std::span<const T>(reinterpret_cast<const T*>(ins[i]), count);
    };
    if constexpr (requires { memory.reduce_all(outs, ins, count, op, std::type_identity<T>{}); }) {
      memory.reduce_all(outs, ins, count, op, std::type_identity<T>{});
    } else {
      if (ins.size() == 1) {
        for (std::size_t k = 0; k < outs.size(); ++k)
          memory.copy(std::as_writable_bytes(out(k)), std::as_bytes(in(0)));
        return;
      }
      memory.combine(out(0), in(0), in(1), op);
      for (std::size_t i = 2; i < ins.size(); ++i)
        memory.combine(out(0), std::span<const T>(out(0)), in(i), op);
      for (std::size_t k = 1; k < outs.size(); ++k) {
        memory.copy(std::as_writable_bytes(out(k)), std::as_bytes(std::span<const T>(out(0))));
      }
    }
  }

  void* memory_;
  const char* memory_type_;  // which Memory memory_ is
  const void* op_;           // the op, when not held in op_value_
  alignas(16) unsigned char op_value_[op_room] = {};
  std::size_t element_size_;
  bool commutative_;
  void (*combine_)(void*, const void*, bytes, const_bytes, const_bytes);
  void (*reduce_all_)(void*, const void*, std::span<std::byte* const>,
                      std::span<const std::byte* const>, std::size_t);
};

}  // namespace weft::detail

namespace weft::detail {

// Number of pieces of at most `chunk` bytes that cover `size` bytes (0 for an empty range).
// Written so that no piece size, up to SIZE_MAX, wraps it (size + chunk - 1 would).
inline std::size_t chunk_count(std::size_t size, std::size_t chunk) {
  return size == 0 ? 0 : (size - 1) / chunk + 1;
}

// Piece `index` of a byte range cut into pieces of `chunk` bytes (the last may be shorter).
template <class Byte>
std::span<Byte> piece(std::span<Byte> range, std::size_t index, std::size_t chunk) {
  const std::size_t begin = index * chunk;
  return range.subspan(begin, std::min(chunk, range.size() - begin));
}

}  // namespace weft::detail
