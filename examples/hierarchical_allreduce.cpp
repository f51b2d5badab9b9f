// Two tiers: 2 hosts x 4 ranks, allreduce flat and hierarchical.
//
// The in-process world is given a host layout (ranks 0-3 on host 0, 4-7 on host 1), as a job over
// weft::tiered_session<shm, tcp> learns one at start-up. weft::hierarchical<ring, ring> reduces
// within each host first (a ring reduce-scatter among its 4 ranks), then across hosts among the
// rails (local rank i of each host allreduces its quarter), then gathers within each host: only
// a quarter of the vector per rank crosses between hosts. split_by_host and split_by_rail give
// the same groups to your own code (tensor parallelism within a host, data parallelism across).
#include <weft/transport/inproc.hpp>
#include <weft/weft.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

int main() {
  const int ranks_per_host[] = {4, 4};
  weft::inproc::world<> world(weft::host_layout::blocks(ranks_per_host));
  std::atomic<bool> correct{true};
  weft::inproc::run(world, [&](weft::communicator<weft::inproc::transport>& comm) {
    std::vector<float> gradients(1 << 20, static_cast<float>(comm.rank()));
    // flat: one ring through all 8 ranks
    const auto flat = weft::allreduce(comm, std::span<float>(gradients), weft::sum{}, weft::ring{});
    correct = correct && gradients[0] == 28.0f;  // 0 + 1 + ... + 7
    // two tiers: within each host, then among the rails, then within each host again
    std::fill(gradients.begin(), gradients.end(), static_cast<float>(comm.rank()));
    const auto tiers = weft::allreduce(comm, std::span<float>(gradients), weft::sum{},
                                       weft::hierarchical<weft::ring, weft::ring>{});
    correct = correct && gradients.back() == 28.0f;

    auto host = comm.split_by_host();  // the 4 ranks of this host
    auto rail = comm.split_by_rail();  // this rank's counterpart on every host
    if (comm.rank() == 5) {
      std::printf("rank 5: host rank %d of %d, rail rank %d of %d\n", host.rank(), host.size(),
                  rail.rank(), rail.size());
      std::printf("  %-24s %3d steps, %8llu bytes sent\n", std::string(flat.algorithm).c_str(),
                  flat.steps, static_cast<unsigned long long>(flat.bytes_sent));
      std::printf("  %-24s %3d steps, %8llu bytes sent\n", std::string(tiers.algorithm).c_str(),
                  tiers.steps, static_cast<unsigned long long>(tiers.bytes_sent));
    }
  });
  // Both send 7 MiB per rank of a 4 MiB vector. The ring's hops from rank 3 to 4 and from 7 to 0
  // carry all of theirs between hosts; of hierarchical's, only the rail phase does: 1 MiB per rank.
  std::printf("2 hosts x 4 ranks: flat and hierarchical allreduce %s\n",
              correct ? "correct" : "WRONG");
  return correct ? 0 : 1;
}
