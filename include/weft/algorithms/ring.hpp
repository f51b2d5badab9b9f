// weft/algorithms/ring.hpp — ring: every rank talks only to its two neighbours.
//
// What it does
//   reduce_scatter  1. The vector is cut into p blocks. At step k (0 <= k < p-1) rank r sends
//                      block (r-k-1) to the right and receives block (r-k-2) from the left,
//                      reducing it with its own copy; after p-1 steps rank r holds block r,
//                      reduced over all ranks. Each step moves in chunks so that receiving the
//                      next chunk overlaps reducing this one; on a shared-memory transport the
//                      chunk is reduced straight from the sender's buffer (recv_reduce).
//   allgather(v)    1. At step k rank r sends block (r-k) right and receives block (r-k-1) from
//                      the left, straight into the output.
//   allreduce       1. reduce_scatter on p balanced blocks of the vector;
//                   2. allgather of the reduced blocks. Each block is reduced by one chain and
//                      then copied everywhere, so every rank ends with the same bits. The last
//                      reduce-scatter step and the first allgather step overlap: each chunk of
//                      block r goes on to the right as soon as it is reduced (while it is in
//                      cache), rather than the whole block after the last chunk.
//   broadcast       1. A chain root -> root+1 -> ... -> root-1, pipelined in chunks: each rank
//                      forwards chunk j while it receives chunk j+1.
// Cost per rank (n bytes per rank's vector, p ranks)
//   allreduce       2(p-1) steps, 2(p-1)/p * n bytes sent, (p-1)/p * n bytes reduced
//   reduce_scatter  p-1 steps, (p-1) * block bytes sent and reduced
//   allgather       p-1 steps, (p-1) * block bytes sent
//   broadcast       p-1 + n/chunk - 1 steps on the critical path, n bytes sent
// Preconditions
//   Any p >= 1 and any count. Reductions must be commutative (blocks are reduced starting at
//   different ranks).
// When to prefer it
//   Large messages: it sends the minimum possible bytes (bandwidth-optimal), at the price of a
//   latency that grows linearly with p. Recursive halving matches its bytes with log2(p) steps
//   but needs more scratch; trees win for small messages.
#pragma once

#include "weft/communicator.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/detail/pipeline.hpp"
#include "weft/tuning/cost_model.hpp"

#include <algorithm>
#include <string_view>

namespace weft {

struct ring {
  static constexpr std::string_view name = "ring";
  static constexpr bool keeps_rank_order = false;

  template <class Comm>
  static void allreduce(Comm& comm, detail::const_bytes in, detail::bytes out,
                        const detail::reducer& combine) {
    const int p = comm.size();
    if (p == 1) return comm.copy(out, in);
    auto displs = comm.indices(0, static_cast<std::size_t>(p) + 1);
    detail::balanced_displacements(displs, out.size() / combine.element_size(), p,
                                   combine.element_size());
    const detail::layout blocks{displs};
    // Reduced blocks land in `out`; block r-1 (sent first, never reduced here) comes back in
    // the allgather, so out-of-place needs no initial copy.
    // The last reduce-scatter step also does the allgather's first (forward_last).
    reduce_scatter_steps(
        comm, blocks, in, combine,
        [&](int block) { return out.subspan(blocks.offset(block), blocks.size(block)); }, {}, true);
    allgather_steps(comm, blocks, {}, out, 1);
  }

  template <class Comm>
  static void reduce_scatter(Comm& comm, detail::const_bytes in, detail::bytes out,
                             const detail::reducer& combine) {
    const int p = comm.size();
    if (p == 1) return comm.copy(out, in.first(out.size()));  // one rank: in is out-sized
    const detail::layout blocks = comm.equal_blocks(0, p, out.size());
    // Partial sums of the other blocks travel through two block-sized scratch buffers, used in
    // turn: the block received at step k is sent on at step k+1. Our own block lands in `out`.
    const std::size_t staging = comm.reduce_staging_bytes(combine.element_size(), out.size());
    auto scratch = comm.scratch(2 * out.size() + staging);
    const int r = comm.rank();
    reduce_scatter_steps(
        comm, blocks, in, combine,
        [&](int block) {
          if (block == r) return out;
          // block (r-k-2) is received at step k: alternate buffers by step
          const int k = detail::mod(r - block - 2, p);
          return scratch.subspan(static_cast<std::size_t>(k % 2) * out.size(), out.size());
        },
        scratch.subspan(2 * out.size()));
  }

  template <class Comm>
  static void allgather(Comm& comm, detail::const_bytes in, detail::bytes out) {
    allgather_steps(comm, comm.equal_blocks(0, comm.size(), in.size()), in, out);
  }

  template <class Comm>
  static void allgatherv(Comm& comm, detail::const_bytes in, detail::bytes out,
                         detail::layout blocks) {
    allgather_steps(comm, blocks, in, out);
  }

