// weft/transport/cuda/elementwise.hpp — the kernels of the device memory space: combine and
// finalize, one vectorized grid-stride kernel per (element type, reduction).
//
// combine_element and finalize_element are what each kernel thread runs per element, and they
// are __host__ __device__: the host tests run them over every type and reduction and compare
// the bits with host_memory's. weft::half and weft::bfloat16 go through CUDA's own __half and
// __nv_bfloat16 under the built-in reductions (to float, compute, round to nearest even: the
// same bits host_memory computes); every other type, and every user reduction, calls the
// reduction itself, which must then be __host__ __device__.
#pragma once

#include "weft/detail/host_device.hpp"
#include "weft/ops.hpp"
#include "weft/transport/cuda/runtime.hpp"
#include "weft/types.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <type_traits>
#include <vector>

namespace weft::cuda::detail {

// The reductions whose narrow-float arithmetic is "to float, compute, round back".
template <class Op>
inline constexpr bool float_arithmetic_v =
    std::is_same_v<Op, weft::sum> || std::is_same_v<Op, weft::prod> ||
    std::is_same_v<Op, weft::min> || std::is_same_v<Op, weft::max> || std::is_same_v<Op, weft::avg>;

// weft's 16-bit types as CUDA's, and back (the same bits).
WEFT_HOST_DEVICE inline float widen(weft::half value) {
  __half_raw raw;
  raw.x = value.bits;
  return __half2float(__half(raw));
}
WEFT_HOST_DEVICE inline float widen(weft::bfloat16 value) {
  __nv_bfloat16_raw raw;
  raw.x = value.bits;
  return __bfloat162float(__nv_bfloat16(raw));
}
template <class T>
WEFT_HOST_DEVICE inline T narrow(float value) {
  if constexpr (std::is_same_v<T, weft::half>) {
    const __half_raw raw = __float2half_rn(value);
    return weft::half::from_bits(raw.x);
  } else {
    const __nv_bfloat16_raw raw = __float2bfloat16_rn(value);
    return weft::bfloat16::from_bits(raw.x);
  }
}

// What one thread computes for one element of combine.
template <class T, class Op>
WEFT_HOST_DEVICE inline T combine_element(const Op& op, T a, T b) {
  if constexpr (weft::is_narrow_float_v<T> && float_arithmetic_v<Op>) {
    return narrow<T>(op(widen(a), widen(b)));
  } else {
    return static_cast<T>(op(a, b));
  }
}

// What one thread computes for one element of finalize (avg divides by the ranks).
template <class T, class Op>
WEFT_HOST_DEVICE inline T finalize_element(const Op& op, T value, int ranks) {
  if constexpr (weft::is_narrow_float_v<T> && float_arithmetic_v<Op>) {
    return narrow<T>(weft::finalize(op, widen(value), ranks));
  } else {
    return weft::finalize(op, value, ranks);
  }
}

// Elements per 16-byte access (1 for elements of 16 bytes or more, or of odd sizes).
template <class T>
inline constexpr std::size_t per_vector = (sizeof(T) < 16 && 16 % sizeof(T) == 0) ? 16 / sizeof(T)
                                                                                  : 1;

template <class T>
struct alignas(16) vector_of {
  T lane[per_vector<T>];
};

inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// dst[i] = op(a[i], b[i]); dst may be a or b. With `vectors`, the first vectors * per_vector
// elements go 16 bytes at a time (every pointer then is 16-byte aligned); the rest one by one.
template <class T, class Op>
__global__ void combine_kernel(T* dst, const T* a, const T* b, std::size_t count,
                               std::size_t vectors, Op op) {
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  constexpr std::size_t per = per_vector<T>;
  for (std::size_t v = first; v < vectors; v += stride) {
    const vector_of<T> x = reinterpret_cast<const vector_of<T>*>(a)[v];
    const vector_of<T> y = reinterpret_cast<const vector_of<T>*>(b)[v];
    vector_of<T> out;
#pragma unroll
    for (std::size_t k = 0; k < per; ++k) out.lane[k] = combine_element(op, x.lane[k], y.lane[k]);
    reinterpret_cast<vector_of<T>*>(dst)[v] = out;
  }
  for (std::size_t i = vectors * per + first; i < count; i += stride)
    dst[i] = combine_element(op, a[i], b[i]);
}

// The inputs and outputs of one reduce_all, passed by value as the kernel's argument.
inline constexpr std::size_t most_vectors = 64;
template <class T>
struct vector_table {
  const T* in[most_vectors];
  T* out[most_vectors];
  unsigned ins;
  unsigned outs;
};

// out[k][i] = in[0][i] op in[1][i] op ... (left to right) for every output k: a whole
// collective's share in one pass. An output may be in[0], no other input.
template <class T, class Op>
__global__ void reduce_all_kernel(vector_table<T> table, std::size_t count, std::size_t vectors,
                                  Op op) {
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  constexpr std::size_t per = per_vector<T>;
  for (std::size_t v = first; v < vectors; v += stride) {
    vector_of<T> sum = reinterpret_cast<const vector_of<T>*>(table.in[0])[v];
    for (unsigned i = 1; i < table.ins; ++i) {
      const vector_of<T> x = reinterpret_cast<const vector_of<T>*>(table.in[i])[v];
#pragma unroll
      for (std::size_t k = 0; k < per; ++k)
        sum.lane[k] = combine_element(op, sum.lane[k], x.lane[k]);
    }
    for (unsigned o = 0; o < table.outs; ++o)
      reinterpret_cast<vector_of<T>*>(table.out[o])[v] = sum;
  }
  for (std::size_t e = vectors * per + first; e < count; e += stride) {
    T sum = table.in[0][e];
    for (unsigned i = 1; i < table.ins; ++i) sum = combine_element(op, sum, table.in[i][e]);
    for (unsigned o = 0; o < table.outs; ++o) table.out[o][e] = sum;
  }
}

template <class T, class Op>
__global__ void finalize_kernel(T* data, std::size_t count, Op op, int ranks) {
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = first; i < count; i += stride)
    data[i] = finalize_element(op, data[i], ranks);
}

