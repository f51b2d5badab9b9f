// weft/algorithms/dissemination.hpp — the dissemination barrier.
//
// What it does
//   barrier  For distance d = 1, 2, 4, ... < p: send an empty message to rank r + d and wait
//            for one from rank r - d. After the step with distance d, each rank has heard,
//            directly or through others, from the 2d ranks before it; after ceil(log2 p)
//            steps, from all of them — so no rank leaves before every rank has arrived.
// Cost per rank
//   ceil(log2 p) steps, zero bytes
// Preconditions
//   Any p >= 1.
// When to prefer it
//   Always, for a barrier: it has the fewest steps and, unlike a tree barrier (gather then
//   broadcast), no rank is a hot spot.
#pragma once

#include "weft/communicator.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/tuning/cost_model.hpp"

#include <string_view>

namespace weft {

struct dissemination {
  static constexpr std::string_view name = "dissemination";
  static constexpr bool keeps_rank_order = true;

  template <class Comm>
  static void barrier(Comm& comm) {
    const int p = comm.size();
    const int r = comm.rank();
    for (int distance = 1; distance < p; distance *= 2) {
      comm.next_step();
      auto receive = comm.recv(detail::mod(r - distance, p), detail::bytes{});
      auto send = comm.send(detail::mod(r + distance, p), detail::const_bytes{});
      comm.wait_all(receive, send);
    }
  }

  static constexpr tuning::cost cost(collective kind, int p, double, double) {
    if (kind == collective::barrier) return {tuning::log2_ceil(p), 0, 0};
    return tuning::unsupported;
  }
};

}  // namespace weft
