// The benchmark's result check (benchmarks/bench.hpp, shared by weft-bench and the comparison
// programs): a right result counts 0 wrong, and one changed element counts exactly 1, for every
// collective, in both forms, with a sum and with a prod.
#include "../../benchmarks/bench.hpp"
#include "../support.hpp"

#include <catch2/catch.hpp>

using namespace weft_test;

namespace {

// Which rank holds a result the check reads: the root for reduce and gather, every rank else.
bool holds_result(const std::string& collective, int rank, int root) {
  return (collective != "reduce" && collective != "gather") || rank == root;
}

template <class T, class Op>
void check_every_collective(int p, int root) {
  for (const std::string collective : {"allreduce", "reduce", "reduce_scatter", "broadcast",
                                       "allgather", "gather", "scatter", "alltoall", "sendrecv"}) {
    if (!weft_bench::reduces(collective) && !std::is_same_v<Op, weft::sum>) continue;
    for (const bool in_place : {false, true}) {
      if (in_place && !weft_bench::has_in_place(collective)) continue;
      if (!in_place && !weft_bench::has_out_of_place(collective)) continue;
      const std::size_t count =
          static_cast<std::size_t>(p) * 29;  // several periods of every pattern
      // Each rank's counts; checked on this thread afterwards (Catch2's macros are not
      // thread-safe, so the ranks only record).
      std::vector<std::size_t> right_result(static_cast<std::size_t>(p)),
          one_changed(static_cast<std::size_t>(p));
      weft::inproc::run(
          p,
          [&](comm_t& comm) {
            const auto me = static_cast<std::size_t>(comm.rank());
            weft_bench::workload<T, Op> work(collective, count, in_place, p, comm.rank(), root);
            weft_bench::call_weft(comm, work);
            right_result[me] = work.wrong();
            if (holds_result(collective, comm.rank(), root)) {
              auto& result = work.result();
              result.at(result.size() - 2) =
                  weft_bench::value<T>(100);  // no input or answer is 100
              one_changed[me] = work.wrong();
            }
          },
          test_options());
      for (int rank = 0; rank < p; ++rank) {
        INFO(collective << (in_place ? " in place" : " out of place") << ", rank " << rank << " of "
                        << p);
        CHECK(right_result[static_cast<std::size_t>(rank)] == 0);
        CHECK(one_changed[static_cast<std::size_t>(rank)] ==
              (holds_result(collective, rank, root) ? 1u : 0u));
      }
    }
  }
}

}  // namespace

TEST_CASE("the benchmark check counts a right result as 0 wrong and one changed element as 1",
          "[bench]") {
  check_every_collective<float, weft::sum>(3, 1);
  check_every_collective<std::int32_t, weft::prod>(4, 3);
  check_every_collective<double, weft::max>(5, 0);
}
