// Binomial-tree broadcast: the set of ranks holding the data doubles every step.
//
// Step 1: the root sends to the rank half-way round; step 2: both send a quarter of the way;
// ... after ceil(log2 p) steps everyone has it. Compare with a chain (ring broadcast), which
// needs p-1 steps for one message but can pipeline a large one.
#include "tracing.hpp"

#include <weft/transport/inproc.hpp>
#include <weft/weft.hpp>

#include <cstdio>
#include <vector>

int main() {
  constexpr int ranks = 8;
  constexpr int root = 3;
  example::journal log;
  bool correct = true;
  std::vector<weft::report> reports(ranks);
  example::run_traced(ranks, log, [&](auto& comm) {
    std::vector<int> data(256, comm.rank() == root ? 42 : 0);
    reports[static_cast<std::size_t>(comm.rank())] =
        weft::broadcast(comm, std::span<int>(data), root, weft::binomial_tree{});
    for (int value : data) correct = correct && value == 42;
  });
  std::printf("binomial-tree broadcast from rank %d to %d ranks\n\n", root, ranks);
  int most_steps = 0;
  for (int rank = 0; rank < ranks; ++rank) {
    std::printf("rank %d sends to:", rank);
    for (const auto& send : log.sends_of(rank)) std::printf(" %d", send.peer);
    std::printf("%s\n", log.sends_of(rank).empty() ? " (leaf)" : "");
    most_steps = std::max(most_steps, reports[static_cast<std::size_t>(rank)].steps);
  }
  std::printf("\nthe root sends %zu times = ceil(log2 %d); result %s\n", log.sends_of(root).size(),
              ranks, correct ? "correct" : "WRONG");
  return correct && log.sends_of(root).size() == 3 ? 0 : 1;
}
