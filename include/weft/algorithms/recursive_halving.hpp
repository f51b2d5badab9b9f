// weft/algorithms/recursive_halving.hpp — recursive halving, and Rabenseifner's allreduce.
//
// Works on the largest power of two p2 <= p (detail/folding.hpp), like recursive doubling.
//
// What it does
//   reduce_scatter  1. fold: each sitting-out rank sends its input to its partner, which
//                      reduces it;
//                   2. for mask = p2/2, p2/4, ..., 1: the virtual ranks' blocks in play are
//                      halved: exchange the half this rank does not keep with virtual rank
//                      v ^ mask and reduce the half it keeps — after log2(p2) steps virtual
//                      rank v holds its own block(s), fully reduced;
//                   3. the partner hands the sitting-out rank its block.
//   allreduce       Rabenseifner: the halving reduce_scatter above on p2 balanced pieces of
//                   the vector, then recursive doubling's allgather of the pieces, then the
//                   result goes back to the ranks that sat out. Each piece is reduced on one
//                   rank only, so all ranks end with the same bits.
// Cost per rank (n bytes; reduce_scatter: n bytes per rank's block)
//   allreduce       2 * log2(p2) (+2) steps, about 2n bytes sent, n bytes reduced
//   reduce_scatter  log2(p2) (+2) steps, about (p-1) * n bytes sent and reduced
// Preconditions
//   Any p >= 1 and any count. Commutative reductions only (halves combine out of rank order).
// When to prefer it
//   Large messages on many ranks: ring's bytes with logarithmic steps. Each exchange is
//   pipelined in chunks, the reduction overlapping the transfer. Scratch: two chunks, plus the
//   input's size when p is not a power of two (allreduce) or always (reduce_scatter).
#pragma once

#include "weft/algorithms/recursive_doubling.hpp"
#include "weft/communicator.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/detail/folding.hpp"
#include "weft/detail/pipeline.hpp"
#include "weft/tuning/cost_model.hpp"

#include <string_view>

namespace weft {

struct recursive_halving {
  static constexpr std::string_view name = "recursive_halving";
  static constexpr bool keeps_rank_order = false;

  template <class Comm>
  static void allreduce(Comm& comm, detail::const_bytes in, detail::bytes out,
                        const detail::reducer& combine) {
    const int p = comm.size();
    const int r = comm.rank();
    if (p == 1) return comm.copy(out, in);
    const detail::folding fold(p);
    const bool folds = fold.p2 != p;
    const std::size_t slots_size = comm.reduce_staging_bytes(combine.element_size(), out.size());
    const detail::bytes scratch = comm.scratch(slots_size + (folds ? out.size() : 0));
    // Without folding, the first halving step reads `in` and reduces into `out`: no copy.
    detail::const_bytes first = in;
    if (folds) {
      comm.copy(out, in);
      first = out;
      if (!fold_in(comm, fold, out, out, scratch.subspan(slots_size), combine)) return;
    }
    auto displs = comm.indices(0, static_cast<std::size_t>(fold.p2) + 1);
    detail::balanced_displacements(displs, out.size() / combine.element_size(), fold.p2,
                                   combine.element_size());
    const detail::layout pieces{displs};
    halving_steps(comm, fold, pieces, first, out, scratch.first(slots_size), combine);
    recursive_doubling::doubling_allgather(comm, fold, pieces, out);
    if (fold.absorbs(r)) {
      comm.next_step();
      auto send = comm.send(r - 1, detail::const_bytes(out));
      comm.wait(send);
    }
  }

