// One rank of weft::cuda::ipc_transport's GPU checks (tests/gpu/ipc.py starts them with
// weft-run): ranks as processes sharing the visible GPUs.
//
//   ipc_ranks refusals    a bad WEFT_CUDA_DEVICE, and (without a GPU) the error a rank gives
//   ipc_ranks probe       exits 77 ("skipped") when this host has no GPU, 0 otherwise
//   ipc_ranks slice       every type and reduction on allreduce (fused and message algorithms),
//                         then collectives x algorithms (fused included) on float, int32 and
//                         double from 0 to 1M elements (8 MiB messages staged in pieces), on
//                         device buffers from the pool (read in place) and from cudaMalloc
//                         (staged); every result compared bitwise with a host reference
//   ipc_ranks kill V      rank V SIGKILLs itself mid-allreduce; every other rank's synchronize
//                         must throw peer_lost naming it, within a second
//   ipc_ranks bench       allreduce of floats from the pool: busbw at 256 MiB, time at 8 B
#include "checks.hpp"
#include "values.hpp"

#include "weft/transport/cuda.hpp"
#include "weft/transport/cuda/ipc.hpp"
#include "weft/weft.hpp"

#include <cuda_runtime.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

using comm_type = weft::communicator<weft::cuda::ipc_transport>;
using weft_gpu_test::value_for;

int failures = 0;

// Device memory of `count` T: from the rank's pool, or from cudaMalloc.
template <class T>
struct buffer {
  buffer(comm_type& c, std::size_t n, bool pooled) : comm(&c), count(n), in_pool(pooled) {
    if (pooled) {
      data = weft::cuda::allocate<T>(c, n == 0 ? 1 : n);
    } else {
      weft::cuda::check(cudaMalloc(&data, (n == 0 ? 1 : n) * sizeof(T)), "cudaMalloc");
    }
  }
  ~buffer() {
    if (in_pool)
      weft::cuda::deallocate(*comm, data, count == 0 ? 1 : count);
    else
      cudaFree(data);
  }
  buffer(const buffer&) = delete;
  std::span<T> span() { return {data, count}; }
  void upload(const std::vector<T>& host) {
    weft::cuda::check(cudaMemcpy(data, host.data(), count * sizeof(T), cudaMemcpyHostToDevice),
                      "upload");
  }
  std::vector<T> download() {
    std::vector<T> host(count);
    weft::cuda::check(cudaMemcpy(host.data(), data, count * sizeof(T), cudaMemcpyDeviceToHost),
                      "download");
    return host;
  }
  comm_type* comm;
  std::size_t count;
  bool in_pool;
  T* data = nullptr;
};

template <class T>
void expect_equal(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!weft_gpu_test::same_bits(got[i], want[i])) {
      ++failures;
      std::cout << "FAIL " << what << " " << weft_gpu_test::type_name<T>() << ": element " << i
                << " is " << static_cast<double>(got[i]) << ", not " << static_cast<double>(want[i])
                << std::endl;
      return;
    }
  }
}

template <class T, class Op, class Algorithm>
void allreduce_case(comm_type& comm, std::size_t count, bool pooled, Op op, bool factors,
                    const char* name) {
  const int p = comm.size();
  buffer<T> data(comm, count, pooled);
  std::vector<T> mine(count), want(count);
  for (std::size_t i = 0; i < count; ++i) {
    mine[i] = value_for<T>(comm.rank(), i, factors);
    T folded = value_for<T>(0, i, factors);
    for (int r = 1; r < p; ++r) folded = static_cast<T>(op(folded, value_for<T>(r, i, factors)));
    want[i] = weft::finalize(op, folded, p);
  }
  data.upload(mine);
  weft::allreduce(comm, data.span(), op, Algorithm{});
  weft::cuda::synchronize(comm, 60s);
  expect_equal(data.download(), want,
               std::string("allreduce ") + std::string(Algorithm::name) + " " + name + " count " +
                   std::to_string(count) + (pooled ? " (pool)" : " (staged)"));
}

