// weft-bench --transport cuda-ipc (under weft-run, mpirun, srun, torchrun): the table over
// weft::cuda::ipc_transport, a process per rank, its buffers from the rank's pool (read in
// place by the peers). Per iteration a stream-ordered barrier, then the call between two CUDA
// events on the rank's stream; a row's time is the slowest rank's median, gathered through the
// job's bootstrap store outside the timing.
#include <weft/transport/cuda/ipc.hpp>  // first: it sets what nvcc needs of Boost.Asio

#include "bench_cuda.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace weft_bench {

namespace {

// Sums counts over the ranks of the job through its bootstrap store (the table's few exchanges
// happen on the host, outside the timing).
class store_sum {
 public:
  explicit store_sum(weft::cuda::session& job) : job_(&job) {}
  std::array<std::size_t, 2> operator()(std::array<std::size_t, 2> mine) {
    std::array<std::size_t, 2> total{};
    for (const auto& theirs : all(mine)) {
      total[0] += theirs[0];
      total[1] += theirs[1];
    }
    return total;
  }
  // Every rank's pair, in rank order.
  std::vector<std::array<std::size_t, 2>> all(std::array<std::size_t, 2> mine) {
    auto& comm = job_->comm();
    const std::string key = "weft-bench/sum/" + std::to_string(round_++) + "/";
    job_->meeting()->set(key + std::to_string(comm.rank()),
                         std::to_string(mine[0]) + " " + std::to_string(mine[1]));
    std::vector<std::array<std::size_t, 2>> every;
    for (int r = 0; r < comm.size(); ++r) {
      const auto value =
          job_->meeting()->get(key + std::to_string(r), weft::deadline_clock::now() + 120s);
      if (!value)
        throw weft::error(weft::errc::timeout,
                          "weft-bench: rank " + std::to_string(r) + " did not report");
      std::array<std::size_t, 2> theirs{};
      std::sscanf(value->c_str(), "%zu %zu", &theirs[0], &theirs[1]);
      every.push_back(theirs);
    }
    return every;
  }

 private:
  weft::cuda::session* job_;
  std::uint64_t round_ = 0;
};

// One rank's calls on its stream: per iteration a stream-ordered barrier, then the call between
// two events; the time is this rank's median, the slowest rank's taken through the store.
template <class T, class Op>
measurement measure_ipc(weft::cuda::session& job, rank_events& events, store_sum& sum,
                        const std::string& collective, std::size_t count, bool in_place,
                        const settings& options, Op op) {
  auto& comm = job.comm();
  const int p = comm.size();
  workload<T, Op> host(collective, count, in_place, p, comm.rank(), options.root, op);
  device_workload<T, Op> work(host, job.endpoint().device(), &comm.memory());
  const bool restore = host.overwrites_input();
  try {
    for (int i = 0; i < options.warmup; ++i) {
      call_weft(comm, work);
      if (restore) {
        weft::cuda::synchronize(comm, 60s);
        work.load();
      }
    }
    measurement result;
    std::vector<double> times;
    for (int i = 0; i < options.iterations; ++i) {
      weft::barrier(comm);
      weft::cuda::check(cudaEventRecord(events.start, job.endpoint().stream()), "cudaEventRecord");
      call_weft(comm, work);
      weft::cuda::check(cudaEventRecord(events.stop, job.endpoint().stream()), "cudaEventRecord");
      weft::cuda::synchronize(comm, 60s);
      float ms = 0;
      weft::cuda::check(cudaEventElapsedTime(&ms, events.start, events.stop),
                        "cudaEventElapsedTime");
      times.push_back(static_cast<double>(ms) / 1e3);
      if (i == 0 && options.check) result.wrong += work.wrong();
      if (restore) work.load();
    }
    std::sort(times.begin(), times.end());
    const auto nanoseconds = static_cast<std::size_t>(times[times.size() / 2] * 1e9);
    std::size_t slowest = 0;  // the slowest rank's median
    for (const auto& theirs : sum.all({nanoseconds, 0})) slowest = std::max(slowest, theirs[0]);
    result.seconds = static_cast<double>(slowest) / 1e9;
    return result;
  } catch (const weft::error& failure) {
    skip_or_rethrow(failure, options, collective);
  }
}

}  // namespace

// Runs the table with this process as one rank; returns the exit status (0 all right, 1 a
// wrong result, 77 no GPU here).
int run_cuda_ipc(const settings& options) {
  if (weft::cuda::device_count() == 0) {
    std::fprintf(stderr, "%s: skipped: no CUDA device: --transport cuda-ipc needs a GPU (%s)\n",
                 program_name, weft::cuda::why_no_device().c_str());
    return 77;
  }
  weft::cuda::request_hardware_queues();
  auto job = weft::cuda::session::from_environment();
  auto& comm = job.comm();
  const int p = comm.size();
  rank_events events;
  {
    weft::cuda::device_scope on(job.endpoint().device());
    weft::cuda::check(cudaEventCreate(&events.start), "cudaEventCreate");
    weft::cuda::check(cudaEventCreate(&events.stop), "cudaEventCreate");
  }
  cudaDeviceProp props{};
  weft::cuda::check(cudaGetDeviceProperties(&props, job.endpoint().device()),
                    "cudaGetDeviceProperties");
  const std::string where = "processes started by " + job.launch().launcher + " on " + props.name +
                            ", " + job.endpoint().describe() +
                            ", buffers from the pool, CUDA events";
  if (comm.rank() == 0) {
    std::printf("# weft-bench: transport cuda-ipc (%s), %d ranks\n", where.c_str(), p);
    std::printf(
        "# type %s, op %s, root %d, algorithm %s, iterations %d (median), warm-up %d, check %d\n",
        options.type.c_str(), options.op.c_str(), options.root, options.algorithm.c_str(),
        options.iterations, options.warmup, options.check ? 1 : 0);
    std::fflush(stdout);
  }
  summary totals;
  store_sum sum(job);
  with_type_and_op(options, [&]<class T, class Op>(std::type_identity<T>, Op op) {
    sweep(
        options, sizeof(T), p, comm.rank(), collectives_of(options),
        [&](const std::string& collective, std::size_t count, bool in_place, const settings& how) {
          return measure_ipc<T>(job, events, sum, collective, count, in_place, how, op);
        },
        [](const std::string& collective, bool in_place) {
          return in_place ? has_in_place(collective) : has_out_of_place(collective);
        },
        [&](std::array<std::size_t, 2> counts) { return sum(counts); }, totals);
  });
  weft::barrier(comm);
  weft::cuda::synchronize(comm, 60s);
  cudaEventDestroy(events.start);
  cudaEventDestroy(events.stop);
  if (comm.rank() != 0) return 0;
  if (!options.json.empty()) write_json(options, "weft", "cuda-ipc", where, p, totals);
  return print_footer(totals);
}

}  // namespace weft_bench
