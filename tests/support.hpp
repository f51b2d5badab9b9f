// Shared helpers for weft's tests: exact test values, bitwise comparison, failure collection
// from rank threads (Catch2's assertions are not thread-safe, so ranks record and the main
// thread asserts).
#pragma once

#include <weft/transport/inproc.hpp>
#include <weft/weft.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace weft_test {

using comm_t = weft::communicator<weft::inproc::transport>;

// WEFT_TEST_QUICK set and not "0" (the sanitizer runs): the cases keep every protocol path but
// run the largest on fewer bytes (no 64 MiB messages; 65539-element counts dropped or cut to what
// still crosses the protocol's thresholds) and the simulator's model checks on fewer ranks.
inline bool quick() {
  const char* value = std::getenv("WEFT_TEST_QUICK");
  return value != nullptr && *value != '\0' && *value != '0';
}

template <class T>
T from_int(long value) {
  if constexpr (weft::is_narrow_float_v<T>)
    return T(static_cast<float>(value));
  else
    return static_cast<T>(value);
}

template <class T>
double as_double(const T& value) {
  if constexpr (weft::is_narrow_float_v<T>)
    return static_cast<double>(float(value));
  else if constexpr (std::is_arithmetic_v<T>)
    return static_cast<double>(value);
  else
    return 0;
}

// Small integers, exactly representable in every element type, whose sums over 16 ranks stay
// exact in bfloat16 (|sum| <= 64 < 256).
inline long small_value(int rank, std::size_t index) {
  return static_cast<long>((static_cast<std::size_t>(rank) * 7 + index * 3) % 9) - 4;
}

// Factors from {1, -1, 2, -2}: products over 16 ranks are +-2^k, exact in every float type.
inline long factor_value(int rank, std::size_t index) {
  constexpr long factors[4] = {1, -1, 2, -2};
  return factors[(static_cast<std::size_t>(rank) + index) % 4];
}

class failures {
 public:
  void add(const std::string& message) {
    std::lock_guard lock(mutex_);
    if (list_.size() < 20) list_.push_back(message);
    ++count_;
  }
  bool empty() const { return count_ == 0; }
  std::string summary() const {
    std::ostringstream out;
    out << count_ << " failure(s)";
    for (const auto& item : list_) out << "\n  " << item;
    return out.str();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> list_;
  std::size_t count_ = 0;
};

// Compares bit patterns; records the first difference.
template <class T>
bool check_bits(failures& sink, const std::string& label, int rank, std::span<const T> got,
                std::span<const T> want) {
  if (got.size() != want.size()) {
    sink.add(label + ": rank " + std::to_string(rank) + " size " + std::to_string(got.size()) +
             " want " + std::to_string(want.size()));
    return false;
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      std::ostringstream out;
      out << label << ": rank " << rank << " index " << i << " got " << as_double(got[i])
          << " want " << as_double(want[i]);
      sink.add(out.str());
      return false;
    }
  }
  return true;
}

// Catch2's assertions are not thread-safe; rank threads that assert take this lock. The checked
// expression must not communicate (the lock is held while it runs).
inline std::mutex& catch_mutex() {
  static std::mutex mutex;
  return mutex;
}

inline weft::options test_options(std::size_t chunk_bytes = 512) {
  weft::options settings;
  settings.timeout = std::chrono::seconds(60);
  settings.chunk_bytes = chunk_bytes;
  settings.reduce_chunk_bytes = chunk_bytes;
  return settings;
}

template <class... Types, class Function>
void for_each_type(Function&& fn) {
  (fn(std::type_identity<Types>{}), ...);
}

}  // namespace weft_test

#define RANK_CHECK(...)                                         \
  do {                                                          \
    std::lock_guard weft_test_lock(::weft_test::catch_mutex()); \
    CHECK(__VA_ARGS__);                                         \
  } while (0)
