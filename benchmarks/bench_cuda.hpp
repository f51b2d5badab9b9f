// Device buffers for weft-bench's GPU tables (weft_bench_cuda.cu, weft_bench_cuda_ipc.cu): a
// workload's inputs and outputs on a GPU, from cudaMalloc or a rank's pool, and the events that
// time a call.
#pragma once

#include "bench.hpp"

#include <weft/transport/cuda.hpp>

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace weft_bench {

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
      : data_(std::exchange(other.data_, nullptr)),
        count_(other.count_),
        free_(std::move(other.free_)) {}
  ~device_array() {
    if (data_ == nullptr) return;
    if (free_)
      free_(data_);
    else
      static_cast<void>(cudaFree(data_));
  }
  std::span<T> span() { return {data_, count_}; }
  template <class Vector>
  void put(const Vector& host) {
    if (count_ == 0) return;
    weft::cuda::check(cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice),
                      "cudaMemcpy");
    // weft's streams are non-blocking: the copy (from pageable memory) must have landed first.
    weft::cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  template <class Vector>
  void get(Vector& host) const {
    if (count_ > 0)
      weft::cuda::check(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost),
                        "cudaMemcpy");
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
      : host(&work),
        in_buffer(device, work.in.size(), pool),
        out_buffer(device, work.out.size(), pool),
        collective(work.collective),
        in_place(work.in_place),
        root(work.root),
        op(work.op),
        in(in_buffer.span()),
        out(out_buffer.span()) {
    load();
  }
  void load() {
    in_buffer.put(host->in);
    out_buffer.put(host->out);
  }
  std::span<const T> own_block() const {
    return std::span<const T>(out).subspan(host->block * static_cast<std::size_t>(host->r),
                                           host->block);
  }
  std::size_t wrong() {
    in_buffer.get(host->in);
    out_buffer.get(host->out);
    return host->wrong();
  }
};

// A call an algorithm does not implement is a skipped row where the table runs every
// collective with an algorithm chosen by name; anything else is the table's failure.
[[noreturn]] inline void skip_or_rethrow(const weft::error& failure, const settings& options,
                                         const std::string& collective) {
  if (failure.code() != weft::errc::invalid_argument || options.collective != "all" ||
      options.algorithm == "automatic") {
    throw failure;
  }
  throw skipped{options.algorithm + " does not implement " + collective};
}

struct rank_events {
  cudaEvent_t start = nullptr, stop = nullptr;
};

}  // namespace weft_bench
