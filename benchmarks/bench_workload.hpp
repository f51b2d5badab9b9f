// The buffers of one benchmarked call, filled with small integers whose exact result is known
// for every type and op, and the count of elements that differ from it (bench.hpp times it).
#pragma once

#include "bench_cli.hpp"

#include <weft/weft.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace weft_bench {

// ---- inputs whose results are known exactly ------------------------------------------------

template <class T>
T value(int v) {
  if constexpr (weft::is_narrow_float_v<T>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

// What rank r contributes at element i of a reduction. Sums stay below 8 per rank (exact in
// every type for up to 32 ranks, wrapping defined for the integers beyond); for prod one rank
// contributes 1..3 at each element and the others 1.
template <class Op>
int contribution(int r, int p, std::size_t i) {
  if constexpr (std::is_same_v<Op, weft::prod>) {
    return (i + static_cast<std::size_t>(r)) % static_cast<std::size_t>(p) == 0
               ? static_cast<int>(i % 3) + 1
               : 1;
  } else {
    return static_cast<int>((static_cast<std::size_t>(r) * 3 + i) % 7) + 1;
  }
}
template <class T, class Op>
T reduced(int p, std::size_t i, Op op) {
  T acc = value<T>(contribution<Op>(0, p, i));
  for (int r = 1; r < p; ++r) acc = op(acc, value<T>(contribution<Op>(r, p, i)));
  return weft::finalize(op, acc, p);
}
// Rank r's block in gather, allgather, scatter and sendrecv.
inline int block_value(int r, std::size_t i) {
  return static_cast<int>((static_cast<std::size_t>(r) * 5 + i) % 11) + 1;
}
// Element i of the block rank `from` sends to rank `to` in alltoall.
inline int exchange_value(int from, int to, std::size_t i) {
  return static_cast<int>(
             (static_cast<std::size_t>(from) * 7 + static_cast<std::size_t>(to) * 3 + i) % 13) +
         1;
}
inline int broadcast_value(int root, std::size_t i) {
  return static_cast<int>((static_cast<std::size_t>(root) + i) % 13) + 1;
}

// ---- one measurement -------------------------------------------------------------------------

// The buffers of one call with inputs whose results are known; any library's call can run on
// them (weft-bench and the comparison programs in compare/ share it).
template <class T, class Op, class Allocator = std::allocator<T>>
struct workload {
  using element_type = T;
  using op_type = Op;
  using vector = std::vector<T, Allocator>;
  std::string collective;
  std::size_t count = 0;  // the table's count column
  bool in_place = false;
  int p = 1, r = 0, root = -1;
  Op op{};
  std::size_t block = 0;  // elements per rank's block (blocked collectives), else count
  vector in, out;

  workload(std::string name, std::size_t elements, bool same_buffer, int ranks, int rank, int at,
           Op reduction = {}, const Allocator& storage = Allocator())
      : collective(std::move(name)),
        count(elements),
        in_place(same_buffer),
        p(ranks),
        r(rank),
        root(rooted(collective) ? at : -1),
        op(reduction),
        block(blocked(collective) ? elements / static_cast<std::size_t>(ranks) : elements),
        in(storage),
        out(storage) {
    fill();
  }

  // Whether the call overwrites its input (so the inputs are restored between iterations).
  bool overwrites_input() const { return in_place || collective == "broadcast"; }
  // In place, the buffer the call works on: `in` (allreduce, reduce, broadcast) or `out`
  // (allgather, whose input is this rank's block of it).
  std::span<const T> own_block() const {
    return std::span<const T>(out).subspan(block * static_cast<std::size_t>(r), block);
  }

  // The buffer the call leaves its result in on this rank.
  vector& result() {
    return (in_place && collective != "allgather") || collective == "broadcast" ? in : out;
  }

  void fill() {
    if (collective == "allreduce" || collective == "reduce") {
      in.resize(count);
      for (std::size_t i = 0; i < count; ++i) in[i] = value<T>(contribution<Op>(r, p, i));
      out.assign(in_place ? 0 : count, value<T>(0));
    } else if (collective == "reduce_scatter") {
      in.resize(count);
      for (std::size_t i = 0; i < count; ++i) in[i] = value<T>(contribution<Op>(r, p, i));
      out.assign(block, value<T>(0));
    } else if (collective == "broadcast") {
      in.resize(count);
      for (std::size_t i = 0; i < count; ++i)
        in[i] = value<T>(r == root ? broadcast_value(root, i) : 0);
    } else if (collective == "allgather" || collective == "gather" || collective == "sendrecv") {
      in.resize(block);
      for (std::size_t i = 0; i < block; ++i) in[i] = value<T>(block_value(r, i));
      const bool receives_all = collective == "allgather" || r == root;
      out.assign(collective == "sendrecv" ? block : (receives_all ? count : 0), value<T>(0));
      if (in_place)
        std::copy(in.begin(), in.end(),
                  out.begin() + static_cast<std::ptrdiff_t>(block * static_cast<std::size_t>(r)));
    } else if (collective == "scatter") {
      in.assign(r == root ? count : 0, value<T>(0));
      for (std::size_t i = 0; i < in.size(); ++i)
        in[i] = value<T>(block_value(static_cast<int>(i / block), i % block));
      out.assign(block, value<T>(0));
    } else if (collective == "alltoall") {
      in.resize(count);
      for (std::size_t i = 0; i < count; ++i)
        in[i] = value<T>(exchange_value(r, static_cast<int>(i / block), i % block));
      out.assign(count, value<T>(0));
    }
  }

  // Elements of this rank's result that differ from the known answer.
  std::size_t wrong() const {
    std::size_t bad = 0;
    if (collective == "allreduce" || (collective == "reduce" && r == root)) {
      const auto& data = in_place ? in : out;
      bad = wrong_reduction(std::span<const T>(data.data(), count), 0);
    } else if (collective == "reduce_scatter") {
      bad = wrong_reduction(std::span<const T>(out.data(), block),
                            static_cast<std::size_t>(r) * block);
    } else if (collective == "broadcast") {
      for (std::size_t i = 0; i < count; ++i) bad += !(in[i] == value<T>(broadcast_value(root, i)));
    } else if (collective == "allgather" || (collective == "gather" && r == root)) {
      for (std::size_t i = 0; i < count; ++i)
        bad += !(out[i] == value<T>(block_value(static_cast<int>(i / block), i % block)));
    } else if (collective == "scatter") {
      for (std::size_t i = 0; i < block; ++i) bad += !(out[i] == value<T>(block_value(r, i)));
    } else if (collective == "alltoall") {
      for (std::size_t i = 0; i < count; ++i)
        bad += !(out[i] == value<T>(exchange_value(static_cast<int>(i / block), r, i % block)));
    } else if (collective == "sendrecv") {
      for (std::size_t i = 0; i < block; ++i)
        bad += !(out[i] == value<T>(block_value((r + p - 1) % p, i)));
    }
    return bad;
  }

  // Wrong elements of a reduced result whose first element is element `first` of the reduction.
  // The contributions repeat every 7 elements (every 3p for prod), so one period of the answer
  // is folded over the ranks once and the result compared against it.
  std::size_t wrong_reduction(std::span<const T> data, std::size_t first) const {
    const std::size_t period = std::is_same_v<Op, weft::prod> ? 3 * static_cast<std::size_t>(p) : 7;
    std::vector<T> answer(period);
    for (std::size_t k = 0; k < period; ++k) answer[k] = reduced<T>(p, first + k, op);
    std::size_t bad = 0;
    for (std::size_t i = 0, k = 0; i < data.size(); ++i, k = (k + 1 == period ? 0 : k + 1)) {
      bad += !(data[i] == answer[k]);
    }
    return bad;
  }
};

}  // namespace weft_bench
