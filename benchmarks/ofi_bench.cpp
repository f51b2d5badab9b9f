// weft-bench-ofi: the collectives over the libfabric transport, one process per rank, as an
// nccl-tests table. Start it with a launcher:
//
//   weft-run -n 4 weft-bench-ofi [--collective NAME|all] [--algorithm NAME] [-b MIN] [-e MAX]
//                                [-f FACTOR] [-n ITERS] [-w WARMUP]
//   WEFT_OFI_PROVIDER=shm weft-run -n 4 weft-bench-ofi ...  (or tcp;ofi_rxm, verbs;ofi_rxm, efa,
//   cxi)
//
// The table's conventions are in table.hpp; --ranks is the launcher's business here.
#include "table.hpp"

#include <weft/transport/ofi.hpp>

int main(int argc, char** argv) {
  weft_bench::program_name = "weft-bench-ofi";
  const weft_bench::settings options = weft_bench::parse(argc, argv);
  weft_bench::force_algorithm(options.algorithm);
  weft_bench::summary totals;
  try {
    auto job = weft::ofi::session::from_environment();
    auto& comm = job.comm();
    if (comm.rank() == 0) {
      std::printf(
          "# weft-bench-ofi: %d ranks (processes, %s), libfabric provider %s on fabric %s, "
          "float32, sum, "
          "root 0, algorithm %s\n",
          comm.size(), job.launch().launcher.c_str(), job.endpoint().provider().c_str(),
          job.endpoint().fabric().c_str(), options.algorithm.c_str());
    }
    weft_bench::run_table(comm, options, totals);
    weft::barrier(comm);
    if (comm.rank() != 0) return 0;
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "weft-bench-ofi: %s\n", failure.what());
    return 1;
  }
  return weft_bench::print_footer(totals);
}
