// weft/transport/cuda/ipc.hpp — ranks as processes of one host sharing GPU memory (the CUDA IPC
// transport): one process per GPU, as torchrun, mpirun and srun start them, or several sharing
// one. Meson: dependency('weft-cuda') and dependency('weft-shm'); compile with nvcc.
//
//   auto job = weft::cuda::session::from_environment();   // weft-run, mpirun, srun, torchrun
//   float* data = weft::cuda::allocate<float>(job.comm(), n);   // read in place by peers
//   weft::allreduce(job.comm(), std::span<float>(data, n), weft::sum{});   // enqueued
//   weft::cuda::synchronize(job.comm(), 10s);   // cudaStreamSynchronize, bounded
//
// The protocol is weft::stream::process_transport's (weft/stream/processes.hpp) on
// CUDA streams: a send is announced in the receiver's host region; the receiver enqueues, on a
// stream of its GPU, one cudaMemcpyAsync (or one combine kernel, for a reducing receive)
// straight from the sender's device pool into the receive buffer, ordered by flags in the
// ranks' host regions (registered with cudaHostRegister) that streams wait on and write with the
// driver's stream memory operations. Each rank's pool is device memory made with the VMM API
// and handed to the others as a POSIX file descriptor over a Unix socket (SCM_RIGHTS, the job's
// secret checked), or, where the GPU cannot export VMM memory (or WEFT_CUDA_IPC=legacy),
// cudaMalloc'd and shared by cudaIpcGetMemHandle; describe() says which.
//
// The GPU of a rank: WEFT_CUDA_DEVICE, else its local rank modulo the GPUs the process sees.
// Buffers from weft::cuda::allocate (or comm.memory().allocate) lie in the pool
// (WEFT_CUDA_POOL_BYTES, 256 MiB by default) and cross in one copy; any other device buffer is
// first copied into the sender's pool: by its stream, or, past WEFT_CUDA_STAGE_BYTES (4 MiB), in
// pieces through two areas of the pool that the receiver empties in turn.
//
// Building: nothing beyond the CUDA toolkit; the session meets through the file store weft-run
// names (WEFT_STORE_PATH). To meet at WEFT_STORE or torchrun's MASTER_ADDR instead, include
// <weft/bootstrap/tcp_meeting.hpp> (Boost.Asio) after this header, and define
// BOOST_ASIO_DISABLE_VARIABLE_TEMPLATES for every file of the program: nvcc's front end parses
// Asio's executor traits only so.
#pragma once

#include "weft/communicator.hpp"
#include "weft/detail/env.hpp"
#include "weft/error.hpp"
#include "weft/stream/processes.hpp"
#include "weft/transport/cuda/communicators.hpp"
#include "weft/transport/cuda/runtime.hpp"
#include "weft/transport/cuda/shareable_memory.hpp"

#include <cuda_runtime.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft::cuda {

// weft::stream::sharing_backend on CUDA: stream_backend's streams, flags and memory for the
// rank's one device, device pools shared as VMM descriptors or legacy IPC handles.
class ipc_backend {
 public:
  using stream_type = cudaStream_t;
  using memory_type = device_memory;
  static constexpr std::string_view tuning_key = "cuda-ipc";

  ipc_backend() { request_hardware_queues(); }

  int devices() const {
    if (const std::string why = why_no_device(); !why.empty()) {
      throw error(errc::transport,
                  "no CUDA device: weft::cuda::ipc_transport needs a GPU (" + why + ")");
    }
    return device_count();
  }

  class pool_type {
   public:
    explicit pool_type(shareable_allocation memory) : memory_(std::move(memory)) {}
    std::byte* data() const { return memory_.data(); }
    std::size_t bytes() const { return memory_.size(); }
    // vmm: one descriptor, exported at the first call and closed with the pool (each handover
    // sends the peer its own copy); -1 for legacy.
    int descriptor() const {
      if (memory_.way() != sharing::vmm) return -1;
      if (descriptor_ < 0) descriptor_ = memory_.export_descriptor();
      return descriptor_;
    }
    std::string handle() const {
      if (memory_.way() != sharing::legacy) return {};
      const cudaIpcMemHandle_t h = memory_.ipc_handle();
      return std::string(reinterpret_cast<const char*>(&h), sizeof h);
    }
    std::string_view way() const {
      return memory_.way() == sharing::vmm ? "VMM descriptors" : "legacy IPC handles";
    }
    pool_type(pool_type&& other) noexcept
        : memory_(std::move(other.memory_)), descriptor_(std::exchange(other.descriptor_, -1)) {}
    pool_type& operator=(pool_type&&) = delete;
    ~pool_type() {
      if (descriptor_ >= 0) ::close(descriptor_);
    }

   private:
    shareable_allocation memory_;
    mutable int descriptor_ = -1;
  };
  using mapped_type = imported_allocation;

