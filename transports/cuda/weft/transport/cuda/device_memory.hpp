// weft/transport/cuda/device_memory.hpp — the memory space of one GPU's memory, stream-ordered.
//
//   cudaStream_t stream;  cudaStreamCreate(&stream);
//   weft::cuda::device_memory memory(0, stream);            // device 0, work on `stream`
//   memory.combine(dst, a, b, weft::sum{});                 // enqueues a kernel, returns at once
//
// Every operation is enqueued on the stream and returns without waiting: copy is a
// cudaMemcpyAsync, combine and finalize are kernels (weft/transport/cuda/elementwise.hpp),
// allocate and deallocate are cudaMallocAsync and cudaFreeAsync. So each is ordered after
// everything earlier on the stream (memory_space's rule 1), and the CPU never touches the
// memory (rule 5); whoever reads the result on the host synchronizes the stream first.
#pragma once

#include "weft/memory.hpp"
#include "weft/transport.hpp"
#include "weft/transport/cuda/elementwise.hpp"
#include "weft/transport/cuda/runtime.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace weft::cuda {

class device_memory {
 public:
  static constexpr std::string_view name = "cuda";

  // The memory of `device`, its work enqueued on `stream` (a stream of that device, which the
  // caller owns and keeps alive). Throws weft::error(transport) when there is no such device.
  device_memory(int device, cudaStream_t stream) : device_(device), stream_(stream) {
    const device_scope on(device_);
    int processors = 0;
    check(cudaDeviceGetAttribute(&processors, cudaDevAttrMultiProcessorCount, device_),
          "cudaDeviceGetAttribute(multiprocessor count) on device " + std::to_string(device_));
    blocks_cap_ = static_cast<unsigned>(processors > 0 ? processors * 8 : 64);
    detail::kernel_loaders::preload(device_);
  }

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

  void copy(std::span<std::byte> dst, std::span<const std::byte> src) const {
    if (src.empty() || dst.data() == src.data()) return;
    const device_scope on(device_);
    check(cudaMemcpyAsync(dst.data(), src.data(), src.size(), cudaMemcpyDefault, stream_),
          "cudaMemcpyAsync of " + std::to_string(src.size()) + " bytes on device " +
              std::to_string(device_));
  }

  template <class T, class Op>
  void combine(std::span<T> dst, std::span<const T> a, std::span<const T> b, const Op& op) const {
    if (dst.empty()) return;
    const device_scope on(device_);
    detail::launch_combine(dst.data(), a.data(), b.data(), dst.size(), op, stream_, blocks_cap_);
  }

  // out[k] = in[0] op in[1] op ... for every output, `count` elements each, in one kernel (a
  // whole collective's share: weft::fused); at most 64 inputs and 64 outputs.
  template <class T, class Op>
  void reduce_all(std::span<std::byte* const> outs, std::span<const std::byte* const> ins,
                  std::size_t count, const Op& op, std::type_identity<T>) const {
    if (outs.size() > detail::most_vectors || ins.size() > detail::most_vectors) {
      throw error(errc::invalid_argument, "weft::cuda::device_memory::reduce_all takes at most " +
                                              std::to_string(detail::most_vectors) +
                                              " inputs and outputs");
    }
    const device_scope on(device_);
    detail::launch_reduce_all<T>(outs, ins, count, op, stream_, blocks_cap_);
  }

  template <class T, class Op>
  void finalize(std::span<T> data, const Op& op, int ranks) const {
    if (data.empty()) return;
    const device_scope on(device_);
    detail::launch_finalize(data.data(), data.size(), op, ranks, stream_, blocks_cap_);
  }

  // Scratch memory of the device, in stream order (usable by the work enqueued after this).
  std::byte* allocate(std::size_t bytes) const {
    const device_scope on(device_);
    void* pointer = nullptr;
    check(cudaMallocAsync(&pointer, bytes == 0 ? 1 : bytes, stream_),
          "cudaMallocAsync of " + std::to_string(bytes) + " bytes on device " +
              std::to_string(device_));
    if (reinterpret_cast<std::uintptr_t>(pointer) % 64 != 0) {  // memory_space's rule 4
      static_cast<void>(cudaFreeAsync(pointer, stream_));
      throw error(errc::transport, "cudaMallocAsync returned memory not aligned to 64 bytes");
    }
    return static_cast<std::byte*>(pointer);
  }
  // Released in stream order: after the work enqueued before it has used the memory.
  void deallocate(std::byte* pointer, std::size_t) const {
    if (pointer == nullptr) return;
    const device_scope on(device_);
    check(cudaFreeAsync(pointer, stream_), "cudaFreeAsync on device " + std::to_string(device_));
  }

 private:
  int device_;
  cudaStream_t stream_;
  unsigned blocks_cap_ = 64;
};
static_assert(memory_space<device_memory>);

}  // namespace weft::cuda
