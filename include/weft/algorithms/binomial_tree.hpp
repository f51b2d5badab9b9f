// weft/algorithms/binomial_tree.hpp — binomial tree: the reach doubles every step.
//
// Ranks are numbered relative to the root, v = (rank - root) mod p. In a binomial tree the
// parent of v is v with its lowest set bit cleared, and the subtree of v holds the relative
// ranks [v, v + lowbit(v)) (clipped at p), so every subtree is a contiguous range.
//
// What it does
//   broadcast  1. Receive the data from the parent (the root skips this).
//              2. Send it to the children v + 2^k, largest subtree first.
//   reduce     1. Receive each child's partial result, smallest subtree first, and reduce:
//                 own range first, then the child's range (rank order is kept).
//              2. Send the partial result to the parent.
//              Non-commutative ops run the tree rooted at rank 0, so the order is 0, 1, ...,
//              p-1, and rank 0 then sends the result to the root (one extra step).
//   gather     1. Collect the blocks of the subtree, contiguous in relative order, from the
//                 children; 2. send them to the parent. The root rotates them into rank order.
//   scatter    The reverse of gather: the root rotates into relative order, then each rank
//              receives its subtree's blocks and passes each child its part.
// Cost per rank (n bytes of data, or n bytes per rank's block for gather/scatter)
//   broadcast, reduce  ceil(log2 p) steps, up to ceil(log2 p) * n bytes sent (at the root)
//   gather, scatter    ceil(log2 p) steps, (p-1) * n bytes through the root
// Preconditions
//   Any p >= 1 and any count; reduce works for non-commutative ops.
// When to prefer it
//   Small and medium messages: the number of steps is logarithmic. For large broadcasts the
//   pipelined ring chain moves fewer bytes through the root.
#pragma once

#include "weft/communicator.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/tuning/cost_model.hpp"

#include <algorithm>
#include <string_view>

namespace weft {

struct binomial_tree {
  static constexpr std::string_view name = "binomial_tree";
  static constexpr bool keeps_rank_order = true;

  template <class Comm>
  static void broadcast(Comm& comm, detail::bytes data, int root) {
    const int p = comm.size();
    const int v = detail::mod(comm.rank() - root, p);
    auto absolute = [&](int relative) { return detail::mod(relative + root, p); };
    int mask = 1;
    for (; mask < p; mask <<= 1) {
      if (v & mask) {
        comm.next_step();
        auto receive = comm.recv(absolute(v - mask), data);
        comm.wait(receive);
        break;
      }
    }
    auto sends = comm.requests(32);
    std::size_t posted = 0;
    for (mask >>= 1; mask > 0; mask >>= 1) {
      if (v + mask < p) {
        comm.next_step();
        sends[posted++] = comm.send(absolute(v + mask), detail::const_bytes(data));
      }
    }
    comm.wait_each(sends.first(posted));
  }

  template <class Comm>
  static void reduce(Comm& comm, detail::const_bytes in, detail::bytes out,
                     const detail::reducer& combine, int root) {
    const int p = comm.size();
    const int r = comm.rank();
    // Rooted at 0 for non-commutative ops, so relative order is rank order.
    const int tree_root = combine.commutative() ? root : 0;
    const int v = detail::mod(r - tree_root, p);
    auto absolute = [&](int relative) { return detail::mod(relative + tree_root, p); };
    const std::size_t n = in.size();
    auto scratch = comm.scratch(2 * n);
    const detail::bytes accumulator = (r == root && r == tree_root) ? out : scratch.first(n);
    const detail::bytes incoming = scratch.subspan(n, n);
    detail::const_bytes partial = in;  // what this rank holds so far

    for (int mask = 1; mask < p; mask <<= 1) {
      if (v & mask) {
        comm.next_step();
        auto send = comm.send(absolute(v - mask), partial);
        comm.wait(send);
        break;
      }
      if (v + mask < p) {
        comm.next_step();
        auto receive = comm.recv(absolute(v + mask), incoming);
        comm.wait(receive);
        combine(accumulator, partial, incoming);
        partial = accumulator;
      }
    }
    if (tree_root == root) {
      if (r == root) comm.copy(out, partial);
      return;
    }
    // Non-commutative op with root != 0: rank 0 holds the result and hands it to the root.
    if (r == tree_root) {
      comm.next_step();
      auto send = comm.send(root, partial);
      comm.wait(send);
    } else if (r == root) {
      comm.next_step();
      auto receive = comm.recv(tree_root, out);
      comm.wait(receive);
    }
  }