template <class T, class Gather = weft::ring>
void movement_cases(comm_type& comm, std::size_t count, bool pooled) {
  const int p = comm.size();
  const auto up = static_cast<std::size_t>(p);
  const std::string where = " count " + std::to_string(count) + (pooled ? " (pool)" : " (staged)");
  {  // allgather, ring
    buffer<T> mine(comm, count, pooled), all(comm, count * up, pooled);
    std::vector<T> host(count), want(count * up);
    for (std::size_t i = 0; i < count; ++i) host[i] = value_for<T>(comm.rank(), i, false);
    for (int r = 0; r < p; ++r)
      for (std::size_t i = 0; i < count; ++i)
        want[static_cast<std::size_t>(r) * count + i] = value_for<T>(r, i, false);
    mine.upload(host);
    weft::allgather(comm, std::span<const T>(mine.span()), all.span(), Gather{});
    weft::cuda::synchronize(comm, 60s);
    expect_equal(all.download(), want, "allgather " + std::string(Gather::name) + where);
  }
  {  // reduce_scatter, ring
    buffer<T> all(comm, count * up, pooled), mine(comm, count, pooled);
    std::vector<T> host(count * up), want(count);
    for (std::size_t i = 0; i < count * up; ++i) host[i] = value_for<T>(comm.rank(), i, false);
    for (std::size_t i = 0; i < count; ++i) {
      T sum = 0;
      for (int r = 0; r < p; ++r)
        sum = sum + value_for<T>(r, static_cast<std::size_t>(comm.rank()) * count + i, false);
      want[i] = sum;
    }
    all.upload(host);
    weft::reduce_scatter(comm, std::span<const T>(all.span()), mine.span(), weft::sum{}, Gather{});
    weft::cuda::synchronize(comm, 60s);
    expect_equal(mine.download(), want, "reduce_scatter " + std::string(Gather::name) + where);
  }
  {  // broadcast from the last rank, binomial tree
    buffer<T> data(comm, count, pooled);
    std::vector<T> host(count), want(count);
    for (std::size_t i = 0; i < count; ++i) {
      host[i] = value_for<T>(comm.rank(), i, false);
      want[i] = value_for<T>(p - 1, i, false);
    }
    data.upload(host);
    weft::broadcast(comm, data.span(), p - 1, weft::binomial_tree{});
    weft::cuda::synchronize(comm, 60s);
    expect_equal(data.download(), want, "broadcast binomial_tree" + where);
  }
  {  // alltoall, pairwise
    buffer<T> in(comm, count * up, pooled), out(comm, count * up, pooled);
    std::vector<T> host(count * up), want(count * up);
    for (int to = 0; to < p; ++to)
      for (std::size_t i = 0; i < count; ++i) {
        host[static_cast<std::size_t>(to) * count + i] =
            value_for<T>(comm.rank() * p + to, i, false);
        want[static_cast<std::size_t>(to) * count + i] =
            value_for<T>(to * p + comm.rank(), i, false);
      }
    in.upload(host);
    weft::alltoall(comm, std::span<const T>(in.span()), out.span(), weft::pairwise{});
    weft::cuda::synchronize(comm, 60s);
    expect_equal(out.download(), want, "alltoall pairwise" + where);
  }
}

