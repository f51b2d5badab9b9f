// weft-bench-inproc: the collectives over the in-process transport, as an nccl-tests table.
//
//   weft-bench-inproc [--ranks N] [--collective NAME|all] [--algorithm NAME] [-b MIN] [-e MAX]
//                     [-f FACTOR] [-n ITERS] [-w WARMUP]
//
// The table's conventions are in table.hpp.
#include "table.hpp"

#include <weft/transport/inproc.hpp>

int main(int argc, char** argv) {
  weft_bench::program_name = "weft-bench-inproc";
  const weft_bench::settings options = weft_bench::parse(argc, argv);
  weft_bench::force_algorithm(options.algorithm);
  std::printf("# weft-bench-inproc: %d ranks (threads of one process), float32, sum, root 0, algorithm %s\n",
              options.ranks, options.algorithm.c_str());
  weft_bench::summary totals;
  try {
    weft::inproc::run(options.ranks, [&](weft::communicator<weft::inproc::transport>& comm) {
      weft_bench::run_table(comm, options, totals);
    }, weft::options::from_environment());
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "weft-bench-inproc: %s\n", failure.what());
    return 1;
  }
  return weft_bench::print_footer(totals);
}
