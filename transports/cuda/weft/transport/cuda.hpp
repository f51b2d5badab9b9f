// weft/transport/cuda.hpp — weft on NVIDIA GPUs (Meson: dependency('weft-cuda'); compile with
// nvcc).
//
//   weft::cuda::device_memory memory(device, stream);   // a memory space on one GPU's stream
//   weft::cuda::communicators gpus({0, 1, 2, 3});       // a communicator per GPU of this process
//   weft::cuda::shareable_allocation shared(0, bytes);  // memory other processes can map
//
// Include it from .cu files only. It needs the CUDA runtime (cudart) and never the driver
// library: a binary built with it starts on a machine without a GPU, and the first call that
// needs one throws weft::error(transport) "no CUDA device: ...".
#pragma once

#include "weft/transport/cuda/communicators.hpp"
#include "weft/transport/cuda/device_memory.hpp"
#include "weft/transport/cuda/elementwise.hpp"
#include "weft/transport/cuda/runtime.hpp"
#include "weft/transport/cuda/shareable_memory.hpp"
#include "weft/transport/cuda/stream_operations.hpp"
