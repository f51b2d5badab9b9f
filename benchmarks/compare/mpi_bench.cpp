// mpi-bench: the same table as weft-bench, measured on MPI's collectives, so the two can be
// read side by side (compare.py runs both in one alternating sweep).
//
//   mpirun -n 4 --mca btl self,tcp   mpi-bench [--collective NAME|all] [-b MIN] [-e MAX] ...
//   mpirun -n 4 --mca btl self,vader mpi-bench ...
//
// Same inputs, checks, timing (barrier, one timed call, slowest rank, median) and busbw factors
// as weft-bench (../bench.hpp). float32 sum; the MPI library chooses its algorithms. Calls:
// MPI_Allreduce, MPI_Bcast, MPI_Reduce, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Alltoall,
// MPI_Gather, MPI_Scatter, MPI_Sendrecv. --transport only labels the JSON output.
#include "../bench.hpp"

#include <mpi.h>

namespace {

using weft_bench::measurement;
using weft_bench::settings;

measurement measure(const settings& options, const std::string& collective, std::size_t count,
                    bool in_place, int p, int r) {
  weft_bench::workload<float, weft::sum> work(collective, count, in_place, p, r, options.root);
  const int root = work.root;
  const int n = static_cast<int>(count);
  const int block = static_cast<int>(work.block);
  auto once = [&] {
    float* in = work.in.data();
    float* out = work.out.data();
    if (collective == "allreduce")
      MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else if (collective == "broadcast")
      MPI_Bcast(in, n, MPI_FLOAT, root, MPI_COMM_WORLD);
    else if (collective == "reduce")
      MPI_Reduce(in, out, n, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD);
    else if (collective == "allgather")
      MPI_Allgather(in, block, MPI_FLOAT, out, block, MPI_FLOAT, MPI_COMM_WORLD);
    else if (collective == "reduce_scatter")
      MPI_Reduce_scatter_block(in, out, block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else if (collective == "alltoall")
      MPI_Alltoall(in, block, MPI_FLOAT, out, block, MPI_FLOAT, MPI_COMM_WORLD);
    else if (collective == "gather")
      MPI_Gather(in, block, MPI_FLOAT, out, block, MPI_FLOAT, root, MPI_COMM_WORLD);
    else if (collective == "scatter")
      MPI_Scatter(in, block, MPI_FLOAT, out, block, MPI_FLOAT, root, MPI_COMM_WORLD);
    else if (collective == "sendrecv") {
      MPI_Sendrecv(in, n, MPI_FLOAT, (r + 1) % p, 0, out, n, MPI_FLOAT, (r + p - 1) % p, 0,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  };
  auto slowest = [](double seconds) {
    double result = 0;
    MPI_Allreduce(&seconds, &result, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return result;
  };
  return weft_bench::time_calls(
      options, work, [] { MPI_Barrier(MPI_COMM_WORLD); }, once, slowest);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  weft_bench::program_name = "mpi-bench";
  weft_bench::accepted_algorithms = {"automatic"};
  settings options = weft_bench::parse(argc, argv);
  if (options.type != "float" || options.op != "sum")
    weft_bench::usage("mpi-bench measures float sum only");
  int p = 0, r = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string library(version);
  library = library.substr(0, library.find_first_of(",\n"));
  const std::string where =
      library + " (" + (options.transport.empty() ? "its default transport" : options.transport) +
      ")";
  if (r == 0) {
    std::printf(
        "# mpi-bench: %s, %d ranks\n# type float, op sum, root %d, iterations %d (median), warm-up "
        "%d, check %d\n",
        where.c_str(), p, options.root, options.iterations, options.warmup, options.check ? 1 : 0);
  }
  weft_bench::summary totals;
  int status = 0;
  try {
    weft_bench::sweep(
        options, sizeof(float), p, r, weft_bench::collectives_of(options),
        [&](const std::string& collective, std::size_t count, bool in_place, const settings& how) {
          return measure(how, collective, count, in_place, p, r);
        },
        // broadcast is in place as in weft; the others out of place
        [](const std::string& collective, bool in_place) {
          return in_place == (collective == "broadcast");
        },
        [](std::array<std::size_t, 2> wrong) {
          std::array<unsigned long long, 2> mine{wrong[0], wrong[1]}, total{};
          MPI_Allreduce(mine.data(), total.data(), 2, MPI_UNSIGNED_LONG_LONG, MPI_SUM,
                        MPI_COMM_WORLD);
          return std::array<std::size_t, 2>{total[0], total[1]};
        },
        totals);
    if (r == 0) {
      if (!options.json.empty())
        weft_bench::write_json(options, "mpi", options.transport, where, p, totals);
      status = weft_bench::print_footer(totals);
    }
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "mpi-bench: %s\n", failure.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
