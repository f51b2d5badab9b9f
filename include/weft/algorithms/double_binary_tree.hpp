// weft/algorithms/double_binary_tree.hpp — two complementary binary trees, as NCCL's tree.
//
// In one binary tree the leaves (half the ranks) only send and never forward, so half the
// links idle. Two trees fix that: a rank that is a leaf in one tree is an inner node in the
// other. Each tree carries half of the vector, so every rank sends and receives at full rate.
//
// Tree shape (tree 0): rank 0 is the root and has one child, the largest power of two below p.
// Any other rank r with lowest set bit b has parent (r - b) | 2b (or r - b when that is >= p)
// and children r - b/2 and r + b/2 (the latter moved down while >= p). Tree 1 is tree 0 shifted
// by one rank when p is even and mirrored (r -> p-1-r) when p is odd.
//
// What it does (for each tree, on its half of the vector, both trees interleaved)
//   1. reduce up, chunk by chunk: receive the children's partial results, reduce them with
//      this rank's data, send the result to the parent — chunk j+1 travels while j is reduced;
//   2. broadcast down, chunk by chunk: receive the result from the parent, pass it to the
//      children. The root alone computes the final value, so every rank ends with its bits.
// Cost per rank (n bytes)
//   2 * (depth + n / (2 * chunk)) steps with depth = ceil(log2 p); about 2n bytes sent and
//   n bytes reduced per rank (an inner node reduces two children's halves).
// Preconditions
//   Any p >= 1 and any count. Commutative reductions only.
// When to prefer it
//   Medium to large messages on many ranks, where ring's 2(p-1) steps of latency dominate but
//   the message is too large for recursive doubling's n * log2 p bytes.
#pragma once

#include "weft/communicator.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/tuning/cost_model.hpp"

#include <algorithm>
#include <array>
#include <string_view>

namespace weft {

struct double_binary_tree {
  static constexpr std::string_view name = "double_binary_tree";
  static constexpr bool keeps_rank_order = false;

  struct links {
    int parent = -1;
    std::array<int, 2> children{-1, -1};
  };

  // This rank's place in tree 0 (see the header comment).
  static constexpr links tree_zero(int p, int r) {
    links result;
    if (r == 0) {
      int child = 1;
      while (child * 2 < p) child *= 2;
      if (p > 1) result.children[1] = child;
      return result;
    }
    const int bit = r & -r;
    result.parent = (r ^ bit) | (bit << 1);
    if (result.parent >= p) result.parent = r ^ bit;
    if (bit > 1) {
      result.children[0] = r - bit / 2;
      for (int low = bit / 2; low > 0; low /= 2) {
        if (r + low < p) {
          result.children[1] = r + low;
          break;
        }
      }
    }
    return result;
  }

  // This rank's place in tree `which` (0 or 1).
  static constexpr links tree(int which, int p, int r) {
    if (which == 0) return tree_zero(p, r);
    auto to_tree = [&](int rank) { return p % 2 == 0 ? detail::mod(rank - 1, p) : p - 1 - rank; };
    auto from_tree = [&](int rank) {
      if (rank < 0) return -1;
      return p % 2 == 0 ? detail::mod(rank + 1, p) : p - 1 - rank;
    };
    links shape = tree_zero(p, to_tree(r));
    return {from_tree(shape.parent), {from_tree(shape.children[0]), from_tree(shape.children[1])}};
  }

