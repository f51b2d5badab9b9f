// weft/algorithms/pairwise.hpp — pairwise exchange: one partner per step.
//
// What it does
//   alltoall(v)  1. Post the receive of every other rank's block, straight into place (so a
//                   partner that runs ahead never lands in the transport's unexpected queue),
//                   then copy this rank's own block while they fill.
//                2. At step k = 1 .. p-1, send the block for rank r + k to it and wait for the
//                   block from rank r - k: one partner per step on the sending side.
// Cost per rank (n bytes per block)
//   p-1 steps, (p-1) * n bytes sent, no copies beyond the own block
// Preconditions
//   Any p >= 1 and any counts (alltoallv: per-peer counts, matching on both sides).
// When to prefer it
//   Medium and large blocks: every byte crosses the network once and each step has a single
//   partner, so links are not oversubscribed. Bruck wins for tiny blocks on many ranks.
#pragma once

#include "weft/communicator.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/tuning/cost_model.hpp"

#include <string_view>

namespace weft {

struct pairwise {
  static constexpr std::string_view name = "pairwise";
  static constexpr bool keeps_rank_order = true;

  template <class Comm>
  static void alltoall(Comm& comm, detail::const_bytes in, detail::bytes out) {
    const auto blocks =
        comm.equal_blocks(0, comm.size(), in.size() / static_cast<std::size_t>(comm.size()));
    alltoallv(comm, in, blocks, out, blocks);
  }

  template <class Comm>
  static void alltoallv(Comm& comm, detail::const_bytes in, detail::layout in_blocks,
                        detail::bytes out, detail::layout out_blocks) {
    const int p = comm.size();
    const int r = comm.rank();
    auto receives = comm.requests(static_cast<std::size_t>(p));  // receives[k]: step k's
    for (int k = 1; k < p; ++k) {
      const int from = detail::mod(r - k, p);
      receives[static_cast<std::size_t>(k)] =
          comm.recv(from, out.subspan(out_blocks.offset(from), out_blocks.size(from)));
    }
    comm.copy(out.subspan(out_blocks.offset(r), out_blocks.size(r)),
              in.subspan(in_blocks.offset(r), in_blocks.size(r)));
    for (int k = 1; k < p; ++k) {
      const int to = detail::mod(r + k, p);
      comm.next_step();
      auto send = comm.send(to, in.subspan(in_blocks.offset(to), in_blocks.size(to)));
      comm.wait(receives[static_cast<std::size_t>(k)]);
      comm.wait(send);
    }
  }

  static constexpr tuning::cost cost(collective kind, int p, double bytes, double) {
    if (kind == collective::alltoall || kind == collective::alltoallv) {
      return {p - 1.0, (p - 1.0) * bytes, 0};
    }
    return tuning::unsupported;
  }
};

}  // namespace weft
