// weft/detail/pipeline.hpp — one exchange step cut into chunks, with the reduction of each
// chunk overlapping the transfer of the next.
//
// Sends `source` to rank `to` and receives from rank `from` into `target`, reduced with `own`
// (target = own op incoming), in pieces of comm.reduce_chunk_bytes(): two receives and two
// sends are in flight, and chunk j is reduced (at its wait, from a chunk-sized staging slot that
// stays in cache) while chunk j+1 is on its way. Ring's reduce-scatter steps (to = right,
// from = left) and recursive halving's steps (to = from = partner) are both this loop; ring's
// allreduce ends its reduce-scatter with exchange_reduce_forward, the same loop that also
// passes each finished chunk on.
#pragma once

#include "weft/detail/bytes.hpp"

#include <algorithm>
#include <cstddef>

namespace weft::detail {

// The loop behind both functions below. With Forward, chunk j of `target` goes on to `to` on
// channel 1 once reduced, and `gathered` is received from `from` on channel 1, chunk by chunk.
template <bool Forward, class Comm, class Reducer>
void exchange_chunks(Comm& comm, int to, const_bytes source, int from, bytes target,
                     const_bytes own, bytes gathered, const Reducer& combine, bytes slots) {
  constexpr int forward_channel = 1;  // separates the final chunks from the partial ones
  const std::size_t chunk = comm.reduce_chunk_bytes(combine.element_size());
  const std::size_t send_pieces = chunk_count(source.size(), chunk);
  const std::size_t recv_pieces = chunk_count(target.size(), chunk);
  const std::size_t gather_pieces = Forward ? chunk_count(gathered.size(), chunk) : 0;
  const std::size_t slot = std::min(chunk, target.size());  // staging per incoming piece
  typename Comm::pending receives[2];
  typename Comm::pending sends[2];
  typename Comm::pending forwards[2];
  typename Comm::pending gathers[2];
  auto post = [&](std::size_t j) {
    if (j < recv_pieces) {
      const bytes into = piece(target, j, chunk);
      receives[j % 2] = comm.recv_reduce(from, into, piece(own, j, chunk), combine,
                                         slots.subspan((j % 2) * slot, into.size()));
    }
    if (j < send_pieces) sends[j % 2] = comm.send(to, piece(source, j, chunk));
    if constexpr (Forward) {
      if (j < gather_pieces)
        gathers[j % 2] = comm.recv(from, piece(gathered, j, chunk), forward_channel);
    }
  };
  post(0);
  const std::size_t pieces = std::max({send_pieces, recv_pieces, gather_pieces});
  for (std::size_t j = 0; j < pieces; ++j) {
    post(j + 1);  // the slots (j+1) % 2 held chunk j-1, finished in the last iteration
    comm.wait(receives[j % 2]);
    if (Forward && j < recv_pieces) {
      comm.wait(forwards[j % 2]);  // chunk j-2's
      forwards[j % 2] = comm.send(to, piece(const_bytes(target), j, chunk), forward_channel);
    }
    comm.wait(sends[j % 2]);
    comm.wait(gathers[j % 2]);
  }
  comm.wait_all(forwards[0], forwards[1]);
}

// `slots` holds two pieces of staging (comm.reduce_staging_bytes(element size, target.size())
// bytes, or more).
template <class Comm, class Reducer>
void exchange_reduce(Comm& comm, int to, const_bytes source, int from, bytes target,
                     const_bytes own, const Reducer& combine, bytes slots) {
  exchange_chunks<false>(comm, to, source, from, target, own, {}, combine, slots);
}

// The last reduce-scatter exchange of an allreduce fused with the first allgather exchange.
// As exchange_reduce, and each chunk of `target`, once reduced (it is then final), goes on to
// `to` at once while the chunks of `gathered` (the final block `from` holds) arrive from
// `from`: the reduced chunk is sent while it is still in cache, rather than read back from
// memory a whole block later, and the allgather's traffic overlaps the reduce-scatter's.
// Chunk j of `gathered` depends only on chunk j of what `from` receives, which was posted an
// iteration earlier, so the loop cannot wait on itself around a ring.
template <class Comm, class Reducer>
void exchange_reduce_forward(Comm& comm, int to, const_bytes source, int from, bytes target,
                             const_bytes own, bytes gathered, const Reducer& combine, bytes slots) {
  exchange_chunks<true>(comm, to, source, from, target, own, gathered, combine, slots);
}

}  // namespace weft::detail
