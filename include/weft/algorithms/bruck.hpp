// weft/algorithms/bruck.hpp — Bruck: ceil(log2 p) steps for any p, by rotating first.
//
// What it does
//   allgather  1. Put this rank's block first in a scratch buffer whose block i will be rank
//                 (r + i)'s block.
//              2. For distance d = 1, 2, 4, ... < p: send the first min(d, p - d) blocks to rank
//                 r - d and receive as many from rank r + d, appending them after block d-1.
//              3. Rotate the buffer into rank order in the output.
//   alltoall   1. Rotate: scratch block i = the block this rank sends to rank r + i.
//              2. For each bit k with 2^k < p: pack every block whose index has bit k set, send
//                 the pack to rank r + 2^k, receive one from rank r - 2^k, unpack it into the
//                 same positions. Each block moves by its index in binary, one bit a step.
//              3. Undo the rotation: output block (r - i) mod p = scratch block i.
// Cost per rank (n bytes per rank's block)
//   allgather  ceil(log2 p) steps, (p-1) * n bytes sent
//   alltoall   ceil(log2 p) steps, about (p/2) * n * ceil(log2 p) bytes sent, plus local packing
// Preconditions
//   Any p >= 1 and any count; every rank's block has the same size.
// When to prefer it
//   Small blocks on many ranks, where the number of messages dominates: logarithmic steps
//   against pairwise's p-1. For large blocks the extra bytes and copies make pairwise faster.
#pragma once

#include "weft/communicator.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/tuning/cost_model.hpp"

#include <algorithm>
#include <string_view>

namespace weft {

struct bruck {
  static constexpr std::string_view name = "bruck";
  static constexpr bool keeps_rank_order = true;

  template <class Comm>
  static void allgather(Comm& comm, detail::const_bytes in, detail::bytes out) {
    const int p = comm.size();
    const int r = comm.rank();
    const std::size_t n = in.size();
    const auto bytes_of = [n](int blocks) { return static_cast<std::size_t>(blocks) * n; };
    const detail::bytes rotated = comm.scratch(bytes_of(p));
    comm.copy(rotated.first(n), in);
    for (int distance = 1; distance < p; distance *= 2) {
      const int blocks = std::min(distance, p - distance);
      comm.next_step();
      auto receive = comm.recv(detail::mod(r + distance, p),
                               rotated.subspan(bytes_of(distance), bytes_of(blocks)));
      auto send = comm.send(detail::mod(r - distance, p),
                            detail::const_bytes(rotated.first(bytes_of(blocks))));
      comm.wait_all(receive, send);
    }
    // rotated block i is rank (r + i)'s block
    comm.copy(out.subspan(bytes_of(r), bytes_of(p - r)), rotated.first(bytes_of(p - r)));
    comm.copy(out.first(bytes_of(r)), rotated.subspan(bytes_of(p - r)));
  }

  template <class Comm>
  static void alltoall(Comm& comm, detail::const_bytes in, detail::bytes out) {
    const int p = comm.size();
    const int r = comm.rank();
    const std::size_t n = in.size() / static_cast<std::size_t>(p);
    const auto bytes_of = [n](int blocks) { return static_cast<std::size_t>(blocks) * n; };
    const int half = (p + 1) / 2;  // most blocks with one given bit set
    auto scratch = comm.scratch(bytes_of(p) + 2 * bytes_of(half));
    const detail::bytes rotated = scratch.first(bytes_of(p));
    const detail::bytes outgoing = scratch.subspan(bytes_of(p), bytes_of(half));
    const detail::bytes incoming = scratch.subspan(bytes_of(p) + bytes_of(half), bytes_of(half));
    auto block = [&](detail::bytes buffer, int i) { return buffer.subspan(bytes_of(i), n); };

    comm.copy(rotated.first(bytes_of(p - r)), in.subspan(bytes_of(r), bytes_of(p - r)));
    comm.copy(rotated.subspan(bytes_of(p - r)), in.first(bytes_of(r)));
    for (int bit = 1; bit < p; bit *= 2) {
      int packed = 0;
      for (int i = 1; i < p; ++i) {
        if (i & bit) comm.copy(block(outgoing, packed++), block(rotated, i));
      }
      comm.next_step();
      auto receive = comm.recv(detail::mod(r - bit, p), incoming.first(bytes_of(packed)));
      auto send =
          comm.send(detail::mod(r + bit, p), detail::const_bytes(outgoing.first(bytes_of(packed))));
      comm.wait_all(receive, send);
      packed = 0;
      for (int i = 1; i < p; ++i) {
        if (i & bit) comm.copy(block(rotated, i), block(incoming, packed++));
      }
    }
    for (int i = 0; i < p; ++i) comm.copy(block(out, detail::mod(r - i, p)), block(rotated, i));
  }

  static constexpr tuning::cost cost(collective kind, int p, double bytes, double) {
    const double steps = tuning::log2_ceil(p);
    switch (kind) {
      case collective::allgather:
        return {steps, (p - 1.0) * bytes, 0};
      // packing and unpacking cost about as much as sending again
      case collective::alltoall:
        return {steps, 2.0 * (p / 2.0) * bytes * steps, 0};
      default:
        return tuning::unsupported;
    }
  }
};

}  // namespace weft
