// weft/detail/little_endian.hpp — fixed-width integers in wire formats: little-endian whatever the
// host's byte order, byte by byte (no alignment asked of the buffer).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

namespace weft::detail {

template <std::unsigned_integral T>
inline void put_le(std::byte* out, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<std::byte>(value >> (8 * i));
}

template <std::unsigned_integral T>
inline T get_le(const std::byte* in) {
  T value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    value |= static_cast<T>(std::to_integer<unsigned>(in[i])) << (8 * i);
  return value;
}

inline void put32(std::byte* out, std::uint32_t value) { put_le(out, value); }
inline void put64(std::byte* out, std::uint64_t value) { put_le(out, value); }
inline std::uint32_t get32(const std::byte* in) { return get_le<std::uint32_t>(in); }
inline std::uint64_t get64(const std::byte* in) { return get_le<std::uint64_t>(in); }

}  // namespace weft::detail