  pool_type make_pool(int device, std::size_t bytes) {
    bind(device);
    return pool_type(shareable_allocation(device, bytes));
  }
  mapped_type map_pool(int device, int descriptor, std::string_view handle, std::size_t bytes) {
    bind(device);
    if (descriptor >= 0) return imported_allocation(device, descriptor, bytes);
    cudaIpcMemHandle_t h{};
    if (handle.size() != sizeof h) {
      throw error(errc::transport,
                  "weft::cuda::ipc_transport: a peer's pool came without a descriptor or an IPC "
                  "handle (do the ranks share their GPUs the same way? WEFT_CUDA_IPC)");
    }
    std::memcpy(&h, handle.data(), sizeof h);
    return imported_allocation(device, h, bytes);
  }
  // The ranks' host regions, where the flags are: pinned and mapped for the device. Streams
  // wait on and write them at their host address (unified addressing).
  void register_host(std::byte* p, std::size_t n) {
    check(cudaHostRegister(p, n, cudaHostRegisterMapped | cudaHostRegisterPortable),
          "cudaHostRegister of a rank's region");
    int same = 0;
    check(cudaDeviceGetAttribute(&same, cudaDevAttrCanUseHostPointerForRegisteredMem, device_),
          "cudaDeviceGetAttribute(CanUseHostPointerForRegisteredMem)");
    if (same == 0) {
      throw error(errc::transport, "weft::cuda::ipc_transport: device " + std::to_string(device_) +
                                       " cannot use registered host memory at its host address");
    }
  }
  void unregister_host(std::byte* p) { static_cast<void>(cudaHostUnregister(p)); }

  stream_type make_stream(int device) { return inner(device).make_stream(device); }
  void destroy_stream(stream_type s) { static_cast<void>(cudaStreamDestroy(s)); }
  bool idle(stream_type s) { return inner(device_).idle(s); }
  memory_type memory_on(int device, stream_type s) { return device_memory(device, s); }
  std::uint32_t* allocate_flags(std::size_t n) { return inner(device_).allocate_flags(n); }
  void free_flags(std::uint32_t* flags, std::size_t n) { inner(device_).free_flags(flags, n); }
  void write_flag(stream_type s, std::uint32_t* flag, std::uint32_t value) {
    inner(device_).write_flag(s, flag, value);
  }
  void wait_flag(stream_type s, const std::uint32_t* flag, std::uint32_t value) {
    inner(device_).wait_flag(s, flag, value);
  }
  void wait_flags(stream_type s, std::span<const weft::stream::flag_wait> waits) {
    inner(device_).wait_flags(s, waits);
  }
  bool direct_access(int, int) { return true; }  // a peer's pool is mapped for this rank's device

 private:
  void bind(int device) {
    device_ = device;
    const device_scope on(device);
    check(cudaFree(nullptr), "initializing device " + std::to_string(device));
  }
  stream_backend& inner(int device) {
    if (!inner_) {
      device_ = device;
      inner_.emplace(std::vector<int>{device});
    }
    return *inner_;
  }

  int device_ = 0;
  std::optional<stream_backend> inner_;
};
static_assert(weft::stream::sharing_backend<ipc_backend>);

// What an IPC rank is made with: the stream-ordered settings, from WEFT_CUDA_DEVICE,
// WEFT_CUDA_POOL_BYTES, WEFT_CUDA_STAGE_BYTES and WEFT_TIMEOUT_MS (docs/tuning.md).
struct ipc_config : weft::stream::process_config {
  static ipc_config from_environment() {
    namespace env = weft::detail::env;
    ipc_config result;
    static_cast<weft::stream::process_config&>(result) =
        weft::stream::process_config::from_environment();
    result.pool_bytes = std::size_t{256} << 20;
    if (const auto value = env::bytes("WEFT_CUDA_POOL_BYTES", std::uint64_t{1} << 40)) {
      result.pool_bytes = static_cast<std::size_t>(*value);
    }
    if (const auto value = env::count("WEFT_CUDA_DEVICE", 1 << 16))
      result.device = static_cast<int>(*value);
    result.stage_piece_bytes = std::size_t{4} << 20;
    result.read_stage_bytes("WEFT_CUDA_STAGE_BYTES");
    return result;
  }
};

using ipc_transport = weft::stream::process_transport<ipc_backend, ipc_config>;
static_assert(weft::transport<ipc_transport>);
static_assert(weft::reducing_transport<ipc_transport>);

// A ready job from the launcher's environment (weft/bootstrap/session.hpp).
using session = basic_session<ipc_transport, ipc_config>;

// `count` elements of T in the rank's pool: peers read sends of it in place (one copy). Throws
// errc::invalid_argument when the pool has no room left (WEFT_CUDA_POOL_BYTES sets its size).
template <class T>
T* allocate(communicator<ipc_transport>& comm, std::size_t count) {
  auto& memory = comm.memory();
  const std::size_t bytes = count * sizeof(T);
  std::byte* p = memory.allocate(bytes);
  if (!memory.in_pool(p, bytes)) {
    memory.deallocate(p, bytes);
    throw error(errc::invalid_argument, "weft::cuda::allocate: the pool of rank " +
                                            std::to_string(comm.rank()) + " has no room for " +
                                            std::to_string(bytes) +
                                            " more bytes; raise WEFT_CUDA_POOL_BYTES");
  }
  return reinterpret_cast<T*>(p);
}
template <class T>
void deallocate(communicator<ipc_transport>& comm, T* p, std::size_t count) {
  comm.memory().deallocate(reinterpret_cast<std::byte*>(p), count * sizeof(T));
}

using weft::stream::abort;
using weft::stream::synchronize;

}  // namespace weft::cuda
