// weft/detail/hex.hpp — bytes as lowercase hex text and back, for values that travel through
// text protocols (the store's values, PMI-1's space-separated fields).
#pragma once

#include <string>
#include <string_view>

namespace weft::detail {

inline std::string to_hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    out += digits[static_cast<unsigned char>(c) >> 4];
    out += digits[static_cast<unsigned char>(c) & 15];
  }
  return out;
}

// The bytes `text` spells in lowercase hex; empty when it is not such text.
inline std::string from_hex(std::string_view text) {
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (text.size() % 2 != 0) return {};
  std::string out;
  out.reserve(text.size() / 2);
  for (std::size_t i = 0; i < text.size(); i += 2) {
    const int high = digit(text[i]);
    const int low = digit(text[i + 1]);
    if (high < 0 || low < 0) return {};
    out += static_cast<char>(high * 16 + low);
  }
  return out;
}

}  // namespace weft::detail
