// weft/algorithms/in_switch.hpp — in_switch: the switch the ranks hang off reduces (NVLink
// SHARP, InfiniBand SHARP).
//
// What it does
//   Runs on a transport whose switch reduces (weft::in_switch_transport: today the simulator's
//   machines whose NVLink switches, or one-tier network, reduce). Every rank posts its part
//   once; the switch meets the parts of the communicator's ranks:
//   allreduce       each rank asks the switch for its 1/p of the result (the switch reads that
//                   share from all p ranks and returns the reduction), then stores it to all p
//                   at once: NVLink SHARP's multimem loads and stores, as NCCL's NVLS runs them.
//   reduce_scatter  the first half: rank j receives block j of the reduction.
//   allgather(v)    the second half: each rank's block, sent once, is copied to every rank.
// Cost per rank (n bytes, p ranks)
//   One operation: allreduce carries (1 + 1/p) n on each port in each direction, whatever p (a
//   ring carries 2(p-1)/p n and takes 2(p-1) steps); reduce_scatter n up and n/p down. The
//   switch's rate and latency are the transport's (weft/transport/sim/machines.hpp says where
//   the figures come from).
// Preconditions
//   The communicator's ranks hang off one switch that reduces (a group of them is fine: each
//   node's ranks in weft::hierarchical<weft::in_switch, ...>). Commutative reductions: the
//   switch's order is its own.
// When to prefer it
//   Large allreduces inside an NVLink domain: on 8 H100s NCCL's NVLS reaches 480 GB/s busbw
//   where its ring reaches 370 (docs/simulator.md). weft::automatic offers it where the
//   transport says the ranks share such a switch, costed with the transport's own time.
#pragma once

#include "weft/communicator.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/hosts.hpp"
#include "weft/transport.hpp"
#include "weft/tuning/cost_model.hpp"

#include <algorithm>
#include <string_view>
#include <vector>

namespace weft {

struct in_switch {
  static constexpr std::string_view name = "in_switch";
  static constexpr bool keeps_rank_order = false;

  template <class Comm>
  requires in_switch_transport<typename Comm::transport_type>
  static void allreduce(Comm& comm, detail::const_bytes in, detail::bytes out,
                        const detail::reducer& combine) {
    run(comm, in, out, &combine);
  }

  template <class Comm>
  requires in_switch_transport<typename Comm::transport_type>
  static void reduce_scatter(Comm& comm, detail::const_bytes in, detail::bytes out,
                             const detail::reducer& combine) {
    run(comm, in, out, &combine);
  }

  template <class Comm>
  requires in_switch_transport<typename Comm::transport_type>
  static void allgather(Comm& comm, detail::const_bytes in, detail::bytes out) {
    run(comm, in, out, nullptr);
  }

  // The switch places the blocks in rank order, one after another: `blocks` must say the same.
  template <class Comm>
  requires in_switch_transport<typename Comm::transport_type>
  static void allgatherv(Comm& comm, detail::const_bytes in, detail::bytes out,
                         detail::layout blocks) {
    if (blocks.size(comm.rank()) != in.size() || blocks.offset(comm.size()) != out.size()) {
      throw error(errc::invalid_argument,
                  "rank " + std::to_string(comm.rank()) +
                      ": in_switch allgatherv: the blocks "
                      "do not fill the output in rank order; nothing was sent");
    }
    run(comm, in, out, nullptr);
  }

  // A stand-in for weft::hierarchical's sums (2 steps: up and down; the bytes a port carries).
  // weft::automatic costs in_switch itself by the transport's time (estimate_us).
  static constexpr tuning::cost cost(collective kind, int p, double bytes, double /*chunk*/) {
    switch (kind) {
      case collective::allreduce:
        return {2, bytes + bytes / p, 0};
      case collective::reduce_scatter:
        return {2, bytes * p, 0};  // bytes: one rank's block
      case collective::allgather:
      case collective::allgatherv:
        return {2, bytes * p, 0};
      default:
        return tuning::unsupported;
    }
  }

  // weft::automatic's estimate: the transport's time where the ranks share a switch that
  // reduces, never elsewhere.
  template <class Comm>
  static double estimate_us(Comm& comm, collective kind, double bytes,
                            const tuning::link_constants&, const tuning::link_constants&) {
    auto& t = comm.underlying_transport();
    const auto members = comm.transport_ranks();
    if (!t.switch_reduces(members)) return tuning::never;
    switch (kind) {
      case collective::allreduce:
        return t.in_switch_us(kind, members, bytes);
      case collective::reduce_scatter:
      case collective::allgather:
        return t.in_switch_us(kind, members, bytes * comm.size());  // bytes: one rank's block
      default:
        return tuning::never;
    }
  }

  // weft::hierarchical's first tier: the time of a phase on each host's ranks (`bytes`: one
  // rank's block), never where some host's ranks do not share a switch that reduces.
  template <class Comm>
  static double host_us(Comm& comm, const host_layout& layout, collective kind, double bytes) {
    if (kind != collective::reduce_scatter && kind != collective::allgather &&
        kind != collective::allgatherv)
      return tuning::never;
    double slowest = 0;
    std::vector<int> members;
    for (int g = 0; g < layout.hosts(); ++g) {
      members.clear();
      for (const int r : layout.ranks_on(g)) members.push_back(comm.transport_rank(r));
      auto& t = comm.underlying_transport();
      if (!t.switch_reduces(members)) return tuning::never;
      slowest = std::max(
          slowest, t.in_switch_us(kind, members, bytes * static_cast<double>(members.size())));
    }
    return slowest;
  }

 private:
  template <class Comm>
  static void run(Comm& comm, detail::const_bytes in, detail::bytes out,
                  const detail::reducer* combine) {
    comm.next_step();
    auto part = comm.post_in_switch(in, out, combine);
    comm.wait(part);
  }
};

}  // namespace weft