  template <class Comm>
  static void gather(Comm& comm, detail::const_bytes in, detail::bytes out, int root) {
    const int p = comm.size();
    const int r = comm.rank();
    const int v = detail::mod(r - root, p);
    const std::size_t n = in.size();
    auto absolute = [&](int relative) { return detail::mod(relative + root, p); };
    // Blocks of relative ranks [v, v + subtree) collect here in relative order.
    const int subtree = v == 0 ? p : std::min(v & -v, p - v);
    const detail::bytes collected =
        (v == 0 && root == 0) ? out : comm.scratch(static_cast<std::size_t>(subtree) * n);
    comm.copy(collected.first(n), in);

    auto receives = comm.requests(32);
    std::size_t posted = 0;
    int mask = 1;
    for (; mask < p && !(v & mask); mask <<= 1) {
      const int child = v + mask;
      if (child >= p) continue;
      const auto blocks = static_cast<std::size_t>(std::min(mask, p - child));
      comm.next_step();
      receives[posted++] = comm.recv(
          absolute(child), collected.subspan(static_cast<std::size_t>(mask) * n, blocks * n));
    }
    comm.wait_each(receives.first(posted));
    if (v != 0) {
      comm.next_step();
      auto send = comm.send(absolute(v - mask), detail::const_bytes(collected));
      comm.wait(send);
    } else if (root != 0) {
      // relative [0, p-root) is absolute [root, p); relative [p-root, p) is absolute [0, root)
      const std::size_t tail = static_cast<std::size_t>(p - root) * n;
      comm.copy(out.subspan(static_cast<std::size_t>(root) * n, tail), collected.first(tail));
      comm.copy(out.first(static_cast<std::size_t>(root) * n), collected.subspan(tail));
    }
  }

  template <class Comm>
  static void scatter(Comm& comm, detail::const_bytes in, detail::bytes out, int root) {
    const int p = comm.size();
    const int r = comm.rank();
    const int v = detail::mod(r - root, p);
    const std::size_t n = out.size();
    auto absolute = [&](int relative) { return detail::mod(relative + root, p); };
    const int subtree = v == 0 ? p : std::min(v & -v, p - v);

    detail::const_bytes holding;  // blocks of relative ranks [v, v + subtree), relative order
    int mask = 1;
    for (; mask < p && !(v & mask); mask <<= 1) {
    }
    if (v == 0) {
      if (root == 0) {
        holding = in;
      } else {
        auto rotated = comm.scratch(static_cast<std::size_t>(p) * n);
        const std::size_t tail = static_cast<std::size_t>(p - root) * n;
        comm.copy(rotated.first(tail), in.subspan(static_cast<std::size_t>(root) * n, tail));
        comm.copy(rotated.subspan(tail), in.first(static_cast<std::size_t>(root) * n));
        holding = rotated;
      }
    } else {
      const detail::bytes buffer =
          subtree == 1 ? out : comm.scratch(static_cast<std::size_t>(subtree) * n);
      comm.next_step();
      auto receive = comm.recv(absolute(v - mask), buffer);
      comm.wait(receive);
      holding = buffer;
    }
    auto sends = comm.requests(32);
    std::size_t posted = 0;
    for (mask >>= 1; mask > 0; mask >>= 1) {
      const int child = v + mask;
      if (child >= p) continue;
      const auto blocks = static_cast<std::size_t>(std::min(mask, p - child));
      comm.next_step();
      sends[posted++] = comm.send(absolute(child),
                                  holding.subspan(static_cast<std::size_t>(mask) * n, blocks * n));
    }
    comm.copy(out, holding.first(n));
    comm.wait_each(sends.first(posted));
  }

  static constexpr tuning::cost cost(collective kind, int p, double bytes, double) {
    const double depth = tuning::log2_ceil(p);
    switch (kind) {
      case collective::broadcast:
        return {depth, depth * bytes, 0};
      case collective::reduce:
        return {depth, bytes, depth * bytes};
      case collective::gather:
      case collective::scatter:
        return {depth, (p - 1.0) * bytes, 0};
      default:
        return tuning::unsupported;
    }
  }
};

}  // namespace weft
