// weft's allreduce algorithms on a simulated machine: 4 nodes of 8 GPUs (NVLink inside a node,
// one 400 Gbit/s NIC per GPU into a leaf-spine network between nodes), a 256 MiB gradient
// allreduce, in virtual time.
// The algorithms are the very code every transport runs; the simulator moves no bytes (phantom
// buffers) and reports the time and where the bytes went.
//
//   sim_allreduce [nodes (default 4)] [MiB (default 256)]
#include <weft/transport/sim.hpp>
#include <weft/weft.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

template <class Algorithm>
void one(const weft::sim::fabric& machine, std::size_t bytes) {
  const auto measured = weft::sim::run(
      machine,
      [&](weft::communicator<weft::sim::transport>& comm) {
        weft::sim::phantom<float> gradients(bytes / sizeof(float));
        weft::allreduce(comm, gradients.span(), weft::sum{}, Algorithm{});
      },
      weft::sim::payload::phantom);
  const double p = machine.ranks();
  const double busbw = 2 * (p - 1) / p * static_cast<double>(bytes) / measured.seconds / 1e9;
  std::printf("%-28s %10.1f us  busbw %7.1f GB/s  scale-up %8.1f GiB  scale-out %8.1f GiB\n",
              std::string(Algorithm::name).c_str(), measured.seconds * 1e6, busbw,
              measured.scale_up_bytes / (1 << 30), measured.scale_out_bytes / (1 << 30));
}

}  // namespace

int main(int argc, char** argv) {
  const int nodes = argc > 1 ? std::atoi(argv[1]) : 4;
  const std::size_t mib = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 256;
  // HGX H200 inside a node (NVLink 4, 450 GB/s a GPU each way, messages at 0.82 of it and
  // 0.94 us; NVLink SHARP in the switches; reductions at 4.8 TB/s of HBM; 6 us to launch a call),
  // a 400G NIC a GPU (rail-optimized, 2 us) into two tiers of Clos (1 us a hop).
  const auto machine =
      weft::sim::cluster(nodes, weft::sim::hgx_h200(), weft::sim::ethernet(400).with_tiers(2));
  std::printf(
      "allreduce of %zu MiB on %d nodes x 8 GPUs (simulated; bytes counted once per message)\n",
      mib, nodes);
  const std::size_t bytes = mib << 20;
  one<weft::ring>(machine, bytes);
  one<weft::recursive_halving>(machine, bytes);
  one<weft::double_binary_tree>(machine, bytes);
  one<weft::hierarchical<weft::ring, weft::ring>>(machine, bytes);
  // Each node's NVLink switch reduces (NVLS), then a ring across: NCCL's NVLSTree, its phases
  // one after another.
  one<weft::hierarchical<weft::in_switch, weft::ring>>(machine, bytes);
  return 0;
}
