// NCCL's single-process example with weft: one process drives four GPUs. A communicator per rank,
// one allreduce issued on every rank in turn from this one thread, and nothing is finished until
// the host synchronizes each rank's stream. NCCL's call is in a comment above each weft call.
//
// It runs with however many GPUs are visible: the four ranks share them (rank i on GPU
// i % count), so one GPU runs all four. Without a GPU it says so and exits 77 ("skipped").
//
//   nvcc -std=c++20 -arch=sm_90 -I include -I transports/cuda
//        examples/cuda_four_gpus.cu -o cuda_four_gpus
#include <weft/transport/cuda.hpp>
#include <weft/weft.hpp>

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <vector>

int main() {
  using namespace std::chrono_literals;
  // Ranks sharing a GPU wait on each other in streams of their own, which need hardware queues
  // of their own: 4 ranks on one GPU need at least 16 (CUDA's default is 8). The driver reads
  // the number once, so it is asked for before the first CUDA call.
  weft::cuda::request_hardware_queues();
  const int visible = weft::cuda::device_count();
  if (visible == 0) {
    std::printf("skipped: no CUDA device (%s)\n", weft::cuda::why_no_device().c_str());
    return 77;
  }
  constexpr int ranks = 4;
  constexpr std::size_t size = 32 * 1024 * 1024;  // floats per rank, as in NCCL's example
  std::vector<int> devs;
  for (int i = 0; i < ranks; ++i) devs.push_back(i % visible);

  try {
    // Buffers and streams, as NCCL's example has them.
    std::vector<float*> sendbuff(ranks), recvbuff(ranks);
    std::vector<cudaStream_t> s(ranks);
    for (int i = 0; i < ranks; ++i) {
      weft::cuda::check(cudaSetDevice(devs[static_cast<std::size_t>(i)]), "cudaSetDevice");
      weft::cuda::check(cudaMalloc(reinterpret_cast<void**>(&sendbuff[static_cast<std::size_t>(i)]),
                                   size * sizeof(float)),
                        "cudaMalloc");
      weft::cuda::check(cudaMalloc(reinterpret_cast<void**>(&recvbuff[static_cast<std::size_t>(i)]),
                                   size * sizeof(float)),
                        "cudaMalloc");
      const std::vector<float> ones(size, static_cast<float>(i + 1));  // rank i contributes i + 1
      weft::cuda::check(cudaMemcpy(sendbuff[static_cast<std::size_t>(i)], ones.data(),
                                   size * sizeof(float), cudaMemcpyHostToDevice),
                        "cudaMemcpy");
      weft::cuda::check(cudaStreamCreate(&s[static_cast<std::size_t>(i)]), "cudaStreamCreate");
    }

    // initializing: NCCLCHECK(ncclCommInitAll(comms, nDev, devs));
    weft::cuda::communicators comms(devs, s);

    // calling the collective: no group call is needed, every call only enqueues work.
    // NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < ranks; ++i) {
      // NCCLCHECK(ncclAllReduce((const void*)sendbuff[i], (void*)recvbuff[i], size,
      //                        ncclFloat, ncclSum, comms[i], s[i]));
      weft::allreduce(comms[i], std::span<const float>(sendbuff[static_cast<std::size_t>(i)], size),
                      std::span<float>(recvbuff[static_cast<std::size_t>(i)], size), weft::sum{});
    }
    // NCCLCHECK(ncclGroupEnd());

    // synchronizing on CUDA streams to wait for completion:
    // for (int i = 0; i < nDev; ++i) { cudaSetDevice(i); cudaStreamSynchronize(s[i]); }
    // weft's synchronize is bounded: a rank whose call never came is named, not waited on for ever.
    for (int i = 0; i < ranks; ++i) comms.synchronize(i, 30s);

    bool right = true;
    for (int i = 0; i < ranks; ++i) {
      float first = 0, last = 0;
      weft::cuda::check(cudaMemcpy(&first, recvbuff[static_cast<std::size_t>(i)], sizeof(float),
                                   cudaMemcpyDeviceToHost),
                        "cudaMemcpy");
      weft::cuda::check(cudaMemcpy(&last, recvbuff[static_cast<std::size_t>(i)] + size - 1,
                                   sizeof(float), cudaMemcpyDeviceToHost),
                        "cudaMemcpy");
      std::printf("rank %d (GPU %d): recvbuff[0] = %g, recvbuff[%zu] = %g (want 10)\n", i,
                  devs[static_cast<std::size_t>(i)], static_cast<double>(first), size - 1,
                  static_cast<double>(last));
      right = right && first == 10.0f && last == 10.0f;
    }

    // finalizing: ncclCommDestroy(comms[i]) is the end of `comms`' scope (before the streams go).
    for (int i = 0; i < ranks; ++i) {
      cudaFree(sendbuff[static_cast<std::size_t>(i)]);
      cudaFree(recvbuff[static_cast<std::size_t>(i)]);
    }
    std::printf(right ? "Success\n" : "FAILED: wrong sums\n");
    if (!right) return 1;
  } catch (const weft::error& failure) {
    std::printf("weft error: %s\n", failure.what());
    return 1;
  }
  return 0;
}
