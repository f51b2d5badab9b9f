// weft/transport/cuda/runtime.hpp — CUDA runtime errors as weft::error, and the current device.
//
// Every CUDA call weft makes goes through check(): a failure throws weft::error(transport)
// naming the call and CUDA's own words. A machine without a GPU or without a driver is said
// plainly ("no CUDA device: ..."), at the first call that needs one, never at load time: user
// binaries link the CUDA runtime only, and a CPU-only run never touches it.
#pragma once

#if !defined(__CUDACC__)
#error "weft's CUDA headers are compiled by nvcc: include them from a .cu file"
#endif

#include "weft/error.hpp"

#include <cuda_runtime.h>

#include <string>

namespace weft::cuda {

// True when `status` means this machine has no usable GPU (none, no driver, or a driver too
// old for this runtime) rather than a failed call.
inline bool no_device(cudaError_t status) {
  return status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver ||
         status == cudaErrorCompatNotSupportedOnDevice || status == cudaErrorSystemDriverMismatch;
}

// Throws weft::error(transport) unless `status` is cudaSuccess; `what` names the call.
inline void check(cudaError_t status, const std::string& what) {
  if (status == cudaSuccess) return;
  static_cast<void>(cudaGetLastError());  // reset the last error (a sticky one stays)
  if (no_device(status)) {
    throw error(errc::transport,
                "no CUDA device: " + what + " failed: " + cudaGetErrorString(status));
  }
  throw error(errc::transport, what + " failed: " + cudaGetErrorName(status) + " (" +
                                   cudaGetErrorString(status) + ")");
}

// The number of GPUs this process sees; 0 where there is none or no driver (never throws for
// that: a program may ask before choosing a path).
inline int device_count() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return 0;
  }
  return count;
}

// Why there is no GPU to use, or empty when there is one.
inline std::string why_no_device() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return cudaGetErrorString(status);
  }
  return count == 0 ? "the CUDA runtime sees no device" : "";
}

// Makes `device` current for its scope and restores the previous one after.
class device_scope {
 public:
  explicit device_scope(int device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device)
      check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  }
  ~device_scope() {
    int now = previous_;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_)
      static_cast<void>(cudaSetDevice(previous_));
  }
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace weft::cuda
