// weft::cuda::communicators on a GPU: one host thread issues each collective on every rank in
// turn (NCCL's single-process loop), then synchronizes; every collective x algorithm for 1-5 ranks
// sharing the visible GPUs, every element type and reduction on allreduce, results bitwise equal on
// every rank and to a host reference; a rank that never issues its call (synchronize's timeout
// names it) and abort. Skipped (exit 77) without a GPU.
#include "checks.hpp"
#include "values.hpp"

#include "weft/transport/cuda.hpp"
#include "weft/weft.hpp"

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

using namespace weft_gpu_test;
using namespace std::chrono_literals;

namespace {

template <class T>
struct device_vector {
  device_vector(int device, std::size_t n) : count(n) {
    weft::cuda::device_scope on(device);
    weft::cuda::check(cudaMalloc(&data, (n == 0 ? 1 : n) * sizeof(T)), "cudaMalloc");
  }
  ~device_vector() { cudaFree(data); }
  device_vector(const device_vector&) = delete;
  device_vector(device_vector&& other) noexcept : data(other.data), count(other.count) {
    other.data = nullptr;
  }
  void put(const std::vector<T>& host) {
    weft::cuda::check(cudaMemcpy(data, host.data(), count * sizeof(T), cudaMemcpyHostToDevice),
                      "to device");
    // The communicators' own streams are non-blocking: they do not wait for the legacy stream, and
    // a copy from pageable memory may return before its data has landed.
    weft::cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  std::vector<T> get() const {
    std::vector<T> host(count);
    weft::cuda::check(cudaMemcpy(host.data(), data, count * sizeof(T), cudaMemcpyDeviceToHost),
                      "to host");
    return host;
  }
  std::span<T> span() { return {data, count}; }
  std::span<const T> const_span() const { return {data, count}; }
  T* data = nullptr;
  std::size_t count;
};

std::vector<int> devices_for(int ranks) {
  const int visible = weft::cuda::device_count();
  std::vector<int> devices;
  for (int r = 0; r < ranks; ++r) devices.push_back(r % visible);
  return devices;
}

template <class T>
bool same(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!same_bits(a[i], b[i])) return false;
  }
  return true;
}

template <class T, class Op, class Algorithm>
void allreduce_case(int p, std::size_t count, Op op, const char* op_name, bool factors) {
  weft::cuda::communicators gpus(devices_for(p));
  std::vector<device_vector<T>> send, recv;
  for (int r = 0; r < p; ++r) {
    send.emplace_back(gpus.device(r), count);
    recv.emplace_back(gpus.device(r), count);
    std::vector<T> mine(count);
    for (std::size_t i = 0; i < count; ++i) mine[i] = value_for<T>(r, i, factors);
    send.back().put(mine);
  }
  for (int r = 0; r < p; ++r) {
    weft::allreduce(gpus[r], send[static_cast<std::size_t>(r)].const_span(),
                    recv[static_cast<std::size_t>(r)].span(), op, Algorithm{});
  }
  gpus.synchronize(20s);
  std::vector<T> want(count);
  for (std::size_t i = 0; i < count; ++i) {
    T v = value_for<T>(0, i, factors);
    for (int q = 1; q < p; ++q) v = static_cast<T>(op(v, value_for<T>(q, i, factors)));
    want[i] = weft::finalize(op, v, p);
  }
  const std::string what = "allreduce " + std::string(Algorithm::name) + " " + type_name<T>() +
                           " " + op_name + " p=" + std::to_string(p) +
                           " count=" + std::to_string(count);
  for (int r = 0; r < p; ++r)
    GPU_CHECK(same(recv[static_cast<std::size_t>(r)].get(), want),
              what + " rank " + std::to_string(r));
}