template <class T>
void type_cases(comm_type& comm, std::size_t count, bool pooled) {
  allreduce_case<T, weft::sum, weft::ring>(comm, count, pooled, weft::sum{}, false, "sum");
  allreduce_case<T, weft::prod, weft::recursive_halving>(comm, count, pooled, weft::prod{}, true,
                                                         "prod");
  allreduce_case<T, weft::min, weft::double_binary_tree>(comm, count, pooled, weft::min{}, false,
                                                         "min");
  allreduce_case<T, weft::max, weft::recursive_doubling>(comm, count, pooled, weft::max{}, false,
                                                         "max");
  allreduce_case<T, weft::sum, weft::direct>(comm, count, pooled, weft::sum{}, false, "sum");
  allreduce_case<T, weft::sum, weft::automatic>(comm, count, pooled, weft::sum{}, false, "sum");
  allreduce_case<T, weft::sum, weft::fused>(comm, count, pooled, weft::sum{}, false, "sum");
  allreduce_case<T, weft::prod, weft::fused>(comm, count, pooled, weft::prod{}, true, "prod");
  movement_cases<T>(comm, count, pooled);
  movement_cases<T, weft::fused>(comm, count, pooled);
}

// Every reduction of every type, on allreduce (fused and message algorithms), pool and staged.
template <class T>
void every_op(comm_type& comm, bool pooled) {
  allreduce_case<T, weft::sum, weft::fused>(comm, 1003, pooled, weft::sum{}, false, "sum");
  allreduce_case<T, weft::prod, weft::ring>(comm, 1003, pooled, weft::prod{}, true, "prod");
  allreduce_case<T, weft::min, weft::fused>(comm, 1003, pooled, weft::min{}, false, "min");
  allreduce_case<T, weft::max, weft::recursive_halving>(comm, 1003, pooled, weft::max{}, false,
                                                        "max");
  if constexpr (std::is_integral_v<T>) {
    allreduce_case<T, weft::band, weft::ring>(comm, 1003, pooled, weft::band{}, false, "band");
    allreduce_case<T, weft::bor, weft::fused>(comm, 1003, pooled, weft::bor{}, false, "bor");
    allreduce_case<T, weft::bxor, weft::double_binary_tree>(comm, 1003, pooled, weft::bxor{}, false,
                                                            "bxor");
  } else {
    allreduce_case<T, weft::avg, weft::ring>(comm, 1003, pooled, weft::avg{}, false, "avg");
    allreduce_case<T, weft::avg, weft::fused>(comm, 1003, pooled, weft::avg{}, false, "avg");
  }
}

int slice(weft::cuda::session& job) {
  auto& comm = job.comm();
  for (const bool pooled : {true, false}) {
    every_op<std::int8_t>(comm, pooled);
    every_op<std::uint8_t>(comm, pooled);
    every_op<std::int16_t>(comm, pooled);
    every_op<std::uint16_t>(comm, pooled);
    every_op<std::int32_t>(comm, pooled);
    every_op<std::uint32_t>(comm, pooled);
    every_op<std::int64_t>(comm, pooled);
    every_op<std::uint64_t>(comm, pooled);
    every_op<float>(comm, pooled);
    every_op<double>(comm, pooled);
    every_op<weft::half>(comm, pooled);
    every_op<weft::bfloat16>(comm, pooled);
  }
  for (const std::size_t count :
       {std::size_t{0}, std::size_t{1}, std::size_t{1003}, std::size_t{1} << 20}) {
    for (const bool pooled : {true, false}) {
      type_cases<float>(comm, count, pooled);
      type_cases<std::int32_t>(comm, count, pooled);
      type_cases<double>(comm, count, pooled);
    }
  }
  if (failures != 0) {
    std::cout << "slice failed: " << failures << " case(s)" << std::endl;
    return 1;
  }
  std::cout << "slice ok on " << comm.size() << " ranks over " << job.endpoint().describe()
            << std::endl;
  return 0;
}

