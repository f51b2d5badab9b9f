// cuda-allreduce-bench: weft's allreduce on the GPUs of one process against the GPU's own
// device-to-device copy bandwidth, measured side by side in one run (ratios, not timed checks).
//
//   cuda-allreduce-bench [bytes (default 256M)] [iterations (default 20)]
//
// Prints, for 2 and 4 ranks sharing the visible GPUs (rank i on GPU i % count):
//   copy        cudaMemcpyAsync device to device, bytes moved per second (one GPU)
//   busbw       allreduce float sum out of place, 2 (p-1)/p x bytes / time, and busbw / copy,
//               for ring (the best message-passing algorithm here), fused and automatic
//   latency     8-byte allreduce (automatic), microseconds per call: 200 calls issued back to
//               back on every rank, then every stream synchronized (as nccl-tests time)
//   round trip  one 8-byte allreduce issued on every rank and synchronized, median of 200
// busbw's time is CUDA events on every rank's stream (the slowest rank counts), after a
// warm-up; each call's result is checked once (every element must equal the sum over the
// ranks). Exit 0 when every result was right, 1 otherwise, 77 without a GPU.
#include <weft/transport/cuda.hpp>
#include <weft/weft.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using namespace std::chrono_literals;

std::size_t parse_bytes(const char* text) {
  char* end = nullptr;
  double value = std::strtod(text, &end);
  if (end != nullptr && (*end == 'K' || *end == 'k')) value *= 1024;
  if (end != nullptr && (*end == 'M' || *end == 'm')) value *= 1024 * 1024;
  if (end != nullptr && (*end == 'G' || *end == 'g')) value *= 1024.0 * 1024 * 1024;
  return static_cast<std::size_t>(value);
}

// Seconds per copy of `bytes` device to device on GPU 0.
double copy_seconds(std::size_t bytes, int iterations) {
  weft::cuda::check(cudaSetDevice(0), "cudaSetDevice");
  void *from = nullptr, *to = nullptr;
  weft::cuda::check(cudaMalloc(&from, bytes), "cudaMalloc");
  weft::cuda::check(cudaMalloc(&to, bytes), "cudaMalloc");
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  weft::cuda::check(cudaStreamCreate(&stream), "cudaStreamCreate");
  weft::cuda::check(cudaEventCreate(&start), "cudaEventCreate");
  weft::cuda::check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < 3; ++i)
    weft::cuda::check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream), "copy");
  weft::cuda::check(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int i = 0; i < iterations; ++i)
    weft::cuda::check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream), "copy");
  weft::cuda::check(cudaEventRecord(stop, stream), "cudaEventRecord");
  weft::cuda::check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  weft::cuda::check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  cudaFree(from);
  cudaFree(to);
  return ms / 1e3 / iterations;
}

struct rank_buffers {
  float* send = nullptr;
  float* recv = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
};

// Seconds per allreduce of `count` floats over `p` ranks (the slowest rank's events); sets
// `right` false when a result differs from the sum.
template <class Algorithm>
double allreduce_seconds(int p, std::size_t count, int iterations, bool& right) {
  const int visible = weft::cuda::device_count();
  std::vector<int> devices;
  for (int r = 0; r < p; ++r) devices.push_back(r % visible);
  weft::cuda::communicators gpus(devices);
  std::vector<rank_buffers> ranks(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    auto& b = ranks[static_cast<std::size_t>(r)];
    weft::cuda::device_scope on(gpus.device(r));
    weft::cuda::check(cudaMalloc(&b.send, count * sizeof(float)), "cudaMalloc");
    weft::cuda::check(cudaMalloc(&b.recv, count * sizeof(float)), "cudaMalloc");
    const std::vector<float> mine(count, static_cast<float>(r + 1));
    weft::cuda::check(
        cudaMemcpy(b.send, mine.data(), count * sizeof(float), cudaMemcpyHostToDevice),
        "cudaMemcpy");
    // weft's streams are non-blocking: the copy (from pageable memory) must have landed first.
    weft::cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    weft::cuda::check(cudaEventCreate(&b.start), "cudaEventCreate");
    weft::cuda::check(cudaEventCreate(&b.stop), "cudaEventCreate");
  }
  auto issue = [&](int times) {
    for (int i = 0; i < times; ++i) {
      for (int r = 0; r < p; ++r) {
        auto& b = ranks[static_cast<std::size_t>(r)];
        weft::allreduce(gpus[r], std::span<const float>(b.send, count),
                        std::span<float>(b.recv, count), weft::sum{}, Algorithm{});
      }
    }
  };
  issue(3);  // warm-up: lanes made, scratch allocated
  gpus.synchronize(60s);
  const float want = static_cast<float>(p * (p + 1) / 2);
  for (int r = 0; r < p && count > 0; ++r) {
    float first = 0, last = 0;
    auto& b = ranks[static_cast<std::size_t>(r)];
    weft::cuda::check(cudaMemcpy(&first, b.recv, sizeof(float), cudaMemcpyDeviceToHost),
                      "cudaMemcpy");
    weft::cuda::check(cudaMemcpy(&last, b.recv + count - 1, sizeof(float), cudaMemcpyDeviceToHost),
                      "cudaMemcpy");
    if (first != want || last != want) right = false;
  }
  for (int r = 0; r < p; ++r)
    weft::cuda::check(cudaEventRecord(ranks[static_cast<std::size_t>(r)].start, gpus.stream(r)),
                      "cudaEventRecord");
  issue(iterations);
  for (int r = 0; r < p; ++r)
    weft::cuda::check(cudaEventRecord(ranks[static_cast<std::size_t>(r)].stop, gpus.stream(r)),
                      "cudaEventRecord");
  gpus.synchronize(120s);
  double slowest = 0;
  for (int r = 0; r < p; ++r) {
    float ms = 0;
    auto& b = ranks[static_cast<std::size_t>(r)];
    weft::cuda::check(cudaEventElapsedTime(&ms, b.start, b.stop), "cudaEventElapsedTime");
    slowest = std::max(slowest, static_cast<double>(ms) / 1e3 / iterations);
  }
  for (auto& b : ranks) {
    cudaFree(b.send);
    cudaFree(b.recv);
    cudaEventDestroy(b.start);
    cudaEventDestroy(b.stop);
  }
  return slowest;
}

