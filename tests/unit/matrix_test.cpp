// The full collective matrix over the in-process transport: every collective x every
// algorithm that implements it (and automatic) x ranks {1..9, 13, 16} x counts {0, 1, p-1,
// p+1, 1000, 65539} x types {int8, int32, int64, float, double, bfloat16} x in place / out of
// place, checked bit for bit against a serial reference. A small chunk size makes the
// pipelined paths run in many pieces.
#include "matrix_cases.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <numeric>

using namespace weft_test;

namespace {

using all_types =
    std::tuple<std::int8_t, std::int32_t, std::int64_t, float, double, weft::bfloat16>;

std::vector<std::size_t> counts_for(int p) {
  std::vector<std::size_t> counts = {0, 1, static_cast<std::size_t>(p - 1),
                                     static_cast<std::size_t>(p + 1), 1000};
  if (!quick()) counts.push_back(65539);
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

// Runs every case for one rank count.
void run_matrix(int p, failures& sink) {
  weft::inproc::run(p, [&](comm_t& comm) {
    matrix_cases(comm, sink, counts_for(p), [&](auto&& one_case) { one_case(comm); });
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
