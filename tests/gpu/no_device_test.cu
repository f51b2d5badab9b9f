// Without a GPU (or without a driver) a device memory space and communicators are a clear
// weft::error, not a crash at load time or at the call; with one, asking for a device that does
// not exist is one too.
#include "checks.hpp"

#include "weft/transport/cuda.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace weft_gpu_test;

int main() {
  const int devices = weft::cuda::device_count();
  const int asked = devices;  // one past the last device: none where there is no GPU
  try {
    weft::cuda::device_memory memory(asked, nullptr);
    GPU_CHECK(false, "device_memory on device " + std::to_string(asked) + " of " +
                         std::to_string(devices) + " was made");
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
  // Ranks sharing a GPU: k of them need 4k hardware queues, at most 8 a GPU (checked before
  // anything is made, so it runs without a GPU too).
  auto refused = [](std::vector<int> devices, int queues) {
    try {
      weft::cuda::check_sharing(devices, queues);
      return std::string();
    } catch (const weft::error& failure) {
      GPU_CHECK(failure.code() == weft::errc::invalid_argument, failure.what());
      return std::string(failure.what());
    }
  };
  GPU_CHECK(refused({0, 1, 2, 3}, 1).empty(), "one rank a GPU needs nothing");
  GPU_CHECK(refused({0, 0}, 8).empty(), "2 ranks on a GPU run with CUDA's default 8 queues");
  GPU_CHECK(refused({0, 0, 0, 0}, 16).empty(), "4 ranks on a GPU run with 16 queues");
  GPU_CHECK(refused({0, 1, 0, 1, 0}, 12).empty(), "3 ranks on a GPU run with 12 queues");
  GPU_CHECK(refused({0, 0, 0, 0, 0, 0, 0, 0}, 32).empty(), "8 ranks on a GPU run with 32 queues");
  const std::string four = refused({0, 0, 0, 0}, 8);
  std::printf("4 ranks on GPU 0 with 8 queues: %s\n", four.c_str());
  GPU_CHECK(
      four.find("4 ranks share GPU 0") != std::string::npos &&
          four.find("CUDA_DEVICE_MAX_CONNECTIONS of at least 16 (it is 8") != std::string::npos,
      four);
  const std::string three = refused({1, 0, 1, 1}, 8);
  GPU_CHECK(three.find("3 ranks share GPU 1") != std::string::npos, three);
  const std::string nine = refused(std::vector<int>(9, 0), 32);
  GPU_CHECK(nine.find("at most 8 ranks can share one GPU") != std::string::npos, nine);
  // The variable as the driver reads it: unset is CUDA's default 8, at most 32.
  unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  GPU_CHECK(weft::cuda::hardware_queues() == 8, "unset: 8");
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 1);
  GPU_CHECK(weft::cuda::hardware_queues() == 32, "32");
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "64", 1);
  GPU_CHECK(weft::cuda::hardware_queues() == 32, "64: at most 32");
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "many", 1);
  GPU_CHECK(weft::cuda::hardware_queues() == 8, "not a number: the default");
  // request_hardware_queues: 32 unless the environment names a number, which stays.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "16", 1);
  GPU_CHECK(weft::cuda::request_hardware_queues() == 16, "a number in the environment stays");
  unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  GPU_CHECK(weft::cuda::request_hardware_queues() == 32, "unset: 32 asked for");
  // Memory shared between processes: WEFT_CUDA_IPC is checked before any device is touched;
  // without a GPU, asking for the way or the memory is the clear error.
  setenv("WEFT_CUDA_IPC", "sometimes", 1);
  try {
    static_cast<void>(weft::cuda::sharing_for(0));
    GPU_CHECK(false, "WEFT_CUDA_IPC=sometimes was taken");
  } catch (const weft::error& failure) {
    GPU_CHECK(failure.code() == weft::errc::invalid_argument, failure.what());
    GPU_CHECK(std::string(failure.what()).find("vmm, legacy or auto") != std::string::npos,
              failure.what());
  }
  unsetenv("WEFT_CUDA_IPC");
  if (devices == 0) {
    for (const auto way : {weft::cuda::sharing::vmm, weft::cuda::sharing::legacy}) {
      try {
        weft::cuda::shareable_allocation memory(0, 1 << 20, way);
        GPU_CHECK(false, "shareable memory was allocated without a GPU");
      } catch (const weft::error& failure) {
        std::printf("shareable_allocation(%s) with no device: %s\n",
                    std::string(to_string(way)).c_str(), failure.what());
        GPU_CHECK(failure.code() == weft::errc::transport, failure.what());
        GPU_CHECK(std::string(failure.what()).find("no CUDA device") != std::string::npos,
                  failure.what());
      }
    }
    try {
      static_cast<void>(weft::cuda::sharing_for(0));
      GPU_CHECK(false, "sharing_for(0) answered without a GPU");
    } catch (const weft::error& failure) {
      GPU_CHECK(std::string(failure.what()).find("no CUDA device") != std::string::npos,
                failure.what());
    }
  }
  return finish("no device");
}