struct latency {
  double per_call_us;    // 200 calls back to back, per call
  double round_trip_us;  // one call and synchronize, median of 200
};

// One 8-byte allreduce (2 floats) over `p` ranks, host wall-clock time after 20 calls of warm-up.
latency latency_us(int p, bool& right) {
  const int visible = weft::cuda::device_count();
  std::vector<int> devices;
  for (int r = 0; r < p; ++r) devices.push_back(r % visible);
  weft::cuda::communicators gpus(devices);
  std::vector<float*> data(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    weft::cuda::device_scope on(gpus.device(r));
    weft::cuda::check(cudaMalloc(&data[static_cast<std::size_t>(r)], 2 * sizeof(float)),
                      "cudaMalloc");
  }
  std::vector<double> times;
  for (int i = 0; i < 220; ++i) {
    for (int r = 0; r < p; ++r) {
      const float mine[2] = {1.0f, 1.0f};
      weft::cuda::check(
          cudaMemcpy(data[static_cast<std::size_t>(r)], mine, sizeof(mine), cudaMemcpyHostToDevice),
          "cudaMemcpy");
    }
    weft::cuda::check(cudaDeviceSynchronize(),
                      "cudaDeviceSynchronize");  // landed before the streams read it
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < p; ++r)
      weft::allreduce(gpus[r], std::span<float>(data[static_cast<std::size_t>(r)], 2), weft::sum{});
    gpus.synchronize(10s);
    const auto stop = std::chrono::steady_clock::now();
    if (i >= 20) times.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
    float got[2] = {0, 0};
    weft::cuda::check(cudaMemcpy(got, data[0], sizeof(got), cudaMemcpyDeviceToHost), "cudaMemcpy");
    if (got[0] != static_cast<float>(p) || got[1] != static_cast<float>(p)) right = false;
  }
  const int calls = 200;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) {
    for (int r = 0; r < p; ++r)
      weft::allreduce(gpus[r], std::span<float>(data[static_cast<std::size_t>(r)], 2), weft::sum{});
  }
  gpus.synchronize(10s);
  const double per_call =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
      calls;
  for (float* d : data) cudaFree(d);
  std::sort(times.begin(), times.end());
  return {per_call, times[times.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  weft::cuda::request_hardware_queues();  // 4 ranks share a GPU: weft::cuda::check_sharing
  if (const std::string why = weft::cuda::why_no_device(); !why.empty()) {
    std::printf("skipped: no CUDA device (%s)\n", why.c_str());
    return 77;
  }
  const std::size_t bytes = argc > 1 ? parse_bytes(argv[1]) : std::size_t{256} << 20;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 20;
  const std::size_t count = bytes / sizeof(float);
  bool right = true;
  try {
    cudaDeviceProp props{};
    weft::cuda::check(cudaGetDeviceProperties(&props, 0), "cudaGetDeviceProperties");
    std::printf("# cuda-allreduce-bench: %s, %d visible GPU(s), %zu bytes, %d iterations\n",
                props.name, weft::cuda::device_count(), count * sizeof(float), iterations);
    const double copy = static_cast<double>(count * sizeof(float)) /
                        copy_seconds(count * sizeof(float), iterations);
    std::printf("copy      device to device %10.1f GB/s\n", copy / 1e9);
    double two_rank_busbw = 0;
    auto row = [&](int p, auto algorithm) {
      using A = decltype(algorithm);
      const double seconds = allreduce_seconds<A>(p, count, iterations, right);
      const double busbw = 2.0 * (p - 1) / p * static_cast<double>(count * sizeof(float)) / seconds;
      std::printf("allreduce %d ranks %-10s busbw %8.1f GB/s   busbw / copy %.3f", p,
                  std::string(A::name).c_str(), busbw / 1e9, busbw / copy);
      if (p == 2 && std::is_same_v<A, weft::automatic>) two_rank_busbw = busbw;
      if (p != 2 && std::is_same_v<A, weft::automatic>)
        std::printf("   / 2-rank busbw %.3f", busbw / two_rank_busbw);
      std::printf("\n");
    };
    for (int p : {2, 4}) {
      row(p, weft::ring{});
      row(p, weft::fused{});
      row(p, weft::automatic{});
    }
    for (int p : {2, 4}) {
      const latency t = latency_us(p, right);
      std::printf(
          "allreduce %d ranks 8 B latency %8.1f us per call (200 back to back), round trip %.1f us "
          "(median)\n",
          p, t.per_call_us, t.round_trip_us);
    }
  } catch (const weft::error& failure) {
    std::printf("weft error: %s\n", failure.what());
    return 1;
  }
  std::printf(right ? "# results right\n" : "# WRONG results\n");
  return right ? 0 : 1;
}
