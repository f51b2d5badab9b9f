// Every algorithm on 8 ranks: what each costs in steps and bytes sent per rank, from the
// reports the collectives return. Read the numbers against the cost block at the top of each
// header in include/weft/algorithms/.
#include <weft/transport/inproc.hpp>
#include <weft/weft.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main() {
  constexpr int ranks = 8;
  constexpr std::size_t count = 1 << 14;  // 64 KiB of floats
  bool correct = true;
  weft::inproc::run(ranks, [&](weft::communicator<weft::inproc::transport>& comm) {
    auto show = [&](const weft::report& report) {
      if (comm.rank() == 0) {
        std::printf("%-15s %-19s %4d steps %9llu bytes sent\n",
                    std::string(report.collective).c_str(), std::string(report.algorithm).c_str(),
                    report.steps, static_cast<unsigned long long>(report.bytes_sent));
      }
    };
    std::vector<float> data(count), all(count * ranks);
    auto allreduce_with = [&](auto algorithm) {
      std::fill(data.begin(), data.end(), 1.0f);
      show(weft::allreduce(comm, std::span<float>(data), weft::sum{}, algorithm));
      correct = correct && data[count - 1] == static_cast<float>(ranks);
    };
    allreduce_with(weft::ring{});
    allreduce_with(weft::double_binary_tree{});
    allreduce_with(weft::recursive_doubling{});
    allreduce_with(weft::recursive_halving{});
    allreduce_with(weft::direct{});
    show(weft::broadcast(comm, std::span<float>(data), 0, weft::binomial_tree{}));
    show(weft::broadcast(comm, std::span<float>(data), 0, weft::ring{}));
    show(weft::allgather(comm, std::span<const float>(data), std::span<float>(all), weft::ring{}));
    show(weft::allgather(comm, std::span<const float>(data), std::span<float>(all),
                         weft::recursive_doubling{}));
    show(weft::allgather(comm, std::span<const float>(data), std::span<float>(all), weft::bruck{}));
    std::vector<float> mine(count);
    show(weft::reduce_scatter(comm, std::span<const float>(all), std::span<float>(mine),
                              weft::sum{}, weft::ring{}));
    show(weft::reduce_scatter(comm, std::span<const float>(all), std::span<float>(mine),
                              weft::sum{}, weft::recursive_halving{}));
    std::vector<float> swapped(all.size());
    show(weft::alltoall(comm, std::span<const float>(all), std::span<float>(swapped),
                        weft::pairwise{}));
    show(weft::alltoall(comm, std::span<const float>(all), std::span<float>(swapped),
                        weft::bruck{}));
    show(weft::barrier(comm, weft::dissemination{}));
  });
  std::printf("results %s\n", correct ? "correct" : "WRONG");
  return correct ? 0 : 1;
}
