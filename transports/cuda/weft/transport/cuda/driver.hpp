// weft/transport/cuda/driver.hpp — functions of the CUDA driver API, found at run time through
// the runtime's cudaGetDriverEntryPointByVersion: a binary links cudart only, never the driver
// library, so it starts on a machine without a driver and says so at the first call that needs
// one.
#pragma once

#include "weft/error.hpp"
#include "weft/transport/cuda/runtime.hpp"

#include <cuda.h>  // types and enums only: nothing here is linked against the driver
#include <cuda_runtime.h>

#include <string>

namespace weft::cuda::detail {

// The driver's `symbol` at ABI `version`, as a pointer of type Function. Throws
// weft::error(transport) when the runtime finds no driver, or a driver without it; `purpose`
// says what needs it.
template <class Function>
Function driver_function(const char* symbol, unsigned version, const char* purpose) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  check(cudaGetDriverEntryPointByVersion(symbol, &function, version, cudaEnableDefault, &found),
        std::string("cudaGetDriverEntryPointByVersion(") + symbol + ")");
  if (function == nullptr || found != cudaDriverEntryPointSuccess) {
    throw error(errc::transport,
                std::string("the CUDA driver has no ") + symbol + " (" + purpose + ")");
  }
  return reinterpret_cast<Function>(function);
}

// Throws weft::error(transport) naming the driver call unless `status` is CUDA_SUCCESS.
inline void check_driver(CUresult status, const std::string& what) {
  if (status == CUDA_SUCCESS) return;
  throw error(errc::transport,
              what + " failed: CUresult " + std::to_string(static_cast<int>(status)));
}

}  // namespace weft::cuda::detail
