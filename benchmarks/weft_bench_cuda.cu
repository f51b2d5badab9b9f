// weft-bench --transport cuda: the table over weft::cuda::communicators, ranks as GPUs of this
// process (rank i on GPU i % visible devices; --ranks N, 4 by default), driven from one thread.
// weft-bench --transport cuda-ipc (under weft-run, mpirun, ...): the table over
// weft::cuda::ipc_transport, a process per rank, its buffers from the rank's pool.
//
// Each rank's inputs are the workload's known values (bench_workload.hpp), copied to device
// buffers; a timed iteration synchronizes every rank's stream, records an event on each,
// issues the call on every rank in turn, records a second event on each and synchronizes; its
// time is the slowest rank's event time. The first timed call's results are copied back and
// checked; inputs a call overwrites are restored between iterations, outside the timing.
#include "bench.hpp"

#if WEFT_BENCH_CUDA_IPC
#include <weft/transport/cuda/ipc.hpp>
#endif
#include <weft/transport/cuda.hpp>

#include <cuda_runtime.h>

#include <chrono>
#include <functional>
#include <cstdio>
#include <string>
#include <vector>

namespace weft_bench {

namespace {

using namespace std::chrono_literals;

template <class T>
class device_array {
 public:
  // cudaMalloc'd, or from `pool` (a memory space whose allocations peers read in place).
  template <class Pool = weft::host_memory>
  device_array(int device, std::size_t count, Pool* pool = nullptr) : count_(count) {
    weft::cuda::device_scope on(device);
    const std::size_t bytes = (count == 0 ? 1 : count) * sizeof(T);
    if (pool != nullptr) {
      data_ = reinterpret_cast<T*>(pool->allocate(bytes));
      free_ = [pool, bytes](T* p) { pool->deallocate(reinterpret_cast<std::byte*>(p), bytes); };
      return;
    }
    weft::cuda::check(cudaMalloc(&data_, bytes), "cudaMalloc");
  }
  device_array(const device_array&) = delete;
  device_array(device_array&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(other.count_), free_(std::move(other.free_)) {}
  ~device_array() {
    if (data_ == nullptr) return;
    if (free_) free_(data_);
    else static_cast<void>(cudaFree(data_));
  }
  std::span<T> span() { return {data_, count_}; }
  template <class Vector>
  void put(const Vector& host) {
    if (count_ == 0) return;
    weft::cuda::check(cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
    // weft's streams are non-blocking: the copy (from pageable memory) must have landed first.
    weft::cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  template <class Vector>
  void get(Vector& host) const {
    if (count_ > 0) weft::cuda::check(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
  }

 private:
  T* data_ = nullptr;
  std::size_t count_;
  std::function<void(T*)> free_;  // set for pool memory
};

// One rank's call on device memory: the workload's fields call_weft reads, over device buffers.
template <class T, class Op>
struct device_workload {
  using element_type = T;
  using op_type = Op;
  workload<T, Op>* host;
  device_array<T> in_buffer, out_buffer;
  std::string collective;
  bool in_place;
  int root;
  Op op;
  std::span<T> in, out;
  template <class Pool = weft::host_memory>
  device_workload(workload<T, Op>& work, int device, Pool* pool = nullptr)
      : host(&work), in_buffer(device, work.in.size(), pool), out_buffer(device, work.out.size(), pool),
        collective(work.collective), in_place(work.in_place), root(work.root), op(work.op),
        in(in_buffer.span()), out(out_buffer.span()) {
    load();
  }
  void load() {
    in_buffer.put(host->in);
    out_buffer.put(host->out);
  }
  std::span<const T> own_block() const {
    return std::span<const T>(out).subspan(host->block * static_cast<std::size_t>(host->r), host->block);
  }
  std::size_t wrong() {
    in_buffer.get(host->in);
    out_buffer.get(host->out);
    return host->wrong();
  }
};

struct rank_events {
  cudaEvent_t start = nullptr, stop = nullptr;
};

template <class T, class Op>
measurement measure_on_gpus(weft::cuda::communicators& gpus, std::vector<rank_events>& events,
                            const std::string& collective, std::size_t count, bool in_place, const settings& options,
                            Op op) {
  const int p = gpus.size();
  std::vector<workload<T, Op>> hosts;
  hosts.reserve(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) hosts.emplace_back(collective, count, in_place, p, r, options.root, op);
  std::vector<device_workload<T, Op>> works;
  works.reserve(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) works.emplace_back(hosts[static_cast<std::size_t>(r)], gpus.device(r));
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
      for (int r = 0; r < p; ++r) weft::cuda::check(cudaEventRecord(events[static_cast<std::size_t>(r)].start, gpus.stream(r)), "cudaEventRecord");
      once();
      for (int r = 0; r < p; ++r) weft::cuda::check(cudaEventRecord(events[static_cast<std::size_t>(r)].stop, gpus.stream(r)), "cudaEventRecord");
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
    if (failure.code() != weft::errc::invalid_argument || options.collective != "all" ||
        options.algorithm == "automatic") {
      throw;
    }
    throw skipped{options.algorithm + " does not implement " + collective};
  }
}

}  // namespace

// Runs the table; returns the exit status (0 all right, 1 a wrong result, 77 no GPU here).
int run_cuda(const settings& options) {
  // Ranks sharing a GPU need hardware queues of their own (weft::cuda::check_sharing).
  weft::cuda::request_hardware_queues();
  const int visible = weft::cuda::device_count();
  if (visible == 0) {
    std::fprintf(stderr, "%s: skipped: no CUDA device: --transport cuda needs a GPU (%s)\n", program_name,
                 weft::cuda::why_no_device().c_str());
    return 77;
  }
  const int ranks = options.ranks ? options.ranks : 4;
  std::vector<int> devices;
  for (int r = 0; r < ranks; ++r) devices.push_back(r % visible);
  weft::cuda::communicators gpus(devices);
  std::vector<rank_events> events(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    weft::cuda::device_scope on(gpus.device(r));
    weft::cuda::check(cudaEventCreate(&events[static_cast<std::size_t>(r)].start), "cudaEventCreate");
    weft::cuda::check(cudaEventCreate(&events[static_cast<std::size_t>(r)].stop), "cudaEventCreate");
  }
  cudaDeviceProp props{};
  weft::cuda::check(cudaGetDeviceProperties(&props, 0), "cudaGetDeviceProperties");
  const std::string where = "GPUs of one process: " + std::to_string(ranks) + " ranks on " + std::to_string(visible) +
                            " x " + props.name + ", CUDA events";
  std::printf("# weft-bench: transport cuda (%s), %d ranks\n", where.c_str(), ranks);
  std::printf("# type %s, op %s, root %d, algorithm %s, iterations %d (median), warm-up %d, check %d\n",
              options.type.c_str(), options.op.c_str(), options.root, options.algorithm.c_str(), options.iterations,
              options.warmup, options.check ? 1 : 0);
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

#if WEFT_BENCH_CUDA_IPC
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
    job_->meeting()->set(key + std::to_string(comm.rank()), std::to_string(mine[0]) + " " + std::to_string(mine[1]));
    std::vector<std::array<std::size_t, 2>> every;
    for (int r = 0; r < comm.size(); ++r) {
      const auto value = job_->meeting()->get(key + std::to_string(r), weft::deadline_clock::now() + 120s);
      if (!value) throw weft::error(weft::errc::timeout, "weft-bench: rank " + std::to_string(r) + " did not report");
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
measurement measure_ipc(weft::cuda::session& job, rank_events& events, store_sum& sum, const std::string& collective,
                        std::size_t count, bool in_place, const settings& options, Op op) {
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
      weft::cuda::check(cudaEventElapsedTime(&ms, events.start, events.stop), "cudaEventElapsedTime");
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
    if (failure.code() != weft::errc::invalid_argument || options.collective != "all" ||
        options.algorithm == "automatic") {
      throw;
    }
    throw skipped{options.algorithm + " does not implement " + collective};
  }
}

}  // namespace

// Runs the table with this process as one rank; returns the exit status (0 all right, 1 a
// wrong result, 77 no GPU here).
int run_cuda_ipc(const settings& options) {
  if (weft::cuda::device_count() == 0) {
    std::fprintf(stderr, "%s: skipped: no CUDA device: --transport cuda-ipc needs a GPU (%s)\n", program_name,
                 weft::cuda::why_no_device().c_str());
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
  weft::cuda::check(cudaGetDeviceProperties(&props, job.endpoint().device()), "cudaGetDeviceProperties");
  const std::string where = "processes started by " + job.launch().launcher + " on " + props.name + ", " +
                            job.endpoint().describe() + ", buffers from the pool, CUDA events";
  if (comm.rank() == 0) {
    std::printf("# weft-bench: transport cuda-ipc (%s), %d ranks\n", where.c_str(), p);
    std::printf("# type %s, op %s, root %d, algorithm %s, iterations %d (median), warm-up %d, check %d\n",
                options.type.c_str(), options.op.c_str(), options.root, options.algorithm.c_str(), options.iterations,
                options.warmup, options.check ? 1 : 0);
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
#endif

}  // namespace weft_bench
