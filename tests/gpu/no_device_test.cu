// Without a GPU (or without a driver) a device memory space and communicators are a clear
// weft::error, not a crash at load time or at the call; with one, asking for a device that does
// not exist is one too.
#include "checks.hpp"

#include "weft/transport/cuda.hpp"

#include <cstdio>
#include <string>

using namespace weft_gpu_test;

int main() {
  const int devices = weft::cuda::device_count();
  const int asked = devices;  // one past the last device: none where there is no GPU
  try {
    weft::cuda::device_memory memory(asked, nullptr);
    GPU_CHECK(false, "device_memory on device " + std::to_string(asked) + " of " + std::to_string(devices) +
                         " was made");
  } catch (const weft::error& failure) {
    const std::string said = failure.what();
    std::printf("device_memory(%d) with %d device(s): %s\n", asked, devices, said.c_str());
    GPU_CHECK(failure.code() == weft::errc::transport, said);
    GPU_CHECK(devices > 0 || said.find("no CUDA device") != std::string::npos, said);
  }
  // The communicators of this process: on a machine without a GPU, the same clear error.
  if (devices == 0) {
    try {
      weft::cuda::communicators gpus({0, 0});
      GPU_CHECK(false, "communicators were made without a GPU");
    } catch (const weft::error& failure) {
      const std::string said = failure.what();
      std::printf("communicators({0, 0}) with no device: %s\n", said.c_str());
      GPU_CHECK(failure.code() == weft::errc::transport, said);
      GPU_CHECK(said.find("no CUDA device") != std::string::npos, said);
    }
  } else {
    try {
      weft::cuda::communicators gpus({devices});
      GPU_CHECK(false, "communicators were made on a device that does not exist");
    } catch (const weft::error& failure) {
      GPU_CHECK(failure.code() == weft::errc::invalid_argument, failure.what());
    }
  }
  return finish("no device");
}
