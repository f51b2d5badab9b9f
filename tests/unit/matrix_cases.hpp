// The collective matrix's cases, for the in-process transport's matrix tests (blocking and in
// flight): every collective x every algorithm that implements it (and automatic) x the counts
// given x types {int8, int32, int64, float, double, bfloat16} x in place / out of place, then
// every op on the types it applies to. Each case reaches `run` as a callable taking the
// communicator to run it on; all ranks walk the same loops in the same order.
#pragma once

#include "../collective_cases.hpp"

#include <cstddef>
#include <vector>

namespace weft_test {

template <class Run>
void matrix_cases(comm_t& comm, failures& sink, const std::vector<std::size_t>& counts, Run&& run) {
  const int p = comm.size();
  for (const std::size_t count : counts) {
    // many pieces for small inputs; fewer for the largest, to keep the run short
    comm.set_settings(test_options(count > 1000 ? 16384 : 512));
    const int root = static_cast<int>(count % static_cast<std::size_t>(p));
    const int other_root = p - 1;
    for_each_type<std::int8_t, std::int32_t, std::int64_t, float, double, weft::bfloat16>(
        [&](auto type) {
          using T = typename decltype(type)::type;
          for_each_algorithm<weft::ring, weft::double_binary_tree, weft::recursive_doubling,
                             weft::recursive_halving, weft::direct, weft::automatic>(
              [&](auto algorithm) {
                using A = typename decltype(algorithm)::type;
                run([=, &sink](comm_t& c) {
                  allreduce_case<T, weft::sum, A>(c, sink, count, false, weft::sum{}, false);
                });
                run([=, &sink](comm_t& c) {
                  allreduce_case<T, weft::sum, A>(c, sink, count, true, weft::sum{}, false);
                });
              });
          for_each_algorithm<weft::ring, weft::recursive_halving, weft::direct, weft::automatic>(
              [&](auto algorithm) {
                run([=, &sink](comm_t& c) {
                  reduce_scatter_case<T, typename decltype(algorithm)::type>(c, sink, count);
                });
              });
          for_each_algorithm<weft::binomial_tree, weft::direct, weft::automatic>(
              [&](auto algorithm) {
                using A = typename decltype(algorithm)::type;
                run([=, &sink](comm_t& c) { reduce_case<T, A>(c, sink, count, false, root); });
                run([=, &sink](comm_t& c) { reduce_case<T, A>(c, sink, count, true, other_root); });
                run([=, &sink](comm_t& c) { gather_scatter_case<T, A>(c, sink, count, root); });
              });
          for_each_algorithm<weft::binomial_tree, weft::ring, weft::direct, weft::automatic>(
              [&](auto algorithm) {
                run([=, &sink](comm_t& c) {
                  broadcast_case<T, typename decltype(algorithm)::type>(c, sink, count, root);
                });
                run([=, &sink](comm_t& c) {
                  broadcast_case<T, typename decltype(algorithm)::type>(c, sink, count, other_root);
                });
              });
          for_each_algorithm<weft::ring, weft::recursive_doubling, weft::bruck, weft::direct,
                             weft::automatic>([&](auto algorithm) {
            run([=, &sink](comm_t& c) {
              allgather_case<T, typename decltype(algorithm)::type>(c, sink, count, false);
            });
            run([=, &sink](comm_t& c) {
              allgather_case<T, typename decltype(algorithm)::type>(c, sink, count, true);
            });
          });
          for_each_algorithm<weft::ring, weft::recursive_doubling, weft::direct, weft::automatic>(
              [&](auto algorithm) {
                run([=, &sink](comm_t& c) {
                  allgatherv_case<T, typename decltype(algorithm)::type>(c, sink, count);
                });
              });
          for_each_algorithm<weft::pairwise, weft::bruck, weft::direct, weft::automatic>(
              [&](auto algorithm) {
                run([=, &sink](comm_t& c) {
                  alltoall_case<T, typename decltype(algorithm)::type>(c, sink, count);
                });
              });
          for_each_algorithm<weft::pairwise, weft::direct, weft::automatic>([&](auto algorithm) {
            run([=, &sink](comm_t& c) {
              alltoallv_case<T, typename decltype(algorithm)::type>(c, sink, count);
            });
          });
        });
    // Every op, on the integer and float types it applies to.
    if (count <= 1000) {
      for_each_type<std::int32_t, float, weft::bfloat16>([&](auto type) {
        using T = typename decltype(type)::type;
        for_each_algorithm<weft::ring, weft::recursive_doubling, weft::direct>([&](auto algorithm) {
          using A = typename decltype(algorithm)::type;
          run([=, &sink](comm_t& c) {
            allreduce_case<T, weft::prod, A>(c, sink, count, false, weft::prod{}, true);
          });
          run([=, &sink](comm_t& c) {
            allreduce_case<T, weft::min, A>(c, sink, count, false, weft::min{}, false);
          });
          run([=, &sink](comm_t& c) {
            allreduce_case<T, weft::max, A>(c, sink, count, true, weft::max{}, false);
          });
          run([=, &sink](comm_t& c) {
            allreduce_case<T, weft::avg, A>(c, sink, count, false, weft::avg{}, false);
          });
        });
      });
      for_each_type<std::int8_t, std::int32_t, std::int64_t>([&](auto type) {
        using T = typename decltype(type)::type;
        for_each_algorithm<weft::double_binary_tree, weft::recursive_halving>([&](auto algorithm) {
          using A = typename decltype(algorithm)::type;
          run([=, &sink](comm_t& c) {
            allreduce_case<T, weft::band, A>(c, sink, count, false, weft::band{}, false);
          });
          run([=, &sink](comm_t& c) {
            allreduce_case<T, weft::bor, A>(c, sink, count, false, weft::bor{}, false);
          });
          run([=, &sink](comm_t& c) {
            allreduce_case<T, weft::bxor, A>(c, sink, count, true, weft::bxor{}, false);
          });
        });
      });
    }
  }
}

}  // namespace weft_test
