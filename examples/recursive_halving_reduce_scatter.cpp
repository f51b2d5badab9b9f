// Recursive-halving reduce-scatter: each step halves the data still in play.
//
// With 8 ranks, step 1 exchanges half the vector with the rank 4 away, step 2 a quarter with
// the rank 2 away, step 3 an eighth with the neighbour. Every rank sends (p-1)/p of the
// vector in log2(p) steps — ring's bytes, with logarithmic latency.
#include "tracing.hpp"

#include <weft/transport/inproc.hpp>
#include <weft/weft.hpp>

#include <cstdio>
#include <vector>

int main() {
  constexpr int ranks = 8;
  constexpr std::size_t block = 1024;  // elements each rank ends with
  example::journal log;
  bool correct = true;
  example::run_traced(ranks, log, [&](auto& comm) {
    std::vector<int> all(block * ranks);
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i / block) + comm.rank();
    std::vector<int> mine(block);
    weft::reduce_scatter(comm, std::span<const int>(all), std::span<int>(mine), weft::sum{},
                         weft::recursive_halving{});
    // block r summed over ranks: 8 * r + (0 + 1 + ... + 7)
    for (int value : mine) correct = correct && value == 8 * comm.rank() + 28;
  });
  std::printf("recursive-halving reduce-scatter, %d ranks, %zu-byte blocks\n\n", ranks,
              block * sizeof(int));
  for (int rank = 0; rank < ranks; ++rank) {
    std::printf("rank %d:", rank);
    for (const auto& send : log.sends_of(rank))
      std::printf("  -> %d: %6zu B", send.peer, send.bytes);
    std::printf("\n");
  }
  std::printf("\nhalving: %zu, %zu, %zu bytes; result %s\n", 4 * block * sizeof(int),
              2 * block * sizeof(int), block * sizeof(int), correct ? "correct" : "WRONG");
  return correct ? 0 : 1;
}