// A grid for `items` grid-stride items: enough blocks to fill the device (`blocks_cap`), no more
// than the items need.
struct launch_shape {
  unsigned blocks;
  unsigned threads;
};
inline launch_shape shape_for(std::size_t items, unsigned blocks_cap) {
  constexpr unsigned threads = 256;
  const std::size_t wanted = (items + threads - 1) / threads;
  return {
      static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(wanted, blocks_cap))),
      threads};
}

// The kernels of every (element type, reduction) this program launches, loaded on a device
// before its streams first wait for each other. CUDA loads a kernel at its first launch by
// default (CUDA_MODULE_LOADING=LAZY), and loading may wait until the whole device is idle:
// a device whose streams wait on flags that a later launch's work writes never is, and the
// launch would hang. So each (type, reduction) that launch_combine is instantiated for
// registers its loader when the program starts, and preload(device) (the communicators and
// every device_memory call it) loads what is not loaded yet.
class kernel_loaders {
 public:
  using loader = void (*)();  // loads its kernels on the current device

  static bool add(loader load) {
    std::lock_guard lock(mutex());
    loaders().push_back(load);
    return true;
  }

  // Loads every registered kernel on `device` that is not loaded there yet.
  static void preload(int device) {
    std::lock_guard lock(mutex());
    std::size_t& loaded = loaded_on()[device];
    if (loaded == loaders().size()) return;
    const device_scope on(device);
    for (; loaded < loaders().size(); ++loaded) loaders()[loaded]();
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::vector<loader>& loaders() {
    static std::vector<loader> all;
    return all;
  }
  static std::map<int, std::size_t>& loaded_on() {
    static std::map<int, std::size_t> counts;
    return counts;
  }
};

// cudaFuncGetAttributes makes the runtime load a kernel without running it.
template <class T, class Op>
void load_kernels() {
  cudaFuncAttributes attributes{};
  check(cudaFuncGetAttributes(&attributes, combine_kernel<T, Op>), "loading weft's combine kernel");
  check(cudaFuncGetAttributes(&attributes, reduce_all_kernel<T, Op>),
        "loading weft's reduce_all kernel");
  if constexpr (weft::has_finalize_v<Op, T>) {
    check(cudaFuncGetAttributes(&attributes, finalize_kernel<T, Op>),
          "loading weft's finalize kernel");
  }
}
template <class T, class Op>
inline const bool kernels_registered = kernel_loaders::add(&load_kernels<T, Op>);

// Enqueues dst = op(a, b) on `stream` (the device current).
template <class T, class Op>
void launch_combine(T* dst, const T* a, const T* b, std::size_t count, const Op& op,
                    cudaStream_t stream, unsigned blocks_cap) {
  static_cast<void>(kernels_registered<T, Op>);  // instantiated here, registered at start-up
  if (count == 0) return;
  const bool vectorized = per_vector<T> > 1 && aligned16(dst) && aligned16(a) && aligned16(b);
  const std::size_t vectors = vectorized ? count / per_vector<T> : 0;
  const std::size_t items = std::max<std::size_t>(vectors, count - vectors * per_vector<T>);
  const auto grid = shape_for(items, blocks_cap);
  combine_kernel<<<grid.blocks, grid.threads, 0, stream>>>(dst, a, b, count, vectors, op);
  check(cudaGetLastError(), "launching weft's combine kernel");
}

// Enqueues out[k] = in[0] op in[1] op ... for every output on `stream` (the device current);
// at most most_vectors inputs and outputs, each `count` elements.
template <class T, class Op>
void launch_reduce_all(std::span<std::byte* const> outs, std::span<const std::byte* const> ins,
                       std::size_t count, const Op& op, cudaStream_t stream, unsigned blocks_cap) {
  static_cast<void>(kernels_registered<T, Op>);
  if (count == 0 || outs.empty() || ins.empty()) return;
  vector_table<T> table{};
  bool vectorized = per_vector<T> > 1;
  for (std::size_t i = 0; i < ins.size(); ++i) {
    table.in[i] = reinterpret_cast<const T*>(ins[i]);
    vectorized = vectorized && aligned16(ins[i]);
  }
  for (std::size_t o = 0; o < outs.size(); ++o) {
    table.out[o] = reinterpret_cast<T*>(outs[o]);
    vectorized = vectorized && aligned16(outs[o]);
  }
  table.ins = static_cast<unsigned>(ins.size());
  table.outs = static_cast<unsigned>(outs.size());
  const std::size_t vectors = vectorized ? count / per_vector<T> : 0;
  const std::size_t items = std::max<std::size_t>(vectors, count - vectors * per_vector<T>);
  const auto grid = shape_for(items, blocks_cap);
  reduce_all_kernel<<<grid.blocks, grid.threads, 0, stream>>>(table, count, vectors, op);
  check(cudaGetLastError(), "launching weft's reduce_all kernel");
}

// Enqueues data = op.finalize(data, ranks) on `stream`; nothing for reductions without one.
template <class T, class Op>
void launch_finalize(T* data, std::size_t count, const Op& op, int ranks, cudaStream_t stream,
                     unsigned blocks_cap) {
  static_cast<void>(kernels_registered<T, Op>);
  if constexpr (!weft::has_finalize_v<Op, T>) {
    return;
  } else {
    if (count == 0) return;
    const auto grid = shape_for(count, blocks_cap);
    finalize_kernel<<<grid.blocks, grid.threads, 0, stream>>>(data, count, op, ranks);
    check(cudaGetLastError(), "launching weft's finalize kernel");
  }
}

}  // namespace weft::cuda::detail