// fused in place, over several shares (a share is at least 1 MiB), issued from one thread.
void fused_in_place(int p, std::size_t count) {
  weft::cuda::communicators gpus(devices_for(p));
  std::vector<device_vector<float>> data;
  for (int r = 0; r < p; ++r) {
    data.emplace_back(gpus.device(r), count);
    std::vector<float> mine(count);
    for (std::size_t i = 0; i < count; ++i) mine[i] = value_for<float>(r, i, false);
    data.back().put(mine);
  }
  std::vector<weft::report> reports;
  for (int r = 0; r < p; ++r)
    reports.push_back(weft::allreduce(gpus[r], data[static_cast<std::size_t>(r)].span(),
                                      weft::sum{}, weft::fused{}));
  gpus.synchronize(20s);
  std::vector<float> want(count);
  for (std::size_t i = 0; i < count; ++i) {
    float v = value_for<float>(0, i, false);
    for (int q = 1; q < p; ++q) v += value_for<float>(q, i, false);
    want[i] = v;
  }
  const std::string what =
      "fused in place p=" + std::to_string(p) + " count=" + std::to_string(count);
  for (int r = 0; r < p; ++r) {
    GPU_CHECK(reports[static_cast<std::size_t>(r)].algorithm == "fused",
              what + ": the report names it");
    GPU_CHECK(same(data[static_cast<std::size_t>(r)].get(), want),
              what + " rank " + std::to_string(r));
  }
}

template <class T>
void every_op(int p) {
  allreduce_case<T, weft::sum, weft::fused>(p, 1003, weft::sum{}, "sum", false);
  allreduce_case<T, weft::prod, weft::fused>(p, 1003, weft::prod{}, "prod", true);
  allreduce_case<T, weft::min, weft::fused>(p, 1003, weft::min{}, "min", false);
  allreduce_case<T, weft::max, weft::fused>(p, 1003, weft::max{}, "max", false);
  allreduce_case<T, weft::sum, weft::ring>(p, 1003, weft::sum{}, "sum", false);
  allreduce_case<T, weft::prod, weft::recursive_halving>(p, 1003, weft::prod{}, "prod", true);
  allreduce_case<T, weft::min, weft::double_binary_tree>(p, 1003, weft::min{}, "min", false);
  allreduce_case<T, weft::max, weft::direct>(p, 1003, weft::max{}, "max", false);
  if constexpr (std::is_integral_v<T>) {
    allreduce_case<T, weft::band, weft::ring>(p, 1003, weft::band{}, "band", false);
    allreduce_case<T, weft::bor, weft::recursive_doubling>(p, 1003, weft::bor{}, "bor", false);
    allreduce_case<T, weft::bxor, weft::automatic>(p, 1003, weft::bxor{}, "bxor", false);
    allreduce_case<T, weft::bxor, weft::fused>(p, 1003, weft::bxor{}, "bxor", false);
  } else {
    allreduce_case<T, weft::avg, weft::ring>(p, 1003, weft::avg{}, "avg", false);
    allreduce_case<T, weft::avg, weft::fused>(p, 1003, weft::avg{}, "avg", false);
  }
}

