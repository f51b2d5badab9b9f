// weft/algorithms/recursive_doubling.hpp — recursive doubling: partners at distance 1, 2, 4, ...
//
// Works on the largest power of two p2 <= p (detail/folding.hpp): the first 2*(p-p2) ranks
// pair up, one of each pair hands its data to the other first and gets the result back last.
//
// What it does
//   allreduce      1. fold: each sitting-out rank sends its vector to its partner, which
//                     reduces it (lower rank first);
//                  2. for mask = 1, 2, 4, ... < p2: exchange the whole vector with virtual rank
//                     v ^ mask and reduce, the lower-ranked operand first — both partners
//                     compute the same value from the same operands, so all ranks end with the
//                     same bits, and rank order is kept (non-commutative ops work);
//                  3. unfold: send the result back to the ranks that sat out.
//   allgather(v)   Same shape, exchanging the blocks gathered so far: after the step with
//                  distance mask a virtual rank holds the blocks of 2*mask virtual ranks.
// Cost per rank (n bytes; for allgather n bytes per rank's block)
//   allreduce   log2(p2) (+2 if p is not a power of two) steps, n * log2(p2) bytes sent and reduced
//   allgather   log2(p2) (+2) steps, (p-1) * n bytes sent
// Preconditions
//   Any p >= 1 and any count. Reductions need only be associative (rank order is kept).
// When to prefer it
//   Small messages: the fewest steps of any allreduce that does not send everything to
//   everyone. It sends n bytes per step, so for large n ring or recursive halving win.
#pragma once

#include "weft/communicator.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/detail/folding.hpp"
#include "weft/tuning/cost_model.hpp"

#include <string_view>

namespace weft {

struct recursive_doubling {
  static constexpr std::string_view name = "recursive_doubling";
  static constexpr bool keeps_rank_order = true;
  // Every element is reduced in the same order wherever it sits in the buffer: allreduces fused
  // into one buffer (weft::group) give the bits separate calls give.
  static constexpr bool same_order_everywhere = true;

  template <class Comm>
  static void allreduce(Comm& comm, detail::const_bytes in, detail::bytes out,
                        const detail::reducer& combine) {
    const int p = comm.size();
    const int r = comm.rank();
    comm.copy(out, in);
    if (p == 1) return;
    const detail::folding fold(p);
    const detail::bytes incoming = comm.scratch(out.size());
    if (fold.sits_out(r)) {
      exchange_with_partner(comm, r + 1, out, out);
      return;
    }
    if (fold.absorbs(r)) {
      comm.next_step();
      auto receive = comm.recv(r - 1, incoming);
      comm.wait(receive);
      combine(out, incoming, out);
    }
    const int v = fold.virtual_rank(r);
    for (int mask = 1; mask < fold.p2; mask <<= 1) {
      const int partner = v ^ mask;
      comm.next_step();
      auto receive = comm.recv(fold.real_rank(partner), incoming);
      auto send = comm.send(fold.real_rank(partner), detail::const_bytes(out));
      comm.wait_all(receive, send);
      if (partner < v) {
        combine(out, incoming, out);
      } else {
        combine(out, out, incoming);
      }
    }
    if (fold.absorbs(r)) {
      comm.next_step();
      auto send = comm.send(r - 1, detail::const_bytes(out));
      comm.wait(send);
    }
  }

  template <class Comm>
  static void allgather(Comm& comm, detail::const_bytes in, detail::bytes out) {
    allgatherv(comm, in, out, comm.equal_blocks(2, comm.size(), in.size()));
  }

  template <class Comm>
  static void allgatherv(Comm& comm, detail::const_bytes in, detail::bytes out,
                         detail::layout blocks) {
    const int p = comm.size();
    const int r = comm.rank();
    comm.copy(out.subspan(blocks.offset(r), blocks.size(r)), in);
    if (p == 1) return;
    const detail::folding fold(p);
    if (fold.sits_out(r)) {
      exchange_with_partner(comm, r + 1, out.subspan(blocks.offset(r), blocks.size(r)), out);
      return;
    }
    if (fold.absorbs(r)) {
      comm.next_step();
      auto receive = comm.recv(r - 1, out.subspan(blocks.offset(r - 1), blocks.size(r - 1)));
      comm.wait(receive);
    }
    // Virtual rank u owns the blocks of real ranks [first_rank(u), end_rank(u)).
    auto virtual_displs = comm.indices(1, static_cast<std::size_t>(fold.p2) + 1);
    for (int u = 0; u < fold.p2; ++u) {
      virtual_displs[static_cast<std::size_t>(u)] = blocks.offset(fold.first_rank(u));
    }
    virtual_displs[static_cast<std::size_t>(fold.p2)] = blocks.offset(p);
    doubling_allgather(comm, fold, detail::layout{virtual_displs}, out);
    if (fold.absorbs(r)) {
      comm.next_step();
      auto send = comm.send(r - 1, detail::const_bytes(out));
      comm.wait(send);
    }
  }

  // Steps of the allgather among virtual ranks: this rank's virtual block is in place in `out`;
  // at the step with distance mask, virtual rank v holds virtual blocks [v & ~(mask-1), +mask)
  // and swaps them for its partner's.
  template <class Comm>
  static void doubling_allgather(Comm& comm, const detail::folding& fold,
                                 detail::layout virtual_blocks, detail::bytes out) {
    const int v = fold.virtual_rank(comm.rank());
    for (int mask = 1; mask < fold.p2; mask <<= 1) {
      const int partner = v ^ mask;
      const int mine_first = v & ~(mask - 1);
      const int theirs_first = partner & ~(mask - 1);
      comm.next_step();
      auto receive =
          comm.recv(fold.real_rank(partner),
                    out.subspan(virtual_blocks.offset(theirs_first),
                                virtual_blocks.span_size(theirs_first, theirs_first + mask)));
      auto send = comm.send(fold.real_rank(partner),
                            detail::const_bytes(out.subspan(
                                virtual_blocks.offset(mine_first),
                                virtual_blocks.span_size(mine_first, mine_first + mask))));
      comm.wait_all(receive, send);
    }
  }

  static constexpr tuning::cost cost(collective kind, int p, double bytes, double) {
    const double steps = tuning::log2_ceil(p) + (tuning::is_power_of_two(p) ? 0 : 1);
    switch (kind) {
      case collective::allreduce:
        return {steps, steps * bytes, steps * bytes};
      case collective::allgather:
      case collective::allgatherv:
        return {steps, (p - 1.0) * bytes, 0};
      default:
        return tuning::unsupported;
    }
  }

 private:
  // A rank that sits out: hand `mine` to the partner, later receive the result into `result`.
  template <class Comm>
  static void exchange_with_partner(Comm& comm, int partner, detail::bytes mine,
                                    detail::bytes result) {
    comm.next_step();
    auto send = comm.send(partner, detail::const_bytes(mine));
    comm.wait(send);
    comm.next_step();
    auto receive = comm.recv(partner, result);
    comm.wait(receive);
  }
};

}  // namespace weft
