// weft-bench --transport cuda: the table over weft::cuda::communicators, ranks as GPUs of this
// process (rank i on GPU i % visible devices; --ranks N, 4 by default), driven from one thread.
//
// Each rank's inputs are the workload's known values (bench_workload.hpp), copied to device
// buffers; a timed iteration synchronizes every rank's stream, records an event on each,
// issues the call on every rank in turn, records a second event on each and synchronizes; its
// time is the slowest rank's event time. The first timed call's results are copied back and
// checked; inputs a call overwrites are restored between iterations, outside the timing.
#include "bench_cuda.hpp"

#include <weft/transport/cuda.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace weft_bench {

namespace {

template <class T, class Op>
measurement measure_on_gpus(weft::cuda::communicators& gpus, std::vector<rank_events>& events,
                            const std::string& collective, std::size_t count, bool in_place,
                            const settings& options, Op op) {
  const int p = gpus.size();
  std::vector<workload<T, Op>> hosts;
  hosts.reserve(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r)
    hosts.emplace_back(collective, count, in_place, p, r, options.root, op);
  std::vector<device_workload<T, Op>> works;
  works.reserve(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r)
    works.emplace_back(hosts[static_cast<std::size_t>(r)], gpus.device(r));
  const bool restore = hosts.front().overwrites_input();
  auto once = [&] {
    for (int r = 0; r < p; ++r) call_weft(gpus[r], works[static_cast<std::size_t>(r)]);
  };
  try {
    for (int i = 0; i < options.warmup; ++i) {
      once();
      if (restore) {
        gpus.synchronize(60s);
        for (auto& w : works) w.load();
      }
    }
    measurement result;
    std::vector<double> times;
    for (int i = 0; i < options.iterations; ++i) {
      gpus.synchronize(60s);
      for (int r = 0; r < p; ++r)
        weft::cuda::check(
            cudaEventRecord(events[static_cast<std::size_t>(r)].start, gpus.stream(r)),
            "cudaEventRecord");
      once();
      for (int r = 0; r < p; ++r)
        weft::cuda::check(cudaEventRecord(events[static_cast<std::size_t>(r)].stop, gpus.stream(r)),
                          "cudaEventRecord");
      gpus.synchronize(60s);
      double slowest = 0;
      for (const auto& e : events) {
        float ms = 0;
        weft::cuda::check(cudaEventElapsedTime(&ms, e.start, e.stop), "cudaEventElapsedTime");
        slowest = std::max(slowest, static_cast<double>(ms) / 1e3);
      }
      times.push_back(slowest);
      if (i == 0 && options.check) {
        for (auto& w : works) result.wrong += w.wrong();
      }
      if (restore) {
        for (auto& w : works) w.load();
      }
    }
    std::sort(times.begin(), times.end());
    result.seconds = times[times.size() / 2];
    return result;
  } catch (const weft::error& failure) {
    skip_or_rethrow(failure, options, collective);
  }
}

}  // namespace

// Runs the table; returns the exit status (0 all right, 1 a wrong result, 77 no GPU here).
int run_cuda(const settings& options) {
  // Ranks sharing a GPU need hardware queues of their own (weft::cuda::check_sharing).
  weft::cuda::request_hardware_queues();
  const int visible = weft::cuda::device_count();
  if (visible == 0) {
    std::fprintf(stderr, "%s: skipped: no CUDA device: --transport cuda needs a GPU (%s)\n",
                 program_name, weft::cuda::why_no_device().c_str());
    return 77;
  }
  const int ranks = options.ranks ? options.ranks : 4;
  std::vector<int> devices;
  for (int r = 0; r < ranks; ++r) devices.push_back(r % visible);
  weft::cuda::communicators gpus(devices);
  std::vector<rank_events> events(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    weft::cuda::device_scope on(gpus.device(r));
    weft::cuda::check(cudaEventCreate(&events[static_cast<std::size_t>(r)].start),
                      "cudaEventCreate");
    weft::cuda::check(cudaEventCreate(&events[static_cast<std::size_t>(r)].stop),
                      "cudaEventCreate");
  }
  cudaDeviceProp props{};
  weft::cuda::check(cudaGetDeviceProperties(&props, 0), "cudaGetDeviceProperties");
  const std::string where = "GPUs of one process: " + std::to_string(ranks) + " ranks on " +
                            std::to_string(visible) + " x " + props.name + ", CUDA events";
  std::printf("# weft-bench: transport cuda (%s), %d ranks\n", where.c_str(), ranks);
  std::printf(
      "# type %s, op %s, root %d, algorithm %s, iterations %d (median), warm-up %d, check %d\n",
      options.type.c_str(), options.op.c_str(), options.root, options.algorithm.c_str(),
      options.iterations, options.warmup, options.check ? 1 : 0);
  std::fflush(stdout);
  summary totals;
  with_type_and_op(options, [&]<class T, class Op>(std::type_identity<T>, Op op) {
    sweep(
        options, sizeof(T), ranks, 0, collectives_of(options),
        [&](const std::string& collective, std::size_t count, bool in_place, const settings& how) {
          return measure_on_gpus<T>(gpus, events, collective, count, in_place, how, op);
        },
        [](const std::string& collective, bool in_place) {
          return in_place ? has_in_place(collective) : has_out_of_place(collective);
        },
        // one thread holds every rank: its counts are already the sum over the ranks
        [](std::array<std::size_t, 2> counts) { return counts; }, totals);
  });
  for (auto& e : events) {
    cudaEventDestroy(e.start);
    cudaEventDestroy(e.stop);
  }
  if (!options.json.empty()) write_json(options, "weft", "cuda", where, ranks, totals);
  return print_footer(totals);
}

}  // namespace weft_bench
