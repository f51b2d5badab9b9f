// weft/detail/pipeline.hpp — one exchange step cut into chunks, with the reduction of each
// chunk overlapping the transfer of the next.
//
// Sends `source` to rank `to` and receives from rank `from` into `target`, reduced with `own`
// (target = own op incoming), in pieces of comm.chunk_bytes(): two receives and two sends are
// in flight, and chunk j is reduced (at its wait, from a chunk-sized staging slot that stays in
// cache) while chunk j+1 is on its way. Ring's reduce-scatter steps (to = right, from = left)
// and recursive halving's steps (to = from = partner) are both this loop.
#pragma once

#include "weft/detail/bytes.hpp"

#include <algorithm>
#include <cstddef>

namespace weft::detail {

// `slots` holds two chunks of staging (2 * comm.chunk_bytes(element size) bytes).
template <class Comm, class Reducer>
void exchange_reduce(Comm& comm, int to, const_bytes source, int from, bytes target, const_bytes own,
                     const Reducer& combine, bytes slots) {
  const std::size_t chunk = comm.chunk_bytes(combine.element_size());
  const std::size_t send_pieces = chunk_count(source.size(), chunk);
  const std::size_t recv_pieces = chunk_count(target.size(), chunk);
  typename Comm::pending receives[2];
  typename Comm::pending sends[2];
  auto post = [&](std::size_t j) {
    if (j < recv_pieces) {
      const bytes into = piece(target, j, chunk);
      receives[j % 2] = comm.recv_reduce(from, into, piece(own, j, chunk), combine,
                                         slots.subspan((j % 2) * chunk, into.size()));
    }
    if (j < send_pieces) sends[j % 2] = comm.send(to, piece(source, j, chunk));
  };
  post(0);
  for (std::size_t j = 0; j < std::max(send_pieces, recv_pieces); ++j) {
    post(j + 1);  // slot (j+1) % 2 held chunk j-1, finished in the last iteration
    comm.wait(receives[j % 2]);
    comm.wait(sends[j % 2]);
  }
}

}  // namespace weft::detail