  template <class Comm>
  static void broadcast(Comm& comm, detail::bytes data, int root) {
    const int p = comm.size();
    const int r = comm.rank();
    const int position = detail::mod(r - root, p);  // 0 at the root, p-1 at the chain's end
    const bool has_left = position > 0;
    const bool has_right = position < p - 1;
    const std::size_t chunk = comm.settings().chunk_bytes;
    const std::size_t pieces = detail::chunk_count(data.size(), chunk);
    const int left = detail::mod(r - 1, p);
    const int right = detail::mod(r + 1, p);
    typename Comm::pending receives[2];
    typename Comm::pending sends[2];
    if (has_left && pieces > 0) receives[0] = comm.recv(left, detail::piece(data, 0, chunk));
    for (std::size_t j = 0; j < pieces; ++j) {
      comm.next_step();
      if (has_left) {
        if (j + 1 < pieces)
          receives[(j + 1) % 2] = comm.recv(left, detail::piece(data, j + 1, chunk));
        comm.wait(receives[j % 2]);
      }
      if (has_right) {
        comm.wait(sends[j % 2]);  // the send of chunk j-2 used this slot
        sends[j % 2] = comm.send(right, detail::piece(detail::const_bytes(data), j, chunk));
      }
    }
    comm.wait_all(sends[0], sends[1]);
  }

  static constexpr tuning::cost cost(collective kind, int p, double bytes, double chunk_bytes) {
    const double share = (p - 1.0) / p;
    switch (kind) {
      case collective::allreduce:
        return {2.0 * (p - 1), 2 * share * bytes, share * bytes};
      case collective::reduce_scatter:
        return {p - 1.0, (p - 1.0) * bytes, (p - 1.0) * bytes};
      case collective::allgather:
      case collective::allgatherv:
        return {p - 1.0, (p - 1.0) * bytes, 0};
      case collective::broadcast: {
        const double pieces = bytes > chunk_bytes ? bytes / chunk_bytes : 1.0;
        return {p - 2.0 + pieces, bytes + (p - 2.0) * bytes / pieces, 0};
      }
      default:
        return tuning::unsupported;
    }
  }

 private:
  // The p-1 reduce-scatter steps. destination(b) is where the reduced block b is accumulated
  // (and sent on from); `slots` is scratch for two incoming chunks (taken from comm.scratch if
  // empty). With `forward_last` (allreduce) the last step, which finishes block r, and the
  // allgather's first step, which sends it on and receives block r-1 into destination(r-1),
  // overlap in one exchange: each chunk goes on as soon as it is reduced, while it is still in
  // cache. They count as the two steps they are.
  template <class Comm, class Destination>
  static void reduce_scatter_steps(Comm& comm, detail::layout blocks, detail::const_bytes in,
                                   const detail::reducer& combine, Destination&& destination,
                                   detail::bytes slots = {}, bool forward_last = false) {
    const int p = comm.size();
    const int r = comm.rank();
    const int left = detail::mod(r - 1, p);
    const int right = detail::mod(r + 1, p);
    if (slots.empty())
      slots = comm.scratch(comm.reduce_staging_bytes(combine.element_size(), blocks.largest()));
    for (int k = 0; k < p - 1; ++k) {
      comm.next_step();
      const int send_block = detail::mod(r - k - 1, p);
      const int recv_block = detail::mod(r - k - 2, p);
      const detail::const_bytes source =
          k == 0 ? in.subspan(blocks.offset(send_block), blocks.size(send_block))
                 : detail::const_bytes(destination(send_block));
      const detail::const_bytes own =
          in.subspan(blocks.offset(recv_block), blocks.size(recv_block));
      // Chunk j arrives reduced into place (target = own op incoming) while chunk j+1 is on
      // its way.
      if (forward_last && k == p - 2) {  // recv_block is r: finished here, then sent on
        detail::exchange_reduce_forward(comm, right, source, left, destination(recv_block), own,
                                        destination(left), combine, slots);
        comm.next_step();  // the allgather's first step, done by the exchange above
      } else {
        detail::exchange_reduce(comm, right, source, left, destination(recv_block), own, combine,
                                slots);
      }
    }
  }

  // The p-1 allgather steps over `blocks` of `out`. If `own` is not empty it is this rank's
  // block (sent from there and copied into place); otherwise the block is already in `out`.
  template <class Comm>
  static void allgather_steps(Comm& comm, detail::layout blocks, detail::const_bytes own,
                              detail::bytes out, int first_step = 0) {
    const int p = comm.size();
    const int r = comm.rank();
    auto block = [&](int b) { return out.subspan(blocks.offset(b), blocks.size(b)); };
    if (!own.empty()) comm.copy(block(r), own);
    const int left = detail::mod(r - 1, p);
    const int right = detail::mod(r + 1, p);
    for (int k = first_step; k < p - 1; ++k) {
      comm.next_step();
      const int send_block = detail::mod(r - k, p);
      const int recv_block = detail::mod(r - k - 1, p);
      auto receive = comm.recv(left, block(recv_block));
      auto send =
          comm.send(right, k == 0 && !own.empty() ? own : detail::const_bytes(block(send_block)));
      comm.wait_all(receive, send);
    }
  }
};

}  // namespace weft
