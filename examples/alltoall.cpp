// All-to-all, two ways: pairwise sends every byte once in p-1 steps; Bruck needs only
// ceil(log2 p) steps but forwards blocks through intermediate ranks. Tiny blocks favour Bruck,
// large ones pairwise — this is what an expert-parallel MoE layer's token exchange looks like.
#include <weft/transport/inproc.hpp>
#include <weft/weft.hpp>

#include <cstdio>
#include <vector>

int main() {
  constexpr int ranks = 8;
  bool correct = true;
  weft::inproc::run(ranks, [&](weft::communicator<weft::inproc::transport>& comm) {
    for (std::size_t block : {std::size_t{4}, std::size_t{16384}}) {
      std::vector<int> in(block * ranks), out(block * ranks);
      for (std::size_t i = 0; i < in.size(); ++i)
        in[i] = comm.rank() * 100 + static_cast<int>(i / block);
      const auto pairwise =
          weft::alltoall(comm, std::span<const int>(in), std::span<int>(out), weft::pairwise{});
      for (std::size_t i = 0; i < out.size(); ++i)
        correct = correct && out[i] == static_cast<int>(i / block) * 100 + comm.rank();
      const auto bruck =
          weft::alltoall(comm, std::span<const int>(in), std::span<int>(out), weft::bruck{});
      for (std::size_t i = 0; i < out.size(); ++i)
        correct = correct && out[i] == static_cast<int>(i / block) * 100 + comm.rank();
      if (comm.rank() == 0) {
        std::printf("block %6zu B: pairwise %d steps %8llu B sent | bruck %d steps %8llu B sent\n",
                    block * sizeof(int), pairwise.steps,
                    static_cast<unsigned long long>(pairwise.bytes_sent), bruck.steps,
                    static_cast<unsigned long long>(bruck.bytes_sent));
      }
    }
  });
  std::printf("result %s\n", correct ? "correct" : "WRONG");
  return correct ? 0 : 1;
}
