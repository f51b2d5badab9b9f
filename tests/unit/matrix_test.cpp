// The full collective matrix over the in-process transport: every collective x every
// algorithm that implements it (and automatic) x ranks {1..9, 13, 16} x counts {0, 1, p-1,
// p+1, 1000, 65539} x types {int8, int32, int64, float, double, bfloat16} x in place / out of
// place, checked bit for bit against a serial reference. A small chunk size makes the
// pipelined paths run in many pieces.
#include "../collective_cases.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <numeric>

using namespace weft_test;

namespace {

using all_types = std::tuple<std::int8_t, std::int32_t, std::int64_t, float, double, weft::bfloat16>;

bool quick_matrix() {
  const char* value = std::getenv("WEFT_TEST_QUICK");
  return value != nullptr && *value != '\0' && *value != '0';
}

std::vector<std::size_t> counts_for(int p) {
  std::vector<std::size_t> counts = {0, 1, static_cast<std::size_t>(p - 1),
                                     static_cast<std::size_t>(p + 1), 1000};
  if (!quick_matrix()) counts.push_back(65539);
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

// Runs every case for one rank count; all ranks walk the same loops in the same order.
void run_matrix(int p, failures& sink) {
  weft::inproc::run(p, [&](comm_t& comm) {
    for (const std::size_t count : counts_for(p)) {
      // many pieces for small inputs; fewer for the largest, to keep the run short
      comm.set_settings(test_options(count > 1000 ? 16384 : 512));
      const int root = static_cast<int>(count % static_cast<std::size_t>(p));
      const int other_root = p - 1;
      for_each_type<std::int8_t, std::int32_t, std::int64_t, float, double, weft::bfloat16>([&](auto type) {
        using T = typename decltype(type)::type;
        for_each_algorithm<weft::ring, weft::double_binary_tree, weft::recursive_doubling,
                           weft::recursive_halving, weft::direct, weft::automatic>([&](auto algorithm) {
          using A = typename decltype(algorithm)::type;
          allreduce_case<T, weft::sum, A>(comm, sink, count, false, weft::sum{}, false);
          allreduce_case<T, weft::sum, A>(comm, sink, count, true, weft::sum{}, false);
        });
        for_each_algorithm<weft::ring, weft::recursive_halving, weft::direct, weft::automatic>([&](auto algorithm) {
          reduce_scatter_case<T, typename decltype(algorithm)::type>(comm, sink, count);
        });
        for_each_algorithm<weft::binomial_tree, weft::direct, weft::automatic>([&](auto algorithm) {
          using A = typename decltype(algorithm)::type;
          reduce_case<T, A>(comm, sink, count, false, root);
          reduce_case<T, A>(comm, sink, count, true, other_root);
          gather_scatter_case<T, A>(comm, sink, count, root);
        });
        for_each_algorithm<weft::binomial_tree, weft::ring, weft::direct, weft::automatic>([&](auto algorithm) {
          broadcast_case<T, typename decltype(algorithm)::type>(comm, sink, count, root);
          broadcast_case<T, typename decltype(algorithm)::type>(comm, sink, count, other_root);
        });
        for_each_algorithm<weft::ring, weft::recursive_doubling, weft::bruck, weft::direct, weft::automatic>([&](auto algorithm) {
          allgather_case<T, typename decltype(algorithm)::type>(comm, sink, count, false);
          allgather_case<T, typename decltype(algorithm)::type>(comm, sink, count, true);
        });
        for_each_algorithm<weft::ring, weft::recursive_doubling, weft::direct, weft::automatic>([&](auto algorithm) {
          allgatherv_case<T, typename decltype(algorithm)::type>(comm, sink, count);
        });
        for_each_algorithm<weft::pairwise, weft::bruck, weft::direct, weft::automatic>([&](auto algorithm) {
          alltoall_case<T, typename decltype(algorithm)::type>(comm, sink, count);
        });
        for_each_algorithm<weft::pairwise, weft::direct, weft::automatic>([&](auto algorithm) {
          alltoallv_case<T, typename decltype(algorithm)::type>(comm, sink, count);
        });
      });
      // Every op, on the integer and float types it applies to.
      if (count <= 1000) {
        for_each_type<std::int32_t, float, weft::bfloat16>([&](auto type) {
          using T = typename decltype(type)::type;
          for_each_algorithm<weft::ring, weft::recursive_doubling, weft::direct>([&](auto algorithm) {
            using A = typename decltype(algorithm)::type;
            allreduce_case<T, weft::prod, A>(comm, sink, count, false, weft::prod{}, true);
            allreduce_case<T, weft::min, A>(comm, sink, count, false, weft::min{}, false);
            allreduce_case<T, weft::max, A>(comm, sink, count, true, weft::max{}, false);
            allreduce_case<T, weft::avg, A>(comm, sink, count, false, weft::avg{}, false);
          });
        });
        for_each_type<std::int8_t, std::int32_t, std::int64_t>([&](auto type) {
          using T = typename decltype(type)::type;
          for_each_algorithm<weft::double_binary_tree, weft::recursive_halving>([&](auto algorithm) {
            using A = typename decltype(algorithm)::type;
            allreduce_case<T, weft::band, A>(comm, sink, count, false, weft::band{}, false);
            allreduce_case<T, weft::bor, A>(comm, sink, count, false, weft::bor{}, false);
            allreduce_case<T, weft::bxor, A>(comm, sink, count, true, weft::bxor{}, false);
          });
        });
      }
    }
    weft::barrier(comm, weft::dissemination{});
    weft::barrier(comm);
  });
}

}  // namespace

TEST_CASE("every collective and algorithm matches the serial reference", "[matrix]") {
  const int p = GENERATE(1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16);
  failures sink;
  run_matrix(p, sink);
  INFO("ranks " << p);
  CHECK(sink.empty());
  if (!sink.empty()) FAIL(sink.summary());
}
