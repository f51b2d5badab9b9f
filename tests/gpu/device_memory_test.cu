// weft::cuda::device_memory on a GPU: copy, combine and finalize for every element type and
// reduction, aligned and not, in place and not, at sizes around the kernels' vector width,
// bitwise against host_memory; scratch allocation. Skipped (exit 77) without a GPU.
#include "checks.hpp"
#include "values.hpp"

#include "weft/memory.hpp"
#include "weft/transport/cuda.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

using namespace weft_gpu_test;

namespace {

// A device buffer of `count` T (plus one element of room to misalign), freed at scope end.
template <class T>
struct device_buffer {
  explicit device_buffer(std::size_t count) {
    weft::cuda::check(cudaMalloc(&base, (count + 1) * sizeof(T)), "cudaMalloc");
  }
  ~device_buffer() { cudaFree(base); }
  T* at(std::size_t offset) { return static_cast<T*>(base) + offset; }
  void* base = nullptr;
};

template <class T>
void put(T* device, const std::vector<T>& host) {
  weft::cuda::check(
      cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
      "to device");
  weft::cuda::check(cudaDeviceSynchronize(),
                    "cudaDeviceSynchronize");  // landed before any stream reads it
}
template <class T>
std::vector<T> take(const T* device, std::size_t count) {
  std::vector<T> host(count);
  weft::cuda::check(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost),
                    "to host");
  return host;
}

template <class T>
std::size_t differing(const std::vector<T>& expected, const std::vector<T>& got) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) wrong += !same_bits(expected[i], got[i]);
  return wrong;
}

template <class T, class Op>
void compare(weft::cuda::device_memory& memory, const Op& op, const char* op_name) {
  weft::host_memory host;
  for (const std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{17},
                                  std::size_t{4099}, std::size_t{(1 << 20) + 3}}) {
    for (const std::size_t offset : {std::size_t{0}, std::size_t{1}}) {  // 1: not 16-byte aligned
      for (const bool in_place : {false, true}) {
        const auto a = operands<T>(count, static_cast<unsigned>(count) + 1);
        const auto b = operands<T>(count, static_cast<unsigned>(count) + 2);
        std::vector<T> expected(count);
        host.combine(std::span<T>(expected), std::span<const T>(a), std::span<const T>(b), op);
        device_buffer<T> da(count), db(count), dd(count);
        put(da.at(offset), a);
        put(db.at(offset), b);
        T* out = in_place ? da.at(offset) : dd.at(offset);
        memory.combine(std::span<T>(out, count), std::span<const T>(da.at(offset), count),
                       std::span<const T>(db.at(offset), count), op);
        weft::cuda::check(cudaStreamSynchronize(memory.stream()), "cudaStreamSynchronize");
        const std::string what = type_name<T>() + " " + op_name + ", " + std::to_string(count) +
                                 " elements" + (offset ? ", unaligned" : "") +
                                 (in_place ? ", in place" : "");
        GPU_CHECK(differing(expected, take(out, count)) == 0, what);
        if constexpr (weft::has_finalize_v<Op, T>) {
          host.finalize(std::span<T>(expected), op, 3);
          memory.finalize(std::span<T>(out, count), op, 3);
          weft::cuda::check(cudaStreamSynchronize(memory.stream()), "cudaStreamSynchronize");
          GPU_CHECK(differing(expected, take(out, count)) == 0, what + ", finalized over 3 ranks");
        }
      }
    }
  }
}

template <class T>
void every_op(weft::cuda::device_memory& memory) {
  compare<T>(memory, weft::sum{}, "sum");
  compare<T>(memory, weft::prod{}, "prod");
  compare<T>(memory, weft::min{}, "min");
  compare<T>(memory, weft::max{}, "max");
  compare<T>(memory, weft::avg{}, "avg");
  compare<T>(memory, a_plus_b_plus_a{}, "user ((a + b) + a)");
  if constexpr (std::is_integral_v<T>) {
    compare<T>(memory, weft::band{}, "band");
    compare<T>(memory, weft::bor{}, "bor");
    compare<T>(memory, weft::bxor{}, "bxor");
  }
}

void copy_and_allocate(weft::cuda::device_memory& memory) {
  const auto bytes = operands<std::uint8_t>(1 << 20, 9);
  std::byte* from = memory.allocate(bytes.size());
  std::byte* to = memory.allocate(bytes.size());
  GPU_CHECK(reinterpret_cast<std::uintptr_t>(from) % 64 == 0 &&
                reinterpret_cast<std::uintptr_t>(to) % 64 == 0,
            "scratch is 64-byte aligned");
  weft::cuda::check(
      cudaMemcpyAsync(from, bytes.data(), bytes.size(), cudaMemcpyHostToDevice, memory.stream()),
      "to device");
  memory.copy(std::span<std::byte>(to, bytes.size()),
              std::span<const std::byte>(from, bytes.size()));
  std::vector<std::uint8_t> back(bytes.size());
  weft::cuda::check(
      cudaMemcpyAsync(back.data(), to, back.size(), cudaMemcpyDeviceToHost, memory.stream()),
      "to host");
  memory.deallocate(from, bytes.size());
  memory.deallocate(to, bytes.size());
  weft::cuda::check(cudaStreamSynchronize(memory.stream()), "cudaStreamSynchronize");
  GPU_CHECK(back == bytes, "copy moves 1 MiB device to device, in stream order after allocate");
  std::byte* none = memory.allocate(0);
  GPU_CHECK(none != nullptr, "allocate(0) gives a pointer");
  memory.deallocate(none, 0);
}

}  // namespace

int main() {
  if (const std::string why = weft::cuda::why_no_device(); !why.empty()) {
    std::printf("skipped: no CUDA device (%s)\n", why.c_str());
    return 77;
  }
  cudaStream_t stream = nullptr;
  weft::cuda::check(cudaSetDevice(0), "cudaSetDevice(0)");
  weft::cuda::check(cudaStreamCreate(&stream), "cudaStreamCreate");
  weft::cuda::device_memory memory(0, stream);
  copy_and_allocate(memory);
  every_op<std::int8_t>(memory);
  every_op<std::uint8_t>(memory);
  every_op<std::int16_t>(memory);
  every_op<std::uint16_t>(memory);
  every_op<std::int32_t>(memory);
  every_op<std::uint32_t>(memory);
  every_op<std::int64_t>(memory);
  every_op<std::uint64_t>(memory);
  every_op<float>(memory);
  every_op<double>(memory);
  every_op<weft::half>(memory);
  every_op<weft::bfloat16>(memory);
  cudaStreamDestroy(stream);
  return finish("device memory");
}
