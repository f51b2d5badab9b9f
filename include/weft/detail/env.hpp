// weft/detail/env.hpp — the one reader of weft's environment variables (docs/tuning.md lists
// every one of them).
//
// Every reader takes an unset and an empty variable alike: nothing is returned and the caller
// keeps its default. A number, duration, size or flag that cannot be read exactly is refused with
// errc::invalid_argument naming the variable and its value; it is never taken as 0, as the
// default, or as the readable part of it ("3000ms", "-1", "1e9" and "99999999999999999999" are
// all refused). Text is returned as written.
#pragma once

#include "weft/error.hpp"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace weft::detail::env {

// The variable's value; nothing when it is unset or empty.
inline std::optional<std::string_view> text(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string_view(value);
}

[[noreturn]] inline void refuse(const char* name, std::string_view value, std::string_view wanted) {
  throw error(errc::invalid_argument, std::string("environment variable ") + name + "='" +
                                          std::string(value) + "' is not " + std::string(wanted));
}

// `digits` as a whole number no larger than `limit`; nothing when it is not one.
constexpr std::optional<std::uint64_t> parse_count(std::string_view digits, std::uint64_t limit) {
  if (digits.empty()) return std::nullopt;
  std::uint64_t value = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (digit > limit || value > (limit - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

// `text` as bytes: a whole number, optionally followed by K, M, G or T (binary: K = 1024),
// optionally followed by "iB" or "B" ("4M", "256KiB", "1G", "65536"); nothing when it is not one
// or exceeds `limit`.
constexpr std::optional<std::uint64_t> parse_bytes(std::string_view text, std::uint64_t limit) {
  constexpr std::string_view prefixes = "KMGT";
  auto prefix_at = [&](std::size_t position) {  // K..T (or k..t) at `position`, else npos
    if (position >= text.size()) return std::string_view::npos;
    const char c = text[position];
    return prefixes.find(c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c);
  };
  if (text.size() > 3 && text.ends_with("iB") &&
      prefix_at(text.size() - 3) != std::string_view::npos) {
    text.remove_suffix(2);
  } else if (text.size() > 1 && text.ends_with("B")) {
    text.remove_suffix(1);
  }
  std::uint64_t unit = 1;
  if (const auto at = text.empty() ? std::string_view::npos : prefix_at(text.size() - 1);
      at != std::string_view::npos) {
    unit = std::uint64_t{1} << (10 * (at + 1));
    text.remove_suffix(1);
  }
  const auto count = parse_count(text, limit / unit);
  if (!count) return std::nullopt;
  return *count * unit;
}

// A whole number in [0, limit].
inline std::optional<std::uint64_t> count(
    const char* name, std::uint64_t limit = std::numeric_limits<std::uint64_t>::max()) {
  const auto value = text(name);
  if (!value) return std::nullopt;
  const auto parsed = parse_count(*value, limit);
  if (!parsed) refuse(name, *value, "a whole number up to " + std::to_string(limit));
  return parsed;
}

// A size in bytes in [0, limit], with an optional K/M/G/T suffix (binary units).
inline std::optional<std::uint64_t> bytes(
    const char* name, std::uint64_t limit = std::numeric_limits<std::uint64_t>::max()) {
  const auto value = text(name);
  if (!value) return std::nullopt;
  const auto parsed = parse_bytes(*value, limit);
  if (!parsed) {
    refuse(name, *value,
           "a size in bytes up to " + std::to_string(limit) +
               " (a whole number, optionally followed by K, M, G or T)");
  }
  return parsed;
}

// A size in bytes in [floor, limit] (a piece size: smaller pieces only multiply the per-message
// cost); `zero_means`, when given, also lets 0 through and says what it means.
inline std::optional<std::uint64_t> piece_bytes(const char* name, std::uint64_t floor,
                                                std::uint64_t limit,
                                                const char* zero_means = nullptr) {
  const auto value = bytes(name, limit);
  if (value && *value < floor && !(*value == 0 && zero_means != nullptr)) {
    refuse(
        name, *text(name),
        "a piece size of at least " + std::to_string(floor) + " bytes" +
            (zero_means != nullptr ? std::string(" (or 0: ") + zero_means + ")" : std::string()) +
            ": smaller pieces only multiply the cost per message");
  }
  return value;
}

// The longest duration a variable may give: far beyond any job, and small enough that a
// deadline of now plus it cannot overflow the steady clock.
inline constexpr std::uint64_t longest_milliseconds = std::uint64_t{1} << 40;  // about 35 years

inline std::optional<std::chrono::milliseconds> milliseconds(const char* name) {
  const auto value = text(name);
  if (!value) return std::nullopt;
  const auto parsed = parse_count(*value, longest_milliseconds);
  if (!parsed) refuse(name, *value, "a whole number of milliseconds");
  return std::chrono::milliseconds(static_cast<std::chrono::milliseconds::rep>(*parsed));
}

inline std::optional<std::chrono::microseconds> microseconds(const char* name) {
  const auto value = text(name);
  if (!value) return std::nullopt;
  const auto parsed = parse_count(*value, longest_milliseconds * 1000);
  if (!parsed) refuse(name, *value, "a whole number of microseconds");
  return std::chrono::microseconds(static_cast<std::chrono::microseconds::rep>(*parsed));
}

// WEFT_TIMEOUT_MS: how long any one wait may block, at least 1 ms. 0 is refused rather than read
// as "no timeout" (every wait in weft has a deadline); a day is 86400000.
inline std::optional<std::chrono::milliseconds> timeout() {
  const auto value = milliseconds("WEFT_TIMEOUT_MS");
  if (value && value->count() == 0) {
    refuse("WEFT_TIMEOUT_MS", "0",
           "a timeout of at least 1 ms (there is no \"no timeout\": every wait has a deadline; "
           "give a large "
           "value such as 86400000 for a day)");
  }
  return value;
}

// 1, true, yes, on / 0, false, no, off.
inline std::optional<bool> flag(const char* name) {
  const auto value = text(name);
  if (!value) return std::nullopt;
  for (const std::string_view yes : {"1", "true", "yes", "on"})
    if (*value == yes) return true;
  for (const std::string_view no : {"0", "false", "no", "off"})
    if (*value == no) return false;
  refuse(name, *value, "a flag (1, true, yes, on or 0, false, no, off)");
}

}  // namespace weft::detail::env
