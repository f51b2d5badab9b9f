// weft/types.hpp — the 16-bit floating element types: weft::bfloat16 and weft::half.
//
// Both are storage types: arithmetic converts to float, computes there, and rounds back to
// nearest-even, so every rank that combines the same operands gets the same bits. Their
// conversions run on the host and, under nvcc, on a GPU (weft/detail/host_device.hpp).
#pragma once

#include <cstdint>
#include <type_traits>

#include "weft/detail/host_device.hpp"

namespace weft {

// bfloat16: 1 sign, 8 exponent, 7 mantissa bits — the top half of an IEEE float.
struct bfloat16 {
  std::uint16_t bits = 0;

  constexpr bfloat16() = default;
  WEFT_HOST_DEVICE constexpr bfloat16(float value)
      : bits(from_float(value)) {}  // NOLINT: implicit like float
  WEFT_HOST_DEVICE constexpr operator float() const {
    return detail::bit_cast<float>(std::uint32_t{bits} << 16);
  }

  static WEFT_HOST_DEVICE constexpr bfloat16 from_bits(std::uint16_t raw) {
    bfloat16 result;
    result.bits = raw;
    return result;
  }

  static WEFT_HOST_DEVICE constexpr std::uint16_t from_float(float value) {
    const auto word = detail::bit_cast<std::uint32_t>(value);
    if ((word & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep the sign, force a quiet NaN
      return static_cast<std::uint16_t>((word >> 16) | 0x0040u);
    }
    const std::uint32_t rounding = 0x7fffu + ((word >> 16) & 1u);  // round to nearest even
    return static_cast<std::uint16_t>((word + rounding) >> 16);
  }

  friend WEFT_HOST_DEVICE constexpr bool operator==(bfloat16 a, bfloat16 b) {
    return float(a) == float(b);
  }
  friend WEFT_HOST_DEVICE constexpr bool operator<(bfloat16 a, bfloat16 b) {
    return float(a) < float(b);
  }
};

// half: IEEE binary16 — 1 sign, 5 exponent, 10 mantissa bits.
struct half {
  std::uint16_t bits = 0;

  constexpr half() = default;
  WEFT_HOST_DEVICE constexpr half(float value)
      : bits(from_float(value)) {}  // NOLINT: implicit like float
  WEFT_HOST_DEVICE constexpr operator float() const { return to_float(bits); }

  static WEFT_HOST_DEVICE constexpr half from_bits(std::uint16_t raw) {
    half result;
    result.bits = raw;
    return result;
  }

  static WEFT_HOST_DEVICE constexpr std::uint16_t from_float(float value) {
    std::uint32_t word = detail::bit_cast<std::uint32_t>(value);
    const auto sign = static_cast<std::uint16_t>((word >> 16) & 0x8000u);
    word &= 0x7fffffffu;
    if (word >= 0x47800000u) {                        // |value| >= 65536, inf or NaN
      if (word > 0x7f800000u) return sign | 0x7e00u;  // NaN
      return sign | 0x7c00u;                          // overflow rounds to infinity
    }
    if (word < 0x38800000u) {  // below 2^-14: the result is subnormal or zero
      // Adding 0.5 aligns the binary point so the float adder rounds to nearest even for us.
      const float shifted = detail::bit_cast<float>(word) + 0.5f;
      return sign |
             static_cast<std::uint16_t>(detail::bit_cast<std::uint32_t>(shifted) - 0x3f000000u);
    }
    const std::uint32_t odd = (word >> 13) & 1u;
    word += 0xc8000fffu + odd;  // rebias the exponent (-112 << 23) and round to nearest even
    return sign | static_cast<std::uint16_t>(word >> 13);  // 65520 and up carry into infinity
  }

  static WEFT_HOST_DEVICE constexpr float to_float(std::uint16_t raw) {
    const std::uint32_t sign = std::uint32_t{raw & 0x8000u} << 16;
    const std::uint32_t exponent = (raw >> 10) & 0x1fu;
    const std::uint32_t mantissa = raw & 0x3ffu;
    if (exponent == 0) {
      const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;  // subnormal or zero
      return detail::bit_cast<float>(sign | detail::bit_cast<std::uint32_t>(magnitude));
    }
    if (exponent == 31) return detail::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
    return detail::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  }

  friend WEFT_HOST_DEVICE constexpr bool operator==(half a, half b) { return float(a) == float(b); }
  friend WEFT_HOST_DEVICE constexpr bool operator<(half a, half b) { return float(a) < float(b); }
};

template <class T>
inline constexpr bool is_narrow_float_v = std::is_same_v<T, bfloat16> || std::is_same_v<T, half>;

}  // namespace weft
