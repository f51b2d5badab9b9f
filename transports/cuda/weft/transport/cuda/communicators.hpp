// weft/transport/cuda/communicators.hpp — one process driving several GPUs: a communicator per
// rank, each rank a GPU (or a share of one), every collective only enqueued on the rank's stream.
//
//   weft::cuda::communicators gpus({0, 1, 2, 3});           // ncclCommInitAll(comms, 4, devs)
//   for (int i = 0; i < 4; ++i)                              // one host thread, no group call
//     weft::allreduce(gpus[i], send[i], recv[i], weft::sum{});
//   for (int i = 0; i < 4; ++i) gpus.synchronize(i, 10s);   // cudaStreamSynchronize(s[i]), bounded
//
// The protocol is weft::stream::local_ranks' (weft/stream/local_ranks.hpp): a send and its receive
// are matched on the host, the transfer is one cudaMemcpyAsync (or one combine kernel) from the
// send buffer straight into the receive buffer on a stream of the receiving device, ordered by
// 32-bit flags in mapped pinned memory that streams write and wait on with the driver's stream
// memory operations. Peer access is enabled between the devices that allow it; a combine
// reading another device's memory without it stages the data on its own device first.
//
// A device may be named more than once: the ranks then share that GPU. Buffers are device
// memory of the rank's device (or any memory the device can address). Ranks sharing a GPU need
// hardware queues for their streams: k of them on one GPU need CUDA_DEVICE_MAX_CONNECTIONS >= 4k
// (check_sharing; the communicators refuse fewer, rather than risk streams waiting for good).
// Split and check mode are refused (they read exchanged data on the host); make a
// communicators object per group.
#pragma once

#include "weft/communicator.hpp"
#include "weft/error.hpp"
#include "weft/options.hpp"
#include "weft/stream/local_ranks.hpp"
#include "weft/transport/cuda/device_memory.hpp"
#include "weft/transport/cuda/runtime.hpp"
#include "weft/transport/cuda/stream_operations.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace weft::cuda {

// weft::stream::backend on CUDA: streams are non-blocking CUDA streams, memory is device_memory
// on the stream, flags are mapped pinned host memory.
class stream_backend {
 public:
  using stream_type = cudaStream_t;
  using memory_type = device_memory;
  static constexpr std::string_view tuning_key = "cuda";

  // Resolves the stream memory operations and enables peer access between `devices`.
  explicit stream_backend(const std::vector<int>& devices)
      : operations_(&detail::stream_operations::get()) {
    for (int device : devices) detail::kernel_loaders::preload(device);  // before any stream waits
    for (int reader : devices) {
      for (int owner : devices) {
        if (reader == owner || peer(reader, owner)) continue;
        int can = 0;
        check(cudaDeviceCanAccessPeer(&can, reader, owner), "cudaDeviceCanAccessPeer(" +
                                                                std::to_string(reader) + ", " +
                                                                std::to_string(owner) + ")");
        if (can == 0) continue;
        const device_scope on(reader);
        const cudaError_t status = cudaDeviceEnablePeerAccess(owner, 0);
        if (status == cudaErrorPeerAccessAlreadyEnabled) {
          static_cast<void>(cudaGetLastError());
        } else {
          check(status, "cudaDeviceEnablePeerAccess(" + std::to_string(owner) + ") on device " +
                            std::to_string(reader));
        }
        peers_.push_back({reader, owner});
      }
    }
  }

  stream_type make_stream(int device) {
    const device_scope on(device);
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
          "cudaStreamCreate on device " + std::to_string(device));
    return s;
  }
  void destroy_stream(stream_type s) { static_cast<void>(cudaStreamDestroy(s)); }
  bool idle(stream_type s) {
    const cudaError_t status = cudaStreamQuery(s);
    if (status == cudaErrorNotReady) return false;
    check(status, "cudaStreamQuery");
    return true;
  }
  memory_type memory_on(int device, stream_type s) { return device_memory(device, s); }

  std::uint32_t* allocate_flags(std::size_t n) {
    void* flags = nullptr;
    check(cudaHostAlloc(&flags, n * sizeof(std::uint32_t),
                        cudaHostAllocMapped | cudaHostAllocPortable),
          "cudaHostAlloc of " + std::to_string(n) + " flags");
    return static_cast<std::uint32_t*>(flags);
  }
  void free_flags(std::uint32_t* flags, std::size_t) { static_cast<void>(cudaFreeHost(flags)); }

  void write_flag(stream_type s, std::uint32_t* flag, std::uint32_t value) {
    operations_->write(s, flag, value);
  }
  void wait_flag(stream_type s, const std::uint32_t* flag, std::uint32_t value) {
    operations_->wait(s, flag, value);
  }
  void wait_flags(stream_type s, std::span<const weft::stream::flag_wait> waits) {
    operations_->wait_all(s, waits);
  }
  bool direct_access(int reader, int owner) { return reader == owner || peer(reader, owner); }

 private:
  bool peer(int reader, int owner) const {
    for (const auto& [r, o] : peers_) {
      if (r == reader && o == owner) return true;
    }
    return false;
  }

  const detail::stream_operations* operations_;
  std::vector<std::pair<int, int>> peers_;  // (reader, owner) with peer access enabled
};
static_assert(weft::stream::backend<stream_backend>);

