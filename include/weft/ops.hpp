// weft/ops.hpp — the built-in reductions and what makes a user callable a reduction.
//
// A reduction is a callable op(a, b) -> T that is associative. It may declare
//   static constexpr bool commutative = true;   // lets every algorithm reduce in any order
//   T finalize(T value, int ranks) const;        // applied once to the result (avg divides)
// Non-commutative reductions (commutative absent or false) run only on algorithms that combine
// operands in rank order: rank 0's contribution first, then rank 1's, and so on.
//
// Integer arithmetic wraps (two's complement) instead of overflowing, so results are defined.
// The built-in reductions run on the host and, under nvcc, in a device memory space's kernels
// (weft/detail/host_device.hpp); a user reduction used on device memory must be
// `__host__ __device__` too.
#pragma once

#include <concepts>
#include <string_view>
#include <type_traits>

#include "weft/detail/host_device.hpp"
#include "weft/types.hpp"

namespace weft {

namespace detail {
// a + b and a * b for integers without signed overflow: compute in the unsigned type.
template <class T>
WEFT_HOST_DEVICE constexpr T wrapping_add(T a, T b) {
  using unsigned_t = std::make_unsigned_t<T>;
  return static_cast<T>(
      static_cast<unsigned_t>(static_cast<unsigned_t>(a) + static_cast<unsigned_t>(b)));
}
template <class T>
WEFT_HOST_DEVICE constexpr T wrapping_mul(T a, T b) {
  using unsigned_t = std::make_unsigned_t<T>;
  // unsigned short * unsigned short promotes to int and can overflow; widen first.
  using wide_t = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, unsigned_t>;
  return static_cast<T>(static_cast<unsigned_t>(static_cast<wide_t>(static_cast<unsigned_t>(a)) *
                                                static_cast<wide_t>(static_cast<unsigned_t>(b))));
}
template <class T>
concept wrapping_integer = std::integral<T> && !std::same_as<T, bool>;
}  // namespace detail

struct sum {
  static constexpr bool commutative = true;
  static constexpr std::string_view name = "sum";
  template <class T>
  WEFT_HOST_DEVICE constexpr T operator()(T a, T b) const {
    if constexpr (detail::wrapping_integer<T>)
      return detail::wrapping_add(a, b);
    else if constexpr (is_narrow_float_v<T>)
      return T(float(a) + float(b));
    else
      return a + b;
  }
};

struct prod {
  static constexpr bool commutative = true;
  static constexpr std::string_view name = "prod";
  template <class T>
  WEFT_HOST_DEVICE constexpr T operator()(T a, T b) const {
    if constexpr (detail::wrapping_integer<T>)
      return detail::wrapping_mul(a, b);
    else if constexpr (is_narrow_float_v<T>)
      return T(float(a) * float(b));
    else
      return a * b;
  }
};

struct min {
  static constexpr bool commutative = true;
  static constexpr std::string_view name = "min";
  template <class T>
  WEFT_HOST_DEVICE constexpr T operator()(T a, T b) const {
    return b < a ? b : a;
  }
};

struct max {
  static constexpr bool commutative = true;
  static constexpr std::string_view name = "max";
  template <class T>
  WEFT_HOST_DEVICE constexpr T operator()(T a, T b) const {
    return a < b ? b : a;
  }
};

// Sum across ranks, divided once by the number of ranks (integer division for integers).
struct avg {
  static constexpr bool commutative = true;
  static constexpr std::string_view name = "avg";
  template <class T>
  WEFT_HOST_DEVICE constexpr T operator()(T a, T b) const {
    return sum{}(a, b);
  }
  template <class T>
  WEFT_HOST_DEVICE constexpr T finalize(T value, int ranks) const {
    if constexpr (is_narrow_float_v<T>)
      return T(float(value) / static_cast<float>(ranks));
    else
      return static_cast<T>(value / static_cast<T>(ranks));
  }
};

struct band {
  static constexpr bool commutative = true;
  static constexpr std::string_view name = "band";
  template <std::integral T>
  WEFT_HOST_DEVICE constexpr T operator()(T a, T b) const {
    return static_cast<T>(a & b);
  }
};

struct bor {
  static constexpr bool commutative = true;
  static constexpr std::string_view name = "bor";
  template <std::integral T>
  WEFT_HOST_DEVICE constexpr T operator()(T a, T b) const {
    return static_cast<T>(a | b);
  }
};

struct bxor {
  static constexpr bool commutative = true;
  static constexpr std::string_view name = "bxor";
  template <std::integral T>
  WEFT_HOST_DEVICE constexpr T operator()(T a, T b) const {
    return static_cast<T>(a ^ b);
  }
};

// weft::reduction<Op, T> — requirements on a reduction, in order:
//   1. Op is copy constructible (algorithms hold it by value);
//   2. op(a, b) with two const T values is valid and yields something convertible to T;
//   3. (semantic, not checked) op is associative; if Op::commutative is true it is commutative.
template <class Op, class T>
concept reduction = std::copy_constructible<Op> && requires(const Op& op, const T& a, const T& b) {
  { op(a, b) } -> std::convertible_to<T>;
};

// True when Op declares `static constexpr bool commutative = true`.
template <class Op>
inline constexpr bool is_commutative_v = [] {
  if constexpr (requires { Op::commutative; })
    return bool(Op::commutative);
  else
    return false;
}();

// Applies Op::finalize if Op has one (avg); identity otherwise.
template <class T, class Op>
WEFT_HOST_DEVICE constexpr T finalize(const Op& op, T value, int ranks) {
  if constexpr (requires { op.finalize(value, ranks); })
    return op.finalize(value, ranks);
  else
    return value;
}

template <class Op, class T>
inline constexpr bool has_finalize_v = requires(const Op& op, T value) {
  op.finalize(value, 1);
};

template <class Op>
constexpr std::string_view op_name() {
  if constexpr (requires { Op::name; })
    return Op::name;
  else
    return "user";
}

}  // namespace weft