// The other collectives, one algorithm list each, int32 and float: issued on every rank from one
// thread, checked against what each rank must hold.
template <class T>
void other_collectives(int p, std::size_t count) {
  weft::cuda::communicators gpus(devices_for(p));
  const auto P = static_cast<std::size_t>(p);
  auto mine_of = [&](int r) {
    std::vector<T> v(count);
    for (std::size_t i = 0; i < count; ++i) v[i] = value_for<T>(r, i, false);
    return v;
  };
  auto label = [&](const char* what, std::string_view algorithm) {
    return std::string(what) + " " + std::string(algorithm) + " " + type_name<T>() +
           " p=" + std::to_string(p) + " count=" + std::to_string(count);
  };
  // allgather: rank r's block at r
  auto run_allgather = [&](auto algorithm) {
    using A = decltype(algorithm);
    std::vector<device_vector<T>> in, out;
    for (int r = 0; r < p; ++r) {
      in.emplace_back(gpus.device(r), count);
      out.emplace_back(gpus.device(r), count * P);
      in.back().put(mine_of(r));
    }
    for (int r = 0; r < p; ++r)
      weft::allgather(gpus[r], in[static_cast<std::size_t>(r)].const_span(),
                      out[static_cast<std::size_t>(r)].span(), A{});
    gpus.synchronize(20s);
    std::vector<T> want;
    for (int r = 0; r < p; ++r) {
      auto m = mine_of(r);
      want.insert(want.end(), m.begin(), m.end());
    }
    for (int r = 0; r < p; ++r)
      GPU_CHECK(same(out[static_cast<std::size_t>(r)].get(), want), label("allgather", A::name));
  };
  run_allgather(weft::ring{});
  run_allgather(weft::recursive_doubling{});
  run_allgather(weft::bruck{});
  run_allgather(weft::direct{});
  run_allgather(weft::fused{});

  // broadcast from the last rank
  auto run_broadcast = [&](auto algorithm) {
    using A = decltype(algorithm);
    std::vector<device_vector<T>> data;
    for (int r = 0; r < p; ++r) {
      data.emplace_back(gpus.device(r), count);
      data.back().put(mine_of(r));
    }
    for (int r = 0; r < p; ++r)
      weft::broadcast(gpus[r], data[static_cast<std::size_t>(r)].span(), p - 1, A{});
    gpus.synchronize(20s);
    for (int r = 0; r < p; ++r)
      GPU_CHECK(same(data[static_cast<std::size_t>(r)].get(), mine_of(p - 1)),
                label("broadcast", A::name));
  };
  run_broadcast(weft::binomial_tree{});
  run_broadcast(weft::ring{});
  run_broadcast(weft::direct{});

  // reduce_scatter (sum): rank r gets block r of the sum
  auto run_reduce_scatter = [&](auto algorithm) {
    using A = decltype(algorithm);
    std::vector<device_vector<T>> all, block;
    auto full_of = [&](int r) {
      std::vector<T> v(count * P);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = value_for<T>(r, i, false);
      return v;
    };
    for (int r = 0; r < p; ++r) {
      all.emplace_back(gpus.device(r), count * P);
      block.emplace_back(gpus.device(r), count);
      all.back().put(full_of(r));
    }
    for (int r = 0; r < p; ++r) {
      weft::reduce_scatter(gpus[r], all[static_cast<std::size_t>(r)].const_span(),
                           block[static_cast<std::size_t>(r)].span(), weft::sum{}, A{});
    }
    gpus.synchronize(20s);
    for (int r = 0; r < p; ++r) {
      std::vector<T> want(count);
      for (std::size_t i = 0; i < count; ++i) {
        T v = value_for<T>(0, static_cast<std::size_t>(r) * count + i, false);
        for (int q = 1; q < p; ++q)
          v = static_cast<T>(v + value_for<T>(q, static_cast<std::size_t>(r) * count + i, false));
        want[i] = v;
      }
      GPU_CHECK(same(block[static_cast<std::size_t>(r)].get(), want),
                label("reduce_scatter", A::name));
    }
  };
  run_reduce_scatter(weft::ring{});
  run_reduce_scatter(weft::recursive_halving{});
  run_reduce_scatter(weft::direct{});
  run_reduce_scatter(weft::fused{});

  // alltoall: rank r sends block j to rank j
  auto run_alltoall = [&](auto algorithm) {
    using A = decltype(algorithm);
    std::vector<device_vector<T>> in, out;
    auto blocks_of = [&](int r) {
      std::vector<T> v(count * P);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = value_for<T>(r, i, false);
      return v;
    };
    for (int r = 0; r < p; ++r) {
      in.emplace_back(gpus.device(r), count * P);
      out.emplace_back(gpus.device(r), count * P);
      in.back().put(blocks_of(r));
    }
    for (int r = 0; r < p; ++r)
      weft::alltoall(gpus[r], in[static_cast<std::size_t>(r)].const_span(),
                     out[static_cast<std::size_t>(r)].span(), A{});
    gpus.synchronize(20s);
    std::vector<std::vector<T>> sent;
    for (int q = 0; q < p; ++q) sent.push_back(blocks_of(q));
    for (int r = 0; r < p; ++r) {
      std::vector<T> want;
      for (int q = 0; q < p; ++q) {
        const auto& b = sent[static_cast<std::size_t>(q)];
        want.insert(
            want.end(),
            b.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * count),
            b.begin() + static_cast<std::ptrdiff_t>((static_cast<std::size_t>(r) + 1) * count));
      }
      GPU_CHECK(same(out[static_cast<std::size_t>(r)].get(), want), label("alltoall", A::name));
    }
  };
  run_alltoall(weft::pairwise{});
  run_alltoall(weft::bruck{});
  run_alltoall(weft::direct{});
}