using transport = weft::stream::local_transport<stream_backend>;
static_assert(weft::transport<transport>);
static_assert(weft::reducing_transport<transport>);

// The hardware queues a GPU's streams share: CUDA_DEVICE_MAX_CONNECTIONS as the driver reads
// it when the program first uses the GPU (1 to 32; CUDA's default 8).
inline int hardware_queues() {
  const char* text = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  if (text == nullptr || *text == '\0') return 8;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 1) return 8;
  return static_cast<int>(std::min(value, 32L));
}

// Ranks sharing a GPU. Each rank's stream, and each carrier (a stream) that carries a transfer to a
// rank, waits on flags (cuStreamWaitValue32), and a waiting stream holds its hardware queue: once a
// GPU's streams outnumber its queues, a wait can hold up, in the same queue, the very work it
// waits for, and the streams wait for good (4 ranks on one H200 did with 8 queues, and ran with
// 16). So k ranks on one GPU (k >= 2) need at least 4k queues, at most 8 ranks a GPU. Throws
// errc::invalid_argument, before anything is made, when `devices` asks for more.
inline void check_sharing(const std::vector<int>& devices, int queues) {
  for (const int device : devices) {
    const auto sharing = std::count(devices.begin(), devices.end(), device);
    if (sharing < 2 || queues >= 4 * sharing) continue;
    const std::string head = "weft::cuda::communicators: " + std::to_string(sharing) +
                             " ranks share GPU " + std::to_string(device);
    if (sharing > 8) {
      throw error(errc::invalid_argument,
                  head +
                      "; at most 8 ranks can share one GPU (each needs 4 of the GPU's "
                      "hardware queues, and CUDA_DEVICE_MAX_CONNECTIONS gives at most 32)");
    }
    throw error(
        errc::invalid_argument,
        head + ", which then needs CUDA_DEVICE_MAX_CONNECTIONS of at least " +
            std::to_string(4 * sharing) + " (it is " + std::to_string(queues) +
            "; CUDA's default is 8): with fewer hardware queues their waiting streams can block "
            "each "
            "other for good. Set CUDA_DEVICE_MAX_CONNECTIONS=32 in the environment before the "
            "program "
            "starts, or call weft::cuda::request_hardware_queues() before its first CUDA call");
  }
}

// For a program that puts several ranks on one GPU: asks the driver for the most hardware queues
// (CUDA_DEVICE_MAX_CONNECTIONS=32) unless the environment already names a number, and returns
// the queues the driver will read. The driver reads the variable once, so this must come before
// the program's first CUDA call.
inline int request_hardware_queues() {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  return hardware_queues();
}

// A communicator per rank over the GPUs of this process (the counterpart of ncclCommInitAll).
class communicators {
 public:
  using communicator_type = weft::communicator<transport>;

  // One rank per entry of `devices`, in order. `streams` (one per rank, on that rank's device,
  // kept alive by the caller) are where each rank's collectives are enqueued; without them each
  // rank gets a stream of its own (stream(rank)). Throws weft::error(transport) "no CUDA
  // device: ..." on a machine without a GPU or driver, errc::invalid_argument for a device that
  // does not exist.
  explicit communicators(std::vector<int> devices, std::vector<cudaStream_t> streams = {},
                         options settings = options::from_environment()) {
    if (const std::string why = why_no_device(); !why.empty()) {
      throw error(errc::transport,
                  "no CUDA device: weft::cuda::communicators needs a GPU (" + why + ")");
    }
    const int visible = device_count();
    for (int d : devices) {
      if (d < 0 || d >= visible) {
        throw error(errc::invalid_argument, "weft::cuda::communicators: device " +
                                                std::to_string(d) +
                                                " does not exist (this process sees " +
                                                std::to_string(visible) + " device(s))");
      }
    }
    check_sharing(devices, hardware_queues());
    ranks_ = std::make_unique<weft::stream::local_ranks<stream_backend>>(
        stream_backend(devices), devices, std::move(streams));
    comms_.reserve(devices.size());
    for (int rank = 0; rank < ranks_->size(); ++rank)
      comms_.emplace_back(ranks_->endpoint(rank), settings);
  }

  int size() const { return static_cast<int>(comms_.size()); }
  communicator_type& operator[](int rank) { return comms_.at(static_cast<std::size_t>(rank)); }
  cudaStream_t stream(int rank) const { return ranks_->stream(rank); }
  int device(int rank) const { return ranks_->device(rank); }

  // Waits for `rank`'s stream; throws errc::timeout naming what it waits for after `timeout`.
  void synchronize(int rank, std::chrono::milliseconds timeout) {
    ranks_->synchronize(rank, timeout);
  }
  // Every rank's stream, each within `timeout`.
  void synchronize(std::chrono::milliseconds timeout) {
    for (int rank = 0; rank < size(); ++rank) ranks_->synchronize(rank, timeout);
  }
  // Releases every waiting stream and poisons the communicators (see
  // weft::stream::local_ranks::abort).
  void abort(const std::string& reason = "aborted by the caller") { ranks_->abort(reason); }

 private:
  std::unique_ptr<weft::stream::local_ranks<stream_backend>> ranks_;
  std::vector<communicator_type> comms_;  // destroyed before the ranks
};

// weft::cuda::synchronize(comm, timeout) and weft::cuda::abort(comm) on one communicator.
using weft::stream::abort;
using weft::stream::synchronize;

}  // namespace weft::cuda