  template <class Comm>
  static void reduce_scatter(Comm& comm, detail::const_bytes in, detail::bytes out,
                             const detail::reducer& combine) {
    const int p = comm.size();
    const int r = comm.rank();
    if (p == 1) return comm.copy(out, in.first(out.size()));  // one rank: in is out-sized
    const detail::folding fold(p);
    const std::size_t n = out.size();
    const std::size_t slots_size = comm.reduce_staging_bytes(combine.element_size(), in.size());
    auto scratch = comm.scratch(2 * in.size() + slots_size);
    const detail::bytes work = scratch.first(in.size());
    const detail::bytes incoming = scratch.subspan(in.size(), in.size());
    comm.copy(work, in);
    if (!fold_in(comm, fold, work, out, incoming, combine)) return;
    // Virtual rank u's block is the blocks of real ranks [first_rank(u), end_rank(u)).
    auto displs = comm.indices(0, static_cast<std::size_t>(fold.p2) + 1);
    for (int u = 0; u < fold.p2; ++u) {
      displs[static_cast<std::size_t>(u)] = static_cast<std::size_t>(fold.first_rank(u)) * n;
    }
    displs[static_cast<std::size_t>(fold.p2)] = in.size();
    halving_steps(comm, fold, detail::layout{displs}, work, work, scratch.subspan(2 * in.size()),
                  combine);
    if (fold.absorbs(r)) {
      comm.next_step();
      auto send = comm.send(
          r - 1, detail::const_bytes(work.subspan(static_cast<std::size_t>(r - 1) * n, n)));
      comm.wait(send);
    }
    comm.copy(out, work.subspan(static_cast<std::size_t>(r) * n, n));
  }

  static constexpr tuning::cost cost(collective kind, int p, double bytes, double) {
    const bool power_of_two = tuning::is_power_of_two(p);
    const double steps = tuning::log2_ceil(p) + (power_of_two ? 0 : 1);
    const double share = (p - 1.0) / p;
    switch (kind) {
      case collective::allreduce:
        return {2 * steps, 2 * share * bytes + (power_of_two ? 0 : 2 * bytes),
                share * bytes + (power_of_two ? 0 : bytes)};
      case collective::reduce_scatter:
        return {steps, (p - 1.0) * bytes + (power_of_two ? 0 : p * bytes), (p - 1.0) * bytes};
      default:
        return tuning::unsupported;
    }
  }

 private:
  // Step 1 for every rank. A rank that sits out sends `data` to its partner, receives its
  // share of the result into `result`, and returns false; an absorbing rank reduces its
  // partner's data into `data`. Returns true for ranks that go on.
  template <class Comm>
  static bool fold_in(Comm& comm, const detail::folding& fold, detail::bytes data,
                      detail::bytes result, detail::bytes incoming,
                      const detail::reducer& combine) {
    const int r = comm.rank();
    if (fold.sits_out(r)) {
      comm.next_step();
      auto send = comm.send(r + 1, detail::const_bytes(data));
      comm.wait(send);
      comm.next_step();
      auto receive = comm.recv(r + 1, result);
      comm.wait(receive);
      return false;
    }
    if (fold.absorbs(r)) {
      comm.next_step();
      auto receive = comm.recv(r - 1, incoming.first(data.size()));
      comm.wait(receive);
      combine(data, incoming.first(data.size()), data);
    }
    return true;
  }

  // Step 2: the virtual ranks' pieces halve each step; afterwards this rank's virtual piece of
  // `work` is reduced over all ranks. The first step reads this rank's data from `first` (the
  // input, or `work` itself), later ones from `work`. Each exchange is pipelined in chunks
  // (detail::exchange_reduce), so the reduction overlaps the transfer; `slots` is its staging.
  template <class Comm>
  static void halving_steps(Comm& comm, const detail::folding& fold, detail::layout pieces,
                            detail::const_bytes first, detail::bytes work, detail::bytes slots,
                            const detail::reducer& combine) {
    const int v = fold.virtual_rank(comm.rank());
    for (int mask = fold.p2 / 2; mask >= 1; mask >>= 1) {
      const int partner = fold.real_rank(v ^ mask);
      const int base = v & ~(2 * mask - 1);
      const int keep_first = (v & mask) ? base + mask : base;
      const int give_first = (v & mask) ? base : base + mask;
      const std::size_t keep_offset = pieces.offset(keep_first);
      const std::size_t keep_size = pieces.span_size(keep_first, keep_first + mask);
      const detail::const_bytes mine = mask == fold.p2 / 2 ? first : detail::const_bytes(work);
      comm.next_step();
      detail::exchange_reduce(
          comm, partner,
          mine.subspan(pieces.offset(give_first), pieces.span_size(give_first, give_first + mask)),
          partner, work.subspan(keep_offset, keep_size), mine.subspan(keep_offset, keep_size),
          combine, slots);
    }
  }
};

}  // namespace weft