// Rank `missing` of 3 never issues its allreduce: synchronize names what rank 0 waits for
// (`expected`); abort releases the streams.
template <class Algorithm>
void never_issued(int missing, const std::string& expected) {
  weft::cuda::communicators gpus(devices_for(3));
  std::vector<device_vector<float>> data;
  for (int r = 0; r < 3; ++r) data.emplace_back(gpus.device(r), 4096);
  for (int r = 0; r < 3; ++r) {
    if (r != missing)
      weft::allreduce(gpus[r], data[static_cast<std::size_t>(r)].span(), weft::sum{}, Algorithm{});
  }
  std::string said;
  try {
    weft::cuda::synchronize(gpus[0], 500ms);
  } catch (const weft::error& failure) {
    said = failure.what();
    GPU_CHECK(failure.code() == weft::errc::timeout, said);
  }
  std::printf("%s, never issued: %s\n", std::string(Algorithm::name).c_str(), said.c_str());
  GPU_CHECK(said.find(expected) != std::string::npos, said);
  const std::string reason = "rank " + std::to_string(missing) + " never came";
  gpus.abort(reason);
  for (int r = 0; r < 3; ++r) {
    std::string after;
    try {
      gpus.synchronize(r, 10s);
    } catch (const weft::error& failure) {
      after = failure.what();
    }
    GPU_CHECK(after.find(reason) != std::string::npos,
              "after abort, rank " + std::to_string(r) + ": " + after);
  }
}

// Runs one group of cases; an exception fails it and the run goes on with the next group, until
// three groups have thrown (a device that hangs every case would otherwise cost a timeout each).
int thrown = 0;
template <class F>
void group(const std::string& what, F&& cases) {
  if (thrown >= 3) return;
  std::printf("%s\n", what.c_str());
  std::fflush(stdout);
  try {
    cases();
  } catch (const std::exception& failure) {
    ++thrown;
    GPU_CHECK(false, what + " threw: " + failure.what());
  }
}

}  // namespace

int main() {
  weft::cuda::request_hardware_queues();  // up to 5 ranks share a GPU: weft::cuda::check_sharing
  if (const std::string why = weft::cuda::why_no_device(); !why.empty()) {
    std::printf("skipped: no CUDA device (%s)\n", why.c_str());
    return 77;
  }
  group("a rank that never issues its call, then abort",
        [] { never_issued<weft::ring>(2, "waits for rank 2 to send"); });
  group("fused: a rank that never issues its part, then abort", [] {
    never_issued<weft::fused>(1, "waits for rank(s) 1 to issue allreduce (algorithm fused)");
  });
  group("fused in place over several shares", [] {
    for (int p : {2, 3, 5}) fused_in_place(p, (std::size_t{3} << 20) + 5);
  });
  for (int p = 1; p <= 5; ++p) {
    for (const std::size_t count :
         {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{(1 << 20) + 3}}) {
      group(
          "allreduce, every algorithm, p=" + std::to_string(p) + " count=" + std::to_string(count),
          [&] {
            allreduce_case<float, weft::sum, weft::ring>(p, count, weft::sum{}, "sum", false);
            allreduce_case<float, weft::sum, weft::double_binary_tree>(p, count, weft::sum{}, "sum",
                                                                       false);
            allreduce_case<float, weft::sum, weft::recursive_doubling>(p, count, weft::sum{}, "sum",
                                                                       false);
            allreduce_case<float, weft::sum, weft::recursive_halving>(p, count, weft::sum{}, "sum",
                                                                      false);
            allreduce_case<float, weft::sum, weft::direct>(p, count, weft::sum{}, "sum", false);
            allreduce_case<float, weft::sum, weft::fused>(p, count, weft::sum{}, "sum", false);
            allreduce_case<float, weft::sum, weft::automatic>(p, count, weft::sum{}, "sum", false);
          });
      group("the other collectives, p=" + std::to_string(p) + " count=" + std::to_string(count),
            [&] {
              other_collectives<std::int32_t>(p, count);
              other_collectives<float>(p, count);
            });
    }
  }
  for (int p : {2, 4}) {
    group("every type and reduction, p=" + std::to_string(p), [&] {
      every_op<std::int8_t>(p);
      every_op<std::uint8_t>(p);
      every_op<std::int16_t>(p);
      every_op<std::uint16_t>(p);
      every_op<std::int32_t>(p);
      every_op<std::uint32_t>(p);
      every_op<std::int64_t>(p);
      every_op<std::uint64_t>(p);
      every_op<float>(p);
      every_op<double>(p);
      every_op<weft::half>(p);
      every_op<weft::bfloat16>(p);
    });
  }
  return finish("communicators");
}
