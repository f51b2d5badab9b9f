// weft-bench: every collective, over every transport compiled in, as an nccl-tests table.
//
//   weft-bench [--ranks N] ...                   in-process: N threads of this process
//   weft-run -n 4 weft-bench [--transport tcp]   one process per rank over TCP
//   WEFT_OFI_PROVIDER=shm weft-run -n 4 weft-bench --transport ofi
//   weft-run -n 4 weft-bench --transport shm     the ranks of one host through shared memory
//   weft-bench --transport cuda [--ranks N]      N ranks on the GPUs of this process (nvcc builds)
//   weft-run -n 2 weft-bench --transport cuda-ipc  a process per rank sharing the GPUs (nvcc
//   builds) mpirun -n 4 -x WEFT_STORE=host:port weft-bench ...
//
// Flags follow nccl-tests (-b -e -f -n -w -c -d -o -r) plus --collective, --algorithm,
// --transport and --json; `weft-bench --help` lists them. The table's conventions are in
// bench.hpp. Exit status: 0 when every result was right, 1 when any was wrong or a call
// failed, 2 for bad flags, 77 when --transport cuda finds no GPU.
#include "bench.hpp"

#include <weft/bootstrap/environment.hpp>
#include <weft/transport/inproc.hpp>
#if WEFT_BENCH_TCP
#include <weft/transport/tcp.hpp>
#endif
#if WEFT_BENCH_OFI
#include <weft/transport/ofi.hpp>
#endif
#if WEFT_BENCH_SHM
#include <weft/transport/shm.hpp>
#endif

#if WEFT_BENCH_CUDA
namespace weft_bench {
int run_cuda(const settings& options);  // weft_bench_cuda.cu
#if WEFT_BENCH_CUDA_IPC
int run_cuda_ipc(const settings& options);  // weft_bench_cuda.cu
#endif
}  // namespace weft_bench
#endif

namespace {

const std::vector<std::string>& compiled_transports() {
  static const std::vector<std::string> names = {
    "inproc",
#if WEFT_BENCH_TCP
    "tcp",
#endif
#if WEFT_BENCH_OFI
    "ofi",
#endif
#if WEFT_BENCH_SHM
    "shm",
#endif
#if WEFT_BENCH_CUDA
    "cuda",
#endif
#if WEFT_BENCH_CUDA_IPC
    "cuda-ipc",
#endif
  };
  return names;
}

void print_header(const weft_bench::settings& options, const std::string& transport,
                  const std::string& where, int ranks) {
  std::printf("# weft-bench: transport %s (%s), %d ranks\n", transport.c_str(), where.c_str(),
              ranks);
  std::printf(
      "# type %s, op %s, root %d, algorithm %s, iterations %d (median), warm-up %d, check %d\n",
      options.type.c_str(), options.op.c_str(), options.root, options.algorithm.c_str(),
      options.iterations, options.warmup, options.check ? 1 : 0);
  std::fflush(stdout);
}

// Runs the table over a session's communicator (one process per rank); rank 0 prints.
template <class Session>
int run_session(Session& job, const weft_bench::settings& options, const std::string& transport,
                const std::string& where) {
  auto& comm = job.comm();
  if (comm.rank() == 0) print_header(options, transport, where, comm.size());
  weft_bench::summary totals;
  weft_bench::run_table(comm, options, totals);
  weft::barrier(comm);
  if (comm.rank() != 0) return 0;
  if (!options.json.empty())
    weft_bench::write_json(options, "weft", transport, where, comm.size(), totals);
  return weft_bench::print_footer(totals);
}

}  // namespace

int main(int argc, char** argv) {
  weft_bench::settings options = weft_bench::parse(argc, argv);
  // Launched (weft-run, mpirun, srun, torchrun): one process per rank over TCP.
  if (options.transport.empty()) {
    options.transport = weft::bootstrap::launcher_present() ? "tcp" : "inproc";
  }
  weft_bench::require_one_of("--transport", options.transport, compiled_transports());
  if (options.transport != "inproc" && options.transport != "cuda" && options.ranks != 0) {
    weft_bench::usage("--ranks is for --transport inproc and cuda; with " + options.transport +
                      " the launcher sets the ranks (weft-run -n N)");
  }
  weft_bench::force_algorithm(options);
  try {
    if (options.transport == "inproc") {
      const int ranks = options.ranks ? options.ranks : 4;
      print_header(options, "inproc", "threads of one process", ranks);
      weft_bench::summary totals;
      weft::inproc::run(
          ranks,
          [&](weft::communicator<weft::inproc::transport>& comm) {
            weft_bench::run_table(comm, options, totals);
          },
          weft::options::from_environment());
      if (!options.json.empty())
        weft_bench::write_json(options, "weft", "inproc", "threads of one process", ranks, totals);
      return weft_bench::print_footer(totals);
    }
#if WEFT_BENCH_TCP
    if (options.transport == "tcp") {
      auto job = weft::tcp::session::from_environment();
      const std::string where =
          "processes started by " + job.launch().launcher + ", TCP on " + job.endpoint().address();
      return run_session(job, options, "tcp", where);
    }
#endif
#if WEFT_BENCH_OFI
    if (options.transport == "ofi") {
      auto job = weft::ofi::session::from_environment();
      const std::string where = "processes started by " + job.launch().launcher +
                                ", libfabric provider " + job.endpoint().provider() +
                                " on fabric " + job.endpoint().fabric();
      return run_session(job, options, "ofi", where);
    }
#endif
#if WEFT_BENCH_CUDA
    if (options.transport == "cuda") return weft_bench::run_cuda(options);
#endif
#if WEFT_BENCH_CUDA_IPC
    if (options.transport == "cuda-ipc") return weft_bench::run_cuda_ipc(options);
#endif
#if WEFT_BENCH_SHM
    if (options.transport == "shm") {
      auto job = weft::shm::session::from_environment();
      const std::string where =
          "processes started by " + job.launch().launcher + ", " + job.endpoint().describe();
      return run_session(job, options, "shm", where);
    }
#endif
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "weft-bench: %s\n", failure.what());
    return 1;
  }
  return 1;
}
