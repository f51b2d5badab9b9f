// No allocation in the steady state: after a first call has grown the scratch and request
// pools, repeating the same collectives allocates nothing. Global operator new is replaced to
// count allocations per thread, so this test has a binary of its own (and is left out of
// sanitizer builds, whose allocators it would fight).
#include "../support.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <new>

using namespace weft_test;

// ---- allocation counting ----------------------------------------------------------------------
// g++ flags free() on memory from operator new even when both are replaced together, as here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {
thread_local bool counting_allocations = false;
thread_local std::size_t allocations = 0;
}  // namespace

void* operator new(std::size_t size) {
  if (counting_allocations) ++allocations;
  if (void* pointer = std::malloc(size == 0 ? 1 : size)) return pointer;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void operator delete(void* pointer) noexcept { std::free(pointer); }
void operator delete(void* pointer, std::size_t) noexcept { std::free(pointer); }
void operator delete[](void* pointer) noexcept { std::free(pointer); }
void operator delete[](void* pointer, std::size_t) noexcept { std::free(pointer); }

TEST_CASE("the steady state allocates nothing", "[api]") {
  std::vector<std::size_t> counted(4, 999);
  weft::inproc::run(
      4,
      [&](comm_t& comm) {
        std::vector<float> data(100000, 1.0f);
        std::vector<float> all(400000);
        auto steady = [&] {
          weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::ring{});
          weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::double_binary_tree{});
          weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::recursive_halving{});
          weft::allreduce(comm, std::span<float>(data), weft::sum{});
          weft::allgather(comm, std::span<const float>(data), std::span<float>(all), weft::bruck{});
          weft::broadcast(comm, std::span<float>(data), 1, weft::binomial_tree{});
          weft::barrier(comm);
        };
        steady();  // first call: scratch and request pools grow
        allocations = 0;
        counting_allocations = true;
        steady();
        counting_allocations = false;
        counted[static_cast<std::size_t>(comm.rank())] = allocations;
      },
      test_options(65536));
  for (std::size_t count : counted) CHECK(count == 0);
}