int killed(weft::cuda::session& job, int victim) {
  auto& comm = job.comm();
  buffer<float> data(comm, std::size_t{1} << 20, true);
  const auto start = std::chrono::steady_clock::now();
  if (comm.rank() == victim) {
    std::thread([] {
      std::this_thread::sleep_for(500ms);
      std::raise(SIGKILL);
    }).detach();
  }
  try {
    while (true) {
      weft::allreduce(comm, data.span(), weft::sum{}, weft::ring{});
      weft::cuda::synchronize(comm, 30s);
    }
  } catch (const weft::error& failure) {
    const double after =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - 0.5;
    const bool named =
        std::string(failure.what()).find("rank " + std::to_string(victim)) != std::string::npos;
    std::cout << (failure.code() == weft::errc::peer_lost && named && after < 1.0 ? "lost ok"
                                                                                  : "lost wrong")
              << " (" << after * 1000 << " ms after the kill): " << failure.what() << std::endl;
    return failure.code() == weft::errc::peer_lost && named && after < 1.0 ? 0 : 1;
  }
}

int bench(weft::cuda::session& job) {
  auto& comm = job.comm();
  const int p = comm.size();
  for (const std::size_t bytes : {std::size_t{8}, std::size_t{256} << 20}) {
    const std::size_t count = bytes / sizeof(float);
    buffer<float> data(comm, count, true);
    const int iterations = bytes < (1 << 20) ? 1000 : 20;
    for (int warm = 0; warm < 3; ++warm) weft::allreduce(comm, data.span(), weft::sum{});
    weft::cuda::synchronize(comm, 60s);
    weft::barrier(comm);
    weft::cuda::synchronize(comm, 60s);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) weft::allreduce(comm, data.span(), weft::sum{});
    weft::cuda::synchronize(comm, 120s);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
        iterations;
    const double busbw = static_cast<double>(bytes) / seconds * 2.0 * (p - 1) / p / 1e9;
    if (comm.rank() == 0) {
      std::printf("ipc allreduce %d processes %zu B: %.2f us, busbw %.2f GB/s\n", p, bytes,
                  seconds * 1e6, busbw);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "slice";
  if (scenario == "refusals") {  // runs anywhere: what a rank says before it touches a GPU
    int bad = 0;
    setenv("WEFT_CUDA_DEVICE", "first", 1);
    try {
      static_cast<void>(weft::cuda::ipc_config::from_environment());
      ++bad;
      std::cout << "FAIL WEFT_CUDA_DEVICE=first was accepted" << std::endl;
    } catch (const weft::error& e) {
      const bool ok = e.code() == weft::errc::invalid_argument &&
                      std::string(e.what()).find("WEFT_CUDA_DEVICE") != std::string::npos;
      bad += !ok;
      std::cout << (ok ? "ok   " : "FAIL ") << "WEFT_CUDA_DEVICE=first refused: " << e.what()
                << std::endl;
    }
    unsetenv("WEFT_CUDA_DEVICE");
    if (!weft::cuda::why_no_device().empty()) {
      try {
        weft::cuda::ipc_transport alone(0, 1, nullptr, weft::cuda::ipc_config::from_environment());
        ++bad;
        std::cout << "FAIL a rank was made without a GPU" << std::endl;
      } catch (const weft::error& e) {
        const bool ok = e.code() == weft::errc::transport &&
                        std::string(e.what()).find("no CUDA device") != std::string::npos;
        bad += !ok;
        std::cout << (ok ? "ok   " : "FAIL ") << "no GPU: " << e.what() << std::endl;
      }
    }
    return bad == 0 ? 0 : 1;
  }
  if (scenario == "probe") {
    const std::string why = weft::cuda::why_no_device();
    if (!why.empty()) std::cout << "skipped: no CUDA device (" << why << ")" << std::endl;
    return why.empty() ? 0 : 77;
  }
  try {
    weft::cuda::request_hardware_queues();
    auto job = weft::cuda::session::from_environment();
    if (scenario == "slice") return slice(job);
    if (scenario == "kill" && argc > 2) return killed(job, std::stoi(argv[2]));
    if (scenario == "bench") return bench(job);
    std::cerr << "usage: " << argv[0] << " probe | slice | kill RANK | bench" << std::endl;
    return 2;
  } catch (const weft::error& failure) {
    std::cout << "error: " << failure.what() << std::endl;
    return 3;
  }
}
