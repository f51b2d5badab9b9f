// The device memory space's per-element code, run on the host (no GPU needed): for every element
// type and reduction, combine_element and finalize_element give the bits host_memory gives.
// The 16-bit floats go through CUDA's __half and __nv_bfloat16 conversions here, so this checks
// that the device rounds as weft's host types do, over random bit patterns.
#include "checks.hpp"
#include "values.hpp"

#include "weft/memory.hpp"
#include "weft/transport/cuda/elementwise.hpp"

#include <cstdint>
#include <string>
#include <vector>

using namespace weft_gpu_test;

namespace {

constexpr std::size_t count = 1 << 16;

template <class T, class Op>
void compare(const Op& op, const char* op_name) {
  const auto a = operands<T>(count, 1);
  const auto b = operands<T>(count, 2);
  std::vector<T> expected(count), got(count);
  weft::host_memory host;
  host.combine(std::span<T>(expected), std::span<const T>(a), std::span<const T>(b), op);
  for (std::size_t i = 0; i < count; ++i)
    got[i] = weft::cuda::detail::combine_element(op, a[i], b[i]);
  std::size_t wrong = 0, first = count;
  for (std::size_t i = 0; i < count; ++i) {
    if (!same_bits(expected[i], got[i])) {
      ++wrong;
      if (first == count) first = i;
    }
  }
  GPU_CHECK(wrong == 0, type_name<T>() + " " + op_name + ": " + std::to_string(wrong) +
                            " elements differ, first at " + std::to_string(first));
  if constexpr (weft::has_finalize_v<Op, T>) {
    for (const int ranks : {1, 3, 7}) {
      std::vector<T> finalized = expected;
      host.finalize(std::span<T>(finalized), op, ranks);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < count; ++i)
        differ +=
            !same_bits(finalized[i], weft::cuda::detail::finalize_element(op, expected[i], ranks));
      GPU_CHECK(differ == 0, type_name<T>() + " " + op_name + " finalize over " +
                                 std::to_string(ranks) + " ranks: " + std::to_string(differ) +
                                 " differ");
    }
  }
}

template <class T>
void every_op() {
  compare<T>(weft::sum{}, "sum");
  compare<T>(weft::prod{}, "prod");
  compare<T>(weft::min{}, "min");
  compare<T>(weft::max{}, "max");
  compare<T>(weft::avg{}, "avg");
  compare<T>(a_plus_b_plus_a{}, "user ((a + b) + a)");
  if constexpr (std::is_integral_v<T>) {
    compare<T>(weft::band{}, "band");
    compare<T>(weft::bor{}, "bor");
    compare<T>(weft::bxor{}, "bxor");
  }
}

}  // namespace

int main() {
  every_op<std::int8_t>();
  every_op<std::uint8_t>();
  every_op<std::int16_t>();
  every_op<std::uint16_t>();
  every_op<std::int32_t>();
  every_op<std::uint32_t>();
  every_op<std::int64_t>();
  every_op<std::uint64_t>();
  every_op<float>();
  every_op<double>();
  every_op<weft::half>();
  every_op<weft::bfloat16>();
  return finish("device reductions on the host");
}