  template <class Comm>
  static void allreduce(Comm& comm, detail::const_bytes in, detail::bytes out,
                        const detail::reducer& combine) {
    const int p = comm.size();
    if (p == 1) return comm.copy(out, in);
    const std::size_t element = combine.element_size();
    const std::size_t count = out.size() / element;
    const std::size_t chunk = comm.reduce_chunk_bytes(element);
    const std::size_t first_half = (count + 1) / 2 * element;

    struct half_tree {
      links shape;
      detail::bytes out;
      detail::const_bytes in;
      std::size_t pieces;
      std::array<typename Comm::pending, 2> up_sends;
    };
    std::array<half_tree, 2> trees;
    for (int t = 0; t < 2; ++t) {
      auto& tree_state = trees[static_cast<std::size_t>(t)];
      tree_state.shape = tree(t, p, comm.rank());
      tree_state.out = t == 0 ? out.first(first_half) : out.subspan(first_half);
      tree_state.in = t == 0 ? in.first(first_half) : in.subspan(first_half);
      tree_state.pieces = detail::chunk_count(tree_state.out.size(), chunk);
    }
    // Two incoming slots per (tree, child), double-buffered by chunk parity; a slot holds a
    // piece, never larger than the larger half.
    const std::size_t slot_bytes =
        std::min(chunk, std::max(trees[0].out.size(), trees[1].out.size()));
    auto slots = comm.scratch(8 * slot_bytes);
    auto slot = [&](int t, int child, std::size_t j, std::size_t size) {
      const std::size_t index = static_cast<std::size_t>(t * 4 + child * 2) + j % 2;
      return slots.subspan(index * slot_bytes, size);
    };
    const std::size_t pieces = std::max(trees[0].pieces, trees[1].pieces);

    // Phase 1: reduce up both trees.
    std::array<std::array<std::array<typename Comm::pending, 2>, 2>, 2>
        child_receives;  // [t][c][j%2]
    auto post_receives = [&](std::size_t j) {
      for (int t = 0; t < 2; ++t) {
        auto& s = trees[static_cast<std::size_t>(t)];
        if (j >= s.pieces) continue;
        const std::size_t size = detail::piece(s.out, j, chunk).size();
        for (int c = 0; c < 2; ++c) {
          const int child = s.shape.children[static_cast<std::size_t>(c)];
          if (child < 0) continue;
          child_receives[t][c][j % 2] = comm.recv(child, slot(t, c, j, size), t);
        }
      }
    };
    post_receives(0);
    for (std::size_t j = 0; j < pieces; ++j) {
      comm.next_step();
      post_receives(j + 1);
      for (int t = 0; t < 2; ++t) {
        auto& s = trees[static_cast<std::size_t>(t)];
        if (j >= s.pieces) continue;
        const detail::bytes target = detail::piece(s.out, j, chunk);
        detail::const_bytes partial = detail::piece(s.in, j, chunk);
        for (int c = 0; c < 2; ++c) {
          if (s.shape.children[static_cast<std::size_t>(c)] < 0) continue;
          comm.wait(child_receives[t][c][j % 2]);
          combine(target, partial, slot(t, c, j, target.size()));
          partial = target;
        }
        if (s.shape.parent >= 0) {
          comm.wait(s.up_sends[j % 2]);
          s.up_sends[j % 2] = comm.send(s.shape.parent, partial, t);
        } else {
          comm.copy(target, partial);  // the root of a tree without children (p == 1 only)
        }
      }
    }
    for (auto& s : trees) comm.wait_all(s.up_sends[0], s.up_sends[1]);

    // Phase 2: broadcast down both trees, into `out`.
    std::array<std::array<typename Comm::pending, 2>, 2> down_receives;              // [t][j%2]
    std::array<std::array<std::array<typename Comm::pending, 2>, 2>, 2> down_sends;  // [t][c][j%2]
    auto post_down = [&](std::size_t j) {
      for (int t = 0; t < 2; ++t) {
        auto& s = trees[static_cast<std::size_t>(t)];
        if (j < s.pieces && s.shape.parent >= 0) {
          down_receives[t][j % 2] = comm.recv(s.shape.parent, detail::piece(s.out, j, chunk), t);
        }
      }
    };
    post_down(0);
    for (std::size_t j = 0; j < pieces; ++j) {
      comm.next_step();
      post_down(j + 1);
      for (int t = 0; t < 2; ++t) {
        auto& s = trees[static_cast<std::size_t>(t)];
        if (j >= s.pieces) continue;
        if (s.shape.parent >= 0) comm.wait(down_receives[t][j % 2]);
        for (int c = 0; c < 2; ++c) {
          const int child = s.shape.children[static_cast<std::size_t>(c)];
          if (child < 0) continue;
          comm.wait(down_sends[t][c][j % 2]);
          down_sends[t][c][j % 2] =
              comm.send(child, detail::const_bytes(detail::piece(s.out, j, chunk)), t);
        }
      }
    }
    for (auto& per_tree : down_sends) {
      for (auto& per_child : per_tree) comm.wait_all(per_child[0], per_child[1]);
    }
  }

  static constexpr tuning::cost cost(collective kind, int p, double bytes, double chunk_bytes) {
    if (kind != collective::allreduce) return tuning::unsupported;
    const double depth = tuning::log2_ceil(p);
    const double pieces = bytes / 2 > chunk_bytes ? bytes / 2 / chunk_bytes : 1.0;
    return {2 * (depth + pieces), 2 * bytes, bytes};
  }
};

}  // namespace weft
