// weft/detail/host_device.hpp — marks what the CPU and a GPU kernel both run.
//
// The reductions (weft/ops.hpp) and the 16-bit float types (weft/types.hpp) are compiled for the
// host and, under nvcc, for the device too: a device memory space's combine kernel calls the
// very functor a host test checks. Without nvcc the marks are empty.
#pragma once

#if defined(__CUDACC__)
#define WEFT_HOST_DEVICE __host__ __device__
#else
#define WEFT_HOST_DEVICE
#endif

namespace weft::detail {

// std::bit_cast for code that also runs on a GPU (the standard one is host-only under nvcc).
template <class To, class From>
WEFT_HOST_DEVICE constexpr To bit_cast(const From& from) noexcept {
  static_assert(sizeof(To) == sizeof(From));
  return __builtin_bit_cast(To, from);
}

}  // namespace weft::detail
