// weft/transport/cuda.hpp — weft on NVIDIA GPUs (Meson: dependency('weft-cuda'); compile with nvcc).
//
//   weft::cuda::device_memory memory(device, stream);   // a memory space on one GPU's stream
//
// Include it from .cu files only. It needs the CUDA runtime (cudart) and never the driver
// library: a binary built with it starts on a machine without a GPU, and the first call that
// needs one throws weft::error(transport) "no CUDA device: ...".
#pragma once

#include "weft/transport/cuda/device_memory.hpp"
#include "weft/transport/cuda/elementwise.hpp"
#include "weft/transport/cuda/runtime.hpp"
