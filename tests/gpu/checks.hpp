// A small harness for the tests nvcc compiles (Catch2 is host-compiler only): CHECKs are
// counted, each failure printed with its line; main returns 1 when any failed, 77 (Meson's
// "skipped") with the reason when the test needs a GPU and there is none.
#pragma once

#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>

#include "weft/dispatch/calls.hpp"
#include "weft/types.hpp"

namespace weft_gpu_test {

inline int checks = 0;
inline int failed = 0;

inline void record(bool ok, const char* what, const std::string& detail, int line) {
  ++checks;
  if (ok) return;
  ++failed;
  if (failed <= 30) std::printf("FAIL line %d: %s %s\n", line, what, detail.c_str());
}

// Reports and returns main's exit status.
inline int finish(const char* name) {
  std::printf("%s: %d checks, %d failed\n", name, checks, failed);
  return failed == 0 ? 0 : 1;
}

// The type's name, for messages (weft's own: int8 ... float64, half, bfloat16).
template <class T>
std::string type_name() {
  return std::string(weft::detail::type_name<T>());
}

// Bitwise equal, except that any NaN equals any NaN (their payloads are not part of weft's
// promise: the host and CUDA quiet a NaN differently).
template <class T>
bool same_bits(const T& a, const T& b) {
  if constexpr (std::is_floating_point_v<T> || weft::is_narrow_float_v<T>) {
    const float x = static_cast<float>(a), y = static_cast<float>(b);
    if (x != x && y != y) return true;
  }
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

}  // namespace weft_gpu_test

#define GPU_CHECK(condition, detail) \
  ::weft_gpu_test::record(static_cast<bool>(condition), #condition, (detail), __LINE__)
