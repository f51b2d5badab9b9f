// weft/transport/cuda/stream_operations.hpp — the driver's stream memory operations
// (cuStreamWaitValue32, cuStreamWriteValue32), found at run time (weft/transport/cuda/driver.hpp).
#pragma once

#include "weft/stream/flags.hpp"
#include "weft/transport/cuda/driver.hpp"
#include "weft/transport/cuda/runtime.hpp"

#include <cuda.h>  // types and enums only: nothing here is linked against the driver
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

namespace weft::cuda::detail {

class stream_operations {
 public:
  // The driver's functions, resolved once per process. Throws weft::error(transport) when the
  // runtime finds no driver, or a driver without them.
  static const stream_operations& get() {
    static const stream_operations resolved;
    return resolved;
  }

  // Enqueues "wait until (int32_t)(*flag - value) >= 0" on `stream`.
  void wait(cudaStream_t stream, const std::uint32_t* flag, std::uint32_t value) const {
    check_driver(wait_(stream, address(flag), value, CU_STREAM_WAIT_VALUE_GEQ),
                 "cuStreamWaitValue32");
  }
  // Enqueues every wait of `waits` on `stream` in one call (cuStreamBatchMemOp), in order.
  void wait_all(cudaStream_t stream, std::span<const weft::stream::flag_wait> waits) const {
    constexpr std::size_t most = 256;  // operations one batch may hold
    CUstreamBatchMemOpParams batch[most];
    for (std::size_t first = 0; first < waits.size(); first += most) {
      const std::size_t count = std::min(most, waits.size() - first);
      for (std::size_t i = 0; i < count; ++i) {
        batch[i] = CUstreamBatchMemOpParams{};
        batch[i].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
        batch[i].waitValue.address = address(waits[first + i].word);
        batch[i].waitValue.value = waits[first + i].value;
        batch[i].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
      }
      check_driver(batch_(stream, static_cast<unsigned>(count), batch, 0), "cuStreamBatchMemOp");
    }
  }
  // Enqueues "*flag = value" on `stream`, after the work before it is visible.
  void write(cudaStream_t stream, std::uint32_t* flag, std::uint32_t value) const {
    check_driver(write_(stream, address(flag), value, CU_STREAM_WRITE_VALUE_DEFAULT),
                 "cuStreamWriteValue32");
  }

 private:
  using wait_function = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  using write_function = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  using batch_function = CUresult (*)(CUstream, unsigned int, CUstreamBatchMemOpParams*,
                                      unsigned int);
  static constexpr unsigned abi_version = 11070;  // the _v2 stream memory operations

  stream_operations() {
    constexpr const char* purpose =
        "stream memory operations; weft's CUDA communicators need a driver for CUDA 11.7 or later";
    wait_ = driver_function<wait_function>("cuStreamWaitValue32", abi_version, purpose);
    write_ = driver_function<write_function>("cuStreamWriteValue32", abi_version, purpose);
    batch_ = driver_function<batch_function>("cuStreamBatchMemOp", abi_version, purpose);
  }

  // Flags live in mapped pinned host memory: under unified addressing its host address is the
  // address devices use.
  static CUdeviceptr address(const std::uint32_t* flag) {
    return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(flag));
  }

  wait_function wait_ = nullptr;
  write_function write_ = nullptr;
  batch_function batch_ = nullptr;
};

}  // namespace weft::cuda::detail
