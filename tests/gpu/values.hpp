// Operands for the device memory tests: every bit pattern of the 16-bit floats drawn at random
// (subnormals, infinities and NaNs included), floats and doubles over a wide range, integers
// over their whole range; a user reduction that runs on host and device; and values whose
// reductions are exact in every type.
#pragma once

#include "weft/detail/host_device.hpp"
#include "weft/ops.hpp"
#include "weft/types.hpp"

#include <cmath>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

namespace weft_gpu_test {

template <class T>
std::vector<T> operands(std::size_t count, unsigned seed) {
  std::mt19937_64 random(seed);
  std::vector<T> out(count);
  for (auto& value : out) {
    if constexpr (weft::is_narrow_float_v<T>) {
      value = T::from_bits(static_cast<std::uint16_t>(random()));
    } else if constexpr (std::is_floating_point_v<T>) {
      std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
      std::uniform_int_distribution<int> exponent(-30, 30);
      value = static_cast<T>(std::ldexp(mantissa(random), exponent(random)));
    } else {
      value = static_cast<T>(random());
    }
  }
  return out;
}

// (a + b) + a, wrapping for integers: not commutative, so an operand swap would show. Additions
// only: nvcc fuses a multiply and an add into one rounding (-fmad=true, its default) where the
// host rounds twice, so a user reduction with both is not bitwise the same on host and device.
struct a_plus_b_plus_a {
  template <class T>
  WEFT_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (weft::is_narrow_float_v<T>)
      return T((float(a) + float(b)) + float(a));
    else if constexpr (std::is_integral_v<T>)
      return weft::sum{}(weft::sum{}(a, b), a);
    else
      return (a + b) + a;
  }
};

// Exact in every type: small integers (and their sums over 5 ranks) and factors of +-1, +-2.
template <class T>
T value_for(int rank, std::size_t i, bool factors) {
  const long v = factors ? (((rank + static_cast<long>(i)) % 4 < 2) ? 1 : 2) *
                               (((rank + static_cast<long>(i)) % 2) ? -1 : 1)
                         : static_cast<long>((static_cast<std::size_t>(rank) * 7 + i * 3) % 11) + 1;
  if constexpr (std::is_unsigned_v<T>)
    return static_cast<T>(v < 0 ? -v : v);
  else
    return static_cast<T>(static_cast<float>(v));
}

}  // namespace weft_gpu_test
