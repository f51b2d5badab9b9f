// One process per GPU, as torchrun, mpirun, srun and weft-run start them: an allreduce of device
// buffers between the processes of one host over weft::cuda::ipc_transport, checked, then timed.
// Processes may also share a GPU (rank i takes GPU i modulo the GPUs it sees; WEFT_CUDA_DEVICE
// picks one). NCCL's call is in a comment above each weft call.
//
//   tools/weft-run -n 2 build/examples/cuda_ipc_allreduce [MiB]     (default 64 MiB per rank)
//   torchrun --nproc_per_node 8 build/examples/cuda_ipc_allreduce
//   mpirun -n 4 build/examples/cuda_ipc_allreduce
//
// Without a GPU every process says why and exits 77 ("skipped"); any other failure exits 1 with
// weft's message (which names the rank, the peer and the call).
#include <weft/transport/cuda.hpp>
#include <weft/transport/cuda/ipc.hpp>
#include <weft/weft.hpp>

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  const std::size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 64;
  if (mib == 0) {
    std::fprintf(stderr, "usage: %s [MiB per rank, at least 1]\n", argv[0]);
    return 2;
  }
  // Ranks sharing a GPU wait on each other in streams of their own: ask for the hardware queues
  // before the first CUDA call.
  weft::cuda::request_hardware_queues();
  if (const std::string why = weft::cuda::why_no_device(); !why.empty()) {
    std::fprintf(stderr, "cuda_ipc_allreduce: skipped: no CUDA device (%s)\n", why.c_str());
    return 77;
  }
  try {
    // ncclGetUniqueId on rank 0, broadcast by the launcher, ncclCommInitRank on every rank:
    // the session reads the launcher's environment and meets the other processes itself.
    auto job = weft::cuda::session::from_environment();
    auto& comm = job.comm();
    const int rank = comm.rank();
    const int p = comm.size();
    if (rank == 0) std::printf("%d processes: %s\n", p, job.endpoint().describe().c_str());

    // Buffers from the rank's pool are read in place by the other processes (any other device
    // buffer works too, staged through the pool).
    const std::size_t count = mib * (std::size_t{1} << 20) / sizeof(float);
    float* send = weft::cuda::allocate<float>(comm, count);
    float* recv = weft::cuda::allocate<float>(comm, count);
    const std::vector<float> mine(count, static_cast<float>(rank + 1));  // rank r contributes r + 1
    weft::cuda::check(cudaMemcpy(send, mine.data(), count * sizeof(float), cudaMemcpyHostToDevice),
                      "cudaMemcpy");

    // ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, stream): enqueued on the
    // rank's stream, returns at once.
    weft::allreduce(comm, std::span<const float>(send, count), std::span<float>(recv, count),
                    weft::sum{});
    // cudaStreamSynchronize(stream), bounded: a rank whose call never came is named.
    weft::cuda::synchronize(comm, 60s);

    std::vector<float> result(count);
    weft::cuda::check(
        cudaMemcpy(result.data(), recv, count * sizeof(float), cudaMemcpyDeviceToHost),
        "cudaMemcpy");
    const float want = static_cast<float>(p * (p + 1) / 2);
    std::size_t wrong = 0;
    for (const float x : result) wrong += x != want;
    std::printf("rank %d: %zu of %zu elements wrong (want %g everywhere)\n", rank, wrong, count,
                static_cast<double>(want));

    // Timed: 20 allreduces after 3 to warm up, busbw as nccl-tests reports it.
    constexpr int iterations = 20;
    for (int i = 0; i < 3; ++i)
      weft::allreduce(comm, std::span<const float>(send, count), std::span<float>(recv, count),
                      weft::sum{});
    weft::cuda::synchronize(comm, 60s);
    weft::barrier(comm);
    weft::cuda::synchronize(comm, 60s);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) {
      weft::allreduce(comm, std::span<const float>(send, count), std::span<float>(recv, count),
                      weft::sum{});
    }
    weft::cuda::synchronize(comm, 120s);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
        iterations;
    const double bytes = static_cast<double>(count * sizeof(float));
    if (rank == 0) {
      std::printf("allreduce %zu MiB: %.1f us, algbw %.1f GB/s, busbw %.1f GB/s\n", mib,
                  seconds * 1e6, bytes / seconds / 1e9, bytes / seconds / 1e9 * 2.0 * (p - 1) / p);
    }

    // ncclCommDestroy: the end of `job`'s scope (after the buffers go back to the pool).
    weft::cuda::deallocate(comm, send, count);
    weft::cuda::deallocate(comm, recv, count);
    if (wrong != 0) return 1;
    if (rank == 0) std::printf("Success\n");
    return 0;
  } catch (const weft::error& failure) {
    std::fprintf(stderr, "cuda_ipc_allreduce: %s\n", failure.what());
    return 1;
  }
}
