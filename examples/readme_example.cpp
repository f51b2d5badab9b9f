// The complete example from README.md, kept identical so the tests run what users read.
#include <weft/transport/inproc.hpp>
#include <weft/weft.hpp>

#include <cstdio>
#include <vector>

int main() {
  // 4 ranks, each a thread; fn gets a communicator over its rank's transport.
  weft::inproc::run(4, [](weft::communicator<weft::inproc::transport>& comm) {
    std::vector<float> gradients(1 << 20, 1.0f + comm.rank());
    auto report = weft::allreduce(comm, std::span<float>(gradients), weft::sum{});  // automatic
    weft::allreduce(comm, std::span<float>(gradients), weft::max{}, weft::ring{});  // chosen

    auto tensor = comm.split(/*color=*/comm.rank() / 2, /*key=*/comm.rank());  // groups of 2
    weft::broadcast(tensor, std::span<float>(gradients), /*root=*/0);
    if (comm.rank() == 0) std::printf("%s ran %d steps\n", report.algorithm.data(), report.steps);
  });
}
