// Ring allreduce, step by step: why ring is bandwidth-optimal.
//
// Each of p ranks holds n bytes. Ring cuts the vector into p blocks and runs 2(p-1) steps; at
// every step each rank sends exactly one block (n/p bytes) to its right neighbour. So each
// rank sends 2(p-1)/p * n bytes in total — which tends to 2n and is the lower bound for any
// allreduce in which every rank ends up with the full result. The cost is latency: 2(p-1)
// steps, one after another.
#include "tracing.hpp"

#include <weft/transport/inproc.hpp>
#include <weft/weft.hpp>

#include <cstdio>
#include <vector>

int main() {
  constexpr int ranks = 4;
  constexpr std::size_t count = 1 << 16;  // 256 KiB of floats per rank
  example::journal log;
  std::vector<weft::report> reports(ranks);
  bool correct = true;
  example::run_traced(ranks, log, [&](auto& comm) {
    std::vector<float> data(count, static_cast<float>(comm.rank() + 1));
    reports[static_cast<std::size_t>(comm.rank())] =
        weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::ring{});
    for (float value : data) correct = correct && value == 10.0f;  // 1 + 2 + 3 + 4
  });

  const std::size_t n = count * sizeof(float);
  std::printf("ring allreduce: %d ranks, %zu bytes each, blocks of %zu bytes\n\n", ranks, n,
              n / ranks);
  for (int rank = 0; rank < ranks; ++rank) {
    std::printf("rank %d:", rank);
    int step = 0;
    for (const auto& send : log.sends_of(rank)) {
      std::printf("%s step %d -> rank %d %zu B", step == 0 ? "" : ",", step + 1, send.peer,
                  send.bytes);
      ++step;
    }
    std::printf("\n");
  }
  const auto& mine = reports[0];
  std::printf("\nphase 1 (reduce-scatter): steps 1..%d, each rank reduces the block it receives\n",
              ranks - 1);
  std::printf("phase 2 (allgather):      steps %d..%d, each rank forwards a finished block\n",
              ranks, 2 * (ranks - 1));
  std::printf(
      "\nper rank: %d steps, %llu bytes sent = 2(p-1)/p * n = %.2f n  (bound: 2(p-1)/p * n)\n",
      mine.steps, static_cast<unsigned long long>(mine.bytes_sent),
      static_cast<double>(mine.bytes_sent) / static_cast<double>(n));
  std::printf("result %s\n", correct ? "correct on every rank" : "WRONG");
  return correct && mine.bytes_sent == 2 * (ranks - 1) * n / ranks ? 0 : 1;
}
