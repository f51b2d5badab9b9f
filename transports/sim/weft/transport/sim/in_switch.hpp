// weft/transport/sim/in_switch.hpp — what a switch that reduces does with one operation
// (weft::in_switch on the simulator): which bytes each member's port carries, whether the
// members' sizes agree, and the result written into every member's output.
//
// NVLink SHARP's allreduce, as NCCL runs it: each GPU asks the switch for its 1/k of the result
// (multimem.ld_reduce: the switch reads that share from all k GPUs and returns the reduction),
// then stores it to all k at once (multimem.st: the switch copies it to every GPU). So each port
// carries the data plus its 1/k in each direction: (1 + 1/k) n. A reduce_scatter is the first
// half (n up, n/k down), an allgather the second (a member's block up, the whole output down).
#pragma once

#include "weft/call.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/error.hpp"
#include "weft/transport/sim/phantom.hpp"

#include <cstddef>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace weft::sim::detail {

struct operation;

// One member's part of an in-switch operation.
struct switch_part {
  operation* op = nullptr;  // null: not posted yet, or withdrawn
  std::span<const std::byte> in;
  std::span<std::byte> out;
  const weft::detail::reducer* combine = nullptr;
};

// The parts posted so far under one tag by one group of ranks.
struct switch_meeting {
  collective kind = collective::allreduce;
  int arrived = 0;
  std::vector<switch_part> parts;  // in member order
};

// Bytes a member's port carries up to the switch and down from it, for a call whose largest
// buffer is `bytes` (allreduce: the vector; reduce_scatter: the whole input; allgatherv: the
// whole output), `own` the member's own block of an allgatherv.
inline std::pair<double, double> switch_traffic(collective kind, int members, double bytes,
                                                double own) {
  const double k = members;
  switch (kind) {
    case collective::allreduce:
      return {bytes + bytes / k, bytes + bytes / k};
    case collective::reduce_scatter:
      return {bytes, bytes / k};
    default:  // allgather, allgatherv
      return {own, bytes};
  }
}

// The call's largest buffer on member `i`.
inline double largest_buffer(collective kind, const switch_part& part) {
  return static_cast<double>(kind == collective::reduce_scatter ? part.in.size() : part.out.size());
}

// Why the members' parts do not make one operation, or nothing when they do.
inline std::optional<std::string> switch_mismatch(const switch_meeting& m,
                                                  std::span<const int> members) {
  const auto& first = m.parts.front();
  const std::size_t k = m.parts.size();
  std::size_t gathered = 0;
  for (std::size_t i = 0; i < k; ++i) {
    const auto& part = m.parts[i];
    gathered += part.in.size();
    // Every member's output is the same size; an allgather's blocks may differ, the reductions'
    // inputs may not, and each input relates to its output as the collective says.
    const bool gathers = m.kind == collective::allgather || m.kind == collective::allgatherv;
    const bool agrees =
        part.out.size() == first.out.size() &&
        (gathers ||
         (part.in.size() == first.in.size() &&
          part.in.size() == part.out.size() * (m.kind == collective::reduce_scatter ? k : 1)));
    if (!agrees) {
      return "in-switch " + std::string(to_string(m.kind)) + ": rank " +
             std::to_string(members[i]) + " gives " + std::to_string(part.in.size()) +
             " bytes in and " + std::to_string(part.out.size()) + " out, rank " +
             std::to_string(members[0]) + " " + std::to_string(first.in.size()) + " and " +
             std::to_string(first.out.size()) +
             ": the ranks made different calls, or with different counts";
    }
  }
  if ((m.kind == collective::allgather || m.kind == collective::allgatherv) &&
      gathered != first.out.size()) {
    return "in-switch allgather: the members' blocks add up to " + std::to_string(gathered) +
           " bytes, and each output holds " + std::to_string(first.out.size());
  }
  return std::nullopt;
}

// Writes the operation's result into every member's output, with `memory` (one that costs no
// virtual time: the switch reduced). Skipped where a buffer is phantom.
template <class Memory>
void switch_result(const switch_meeting& m, Memory& memory) {
  for (const auto& part : m.parts) {
    if (is_phantom(part.in.data()) || is_phantom(part.out.data())) return;
  }
  const std::size_t k = m.parts.size();
  if (m.kind == collective::allgather || m.kind == collective::allgatherv) {
    std::vector<std::byte> all;  // the blocks first: a member's block may lie in its output
    for (const auto& part : m.parts) all.insert(all.end(), part.in.begin(), part.in.end());
    for (const auto& part : m.parts) std::memcpy(part.out.data(), all.data(), all.size());
    return;
  }
  // The reduction in member order, of the whole input (allreduce) or of each block.
  const std::size_t n = m.parts.front().in.size();
  std::vector<std::byte> sum(m.parts.front().in.begin(), m.parts.front().in.end());
  for (std::size_t i = 1; i < k && n > 0; ++i)
    m.parts[i].combine->apply_in(memory, sum, sum, m.parts[i].in);
  if (m.kind == collective::allreduce) {
    for (const auto& part : m.parts) std::memcpy(part.out.data(), sum.data(), n);
    return;
  }
  const std::size_t block = n / k;
  for (std::size_t i = 0; i < k; ++i)
    std::memcpy(m.parts[i].out.data(), sum.data() + i * block, block);
}

}  // namespace weft::sim::detail
