// Inproc ring allreduce against memcpy, in one run: float32 sum, 2 ranks, 64 MiB.
//
// busbw (nccl-tests: 2(n-1)/n * size / time, = size / time for 2 ranks) of the ring allreduce
// is compared with the bandwidth of a single-thread memcpy of the same 64 MiB. Measurements
// alternate, several rounds, medians reported; the goal is busbw >= 0.5 x memcpy.
#include <weft/transport/inproc.hpp>
#include <weft/weft.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {
double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
  constexpr std::size_t bytes = std::size_t{64} << 20;
  constexpr std::size_t count = bytes / sizeof(float);
  std::vector<double> memcpy_bandwidth, busbw;
  std::vector<float> source(count, 1.0f), target(count, 0.0f);
  std::memcpy(target.data(), source.data(), bytes);  // touch every page first

  weft::options settings = weft::options::from_environment();
  bool correct = true;
  for (int round = 0; round < rounds; ++round) {
    auto start = std::chrono::steady_clock::now();
    std::memcpy(target.data(), source.data(), bytes);
    memcpy_bandwidth.push_back(
        static_cast<double>(bytes) /
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 1e9);
    double seconds = 0;
    weft::inproc::run(
        2,
        [&](weft::communicator<weft::inproc::transport>& comm) {
          std::vector<float> data(count, static_cast<float>(comm.rank() + 1));
          weft::allreduce(comm, std::span<float>(data), weft::sum{},
                          weft::ring{});  // warm: pages, scratch
          weft::barrier(comm);
          const auto begin = std::chrono::steady_clock::now();
          weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::ring{});
          weft::barrier(comm);
          const double elapsed =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
          if (comm.rank() == 0) seconds = elapsed;
          correct = correct && data[count / 3] == 6.0f;  // (1 + 2), then doubled by the second call
        },
        settings);
    busbw.push_back(static_cast<double>(bytes) / seconds / 1e9);  // 2(n-1)/n = 1 for n = 2
  }
  const double copy = median(memcpy_bandwidth);
  const double bus = median(busbw);
  std::printf("single-thread memcpy 64 MiB     : %6.2f GB/s (median of %d)\n", copy, rounds);
  std::printf("inproc ring allreduce, 2 ranks  : %6.2f GB/s busbw (median of %d)\n", bus, rounds);
  std::printf("ratio busbw / memcpy            : %6.2f (goal >= 0.50) %s\n", bus / copy,
              correct ? "" : "RESULT WRONG");
  return correct ? 0 : 1;
}
