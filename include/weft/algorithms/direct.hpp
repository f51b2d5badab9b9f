// weft/algorithms/direct.hpp — direct (one-shot): everyone talks to everyone at once.
//
// What it does
//   allreduce       Send the whole vector to every other rank, receive all of theirs, and
//                   reduce all p vectors in rank order 0, 1, ..., p-1 — every rank computes the
//                   same expression, so it gets the same bits, and rank order is kept.
//   reduce_scatter  Send block j to rank j, receive every rank's copy of this rank's block,
//                   reduce them in rank order.
//   reduce          Every rank sends to the root, which reduces in rank order.
//   allgather(v)    Send this rank's block to every other rank; receive each block in place.
//   broadcast       The root sends to every other rank.
//   gather/scatter  Every rank sends its block to the root / the root sends each its block.
//   alltoall(v)     Every pair exchanges its block, all messages posted at once.
//   The exchanges with everyone (allreduce, reduce_scatter, allgather, alltoall) post in
//   a shifted order: rank r's k-th receive is from r-k and its k-th send to r+k (mod p),
//   so each rank's first message goes to a different peer, not all of them to rank 0. On 3
//   or more ranks a large block (options::handshake_bytes; 64 KiB over TCP) waits for its
//   receiver's zero-byte word that the receive is posted, as MPI's rendezvous protocol does.
// Cost per rank (n bytes; per-rank block for the gathering ones)
//   1 step; allreduce sends (p-1) * n bytes and reduces (p-1) * n. For the cost model the
//   allreduce counts as p-1 steps: its step is p-1 messages of the whole vector, and each
//   costs a rank about one alpha of its own (posting, matching and completing it, and on a
//   loaded host waking the peer) — on 4 TCP ranks an 8 B direct allreduce took 1.26x as
//   long as recursive doubling's two steps, in 20 of 20 alternating blocks. The other
//   collectives count one step: there the alternatives send the same bytes in sequence, and
//   p-1 blocks in flight at once were faster in 14 of 15 cases from 64 KiB per rank up (4
//   TCP ranks; up to 3x for gather), which only the one step lets the model choose. Their
//   small calls pay for it: at 8 B-1 KiB per rank allgather, reduce_scatter and alltoall
//   took 1.19-1.40x as long as recursive doubling, recursive halving or Bruck.
// Preconditions
//   Any p >= 1 and any count. Scratch of p * n bytes for the reductions.
// When to prefer it
//   The gathering collectives (allgather, alltoall, reduce_scatter, gather, scatter) on few
//   ranks: every block in flight at once. Allreduce only on 3 ranks (where recursive doubling
//   folds and takes 3 steps): it sends the whole vector p-1 times, so it loses quickly as
//   ranks or messages grow.
#pragma once

#include "weft/communicator.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/tuning/cost_model.hpp"

#include <string_view>

namespace weft {

struct direct {
  static constexpr std::string_view name = "direct";
  static constexpr bool keeps_rank_order = true;
  // Every element is reduced in the same order wherever it sits in the buffer: allreduces fused
  // into one buffer (weft::group) give the bits separate calls give.
  static constexpr bool same_order_everywhere = true;

  template <class Comm>
  static void allreduce(Comm& comm, detail::const_bytes in, detail::bytes out,
                        const detail::reducer& combine) {
    const int p = comm.size();
    const int r = comm.rank();
    const std::size_t n = in.size();
    // slot i holds rank i's vector; our own is copied in too, since `out` may alias `in`
    const detail::bytes slots = comm.scratch(static_cast<std::size_t>(p) * n);
    auto slot = [&](int i) { return slots.subspan(static_cast<std::size_t>(i) * n, n); };
    comm.next_step();
    exchange_with_everyone(
        comm, slot, [&](int) { return in; }, [&] { comm.copy(slot(r), in); });
    reduce_in_order(comm, slots, n, out, combine);
  }

  template <class Comm>
  static void reduce_scatter(Comm& comm, detail::const_bytes in, detail::bytes out,
                             const detail::reducer& combine) {
    const int p = comm.size();
    const int r = comm.rank();
    const std::size_t n = out.size();
    const detail::bytes slots = comm.scratch(static_cast<std::size_t>(p) * n);
    auto slot = [&](int i) { return slots.subspan(static_cast<std::size_t>(i) * n, n); };
    comm.next_step();
    auto block = [&](int i) { return in.subspan(static_cast<std::size_t>(i) * n, n); };
    exchange_with_everyone(comm, slot, block, [&] { comm.copy(slot(r), block(r)); });
    reduce_in_order(comm, slots, n, out, combine);
  }

  template <class Comm>
  static void reduce(Comm& comm, detail::const_bytes in, detail::bytes out,
                     const detail::reducer& combine, int root) {
    const int p = comm.size();
    const int r = comm.rank();
    const std::size_t n = in.size();
    comm.next_step();
    if (r != root) {
      auto send = comm.send(root, in);
      comm.wait(send);
      return;
    }
    const detail::bytes slots = comm.scratch(static_cast<std::size_t>(p) * n);
    auto slot = [&](int i) { return slots.subspan(static_cast<std::size_t>(i) * n, n); };
    comm.copy(slot(r), in);
    auto receives = comm.requests(static_cast<std::size_t>(p));
    for (int i = 0; i < p; ++i) {
      if (i != r) receives[static_cast<std::size_t>(i)] = comm.recv(i, slot(i));
    }
    comm.wait_each(receives);
    reduce_in_order(comm, slots, n, out, combine);
  }

  template <class Comm>
  static void allgather(Comm& comm, detail::const_bytes in, detail::bytes out) {
    allgatherv(comm, in, out, comm.equal_blocks(2, comm.size(), in.size()));
  }

  template <class Comm>
  static void allgatherv(Comm& comm, detail::const_bytes in, detail::bytes out,
                         detail::layout blocks) {
    const int r = comm.rank();
    comm.next_step();
    auto block = [&](int i) { return out.subspan(blocks.offset(i), blocks.size(i)); };
    exchange_with_everyone(
        comm, block, [&](int) { return in; }, [&] { comm.copy(block(r), in); });
  }

  template <class Comm>
  static void broadcast(Comm& comm, detail::bytes data, int root) {
    const int p = comm.size();
    comm.next_step();
    if (comm.rank() != root) {
      auto receive = comm.recv(root, data);
      comm.wait(receive);
      return;
    }
    auto sends = comm.requests(static_cast<std::size_t>(p));
    for (int i = 0; i < p; ++i) {
      if (i != root) sends[static_cast<std::size_t>(i)] = comm.send(i, detail::const_bytes(data));
    }
    comm.wait_each(sends);
  }

  template <class Comm>
  static void gather(Comm& comm, detail::const_bytes in, detail::bytes out, int root) {
    const int p = comm.size();
    const std::size_t n = in.size();
    comm.next_step();
    if (comm.rank() != root) {
      auto send = comm.send(root, in);
      comm.wait(send);
      return;
    }
    comm.copy(out.subspan(static_cast<std::size_t>(root) * n, n), in);
    auto receives = comm.requests(static_cast<std::size_t>(p));
    for (int i = 0; i < p; ++i) {
      if (i != root)
        receives[static_cast<std::size_t>(i)] =
            comm.recv(i, out.subspan(static_cast<std::size_t>(i) * n, n));
    }
    comm.wait_each(receives);
  }

  template <class Comm>
  static void scatter(Comm& comm, detail::const_bytes in, detail::bytes out, int root) {
    const int p = comm.size();
    const std::size_t n = out.size();
    comm.next_step();
    if (comm.rank() != root) {
      auto receive = comm.recv(root, out);
      comm.wait(receive);
      return;
    }
    auto sends = comm.requests(static_cast<std::size_t>(p));
    for (int i = 0; i < p; ++i) {
      if (i != root)
        sends[static_cast<std::size_t>(i)] =
            comm.send(i, in.subspan(static_cast<std::size_t>(i) * n, n));
    }
    comm.copy(out, in.subspan(static_cast<std::size_t>(root) * n, n));
    comm.wait_each(sends);
  }

  template <class Comm>
  static void alltoall(Comm& comm, detail::const_bytes in, detail::bytes out) {
    const auto blocks =
        comm.equal_blocks(0, comm.size(), in.size() / static_cast<std::size_t>(comm.size()));
    alltoallv(comm, in, blocks, out, blocks);
  }

  template <class Comm>
  static void alltoallv(Comm& comm, detail::const_bytes in, detail::layout in_blocks,
                        detail::bytes out, detail::layout out_blocks) {
    const int r = comm.rank();
    comm.next_step();
    auto out_block = [&](int i) { return out.subspan(out_blocks.offset(i), out_blocks.size(i)); };
    auto in_block = [&](int i) { return in.subspan(in_blocks.offset(i), in_blocks.size(i)); };
    exchange_with_everyone(comm, out_block, in_block,
                           [&] { comm.copy(out_block(r), in_block(r)); });
  }

  static constexpr tuning::cost cost(collective kind, int p, double bytes, double) {
    const double others = p - 1.0;
    switch (kind) {
      case collective::allreduce:
        return {others, others * bytes, others * bytes};  // see above
      case collective::reduce_scatter:
        return {1, others * bytes, others * bytes};
      case collective::reduce:
        return {1, others * bytes, others * bytes};
      case collective::broadcast:
        return {1, others * bytes, 0};
      case collective::allgather:
      case collective::allgatherv:
      case collective::gather:
      case collective::scatter:
      case collective::alltoall:
      case collective::alltoallv:
        return {1, others * bytes, 0};
      default:
        return tuning::unsupported;
    }
  }

 private:
  // Posts a receive into into(i) from, and a send of from(i) to, every other rank i, runs
  // `meanwhile` (this rank's own block: its copy overlaps the transfers), then waits for all.
  // The k-th pair of a rank r is a receive from r-k and a send to r+k (mod p): each rank's
  // first message goes to a different peer. In rank order every rank would write to rank 0
  // first and to rank p-1 last, so one receiver takes all the bytes at a time while the others
  // wait; Open MPI's linear alltoall posts in the same shifted order.
  //
  // With 3 or more ranks, a block of comm.handshake_bytes() or more (64 KiB over TCP) is sent
  // only once its receiver has posted the receive and said so with a zero-byte message: a rank
  // that starts early would otherwise spend the CPUs copying its blocks into the sockets of
  // ranks that have not started (and those ranks copy them twice, through their early-message
  // buffers). Each held block goes out as soon as its receiver's word arrives, in whatever
  // order the words come. Both ends of a pair decide from the same block size, so they agree.
  template <class Comm, class Into, class From, class Meanwhile>
  static void exchange_with_everyone(Comm& comm, Into into, From from, Meanwhile meanwhile) {
    const int p = comm.size();
    const int r = comm.rank();
    const std::size_t threshold = p > 2 ? comm.handshake_bytes() : 0;
    auto held = [&](std::size_t bytes) { return threshold > 0 && bytes >= threshold; };
    const auto others = static_cast<std::size_t>(p - 1);
    // [0, others): receives; then sends; then the receivers' words; then this rank's words.
    auto operations = comm.requests(4 * others);
    auto receive = [&](std::size_t i) -> auto& { return operations[i]; };
    auto send = [&](std::size_t i) -> auto& { return operations[others + i]; };
    auto ready_from = [&](std::size_t i) -> auto& { return operations[2 * others + i]; };
    auto ready_to = [&](std::size_t i) -> auto& { return operations[3 * others + i]; };
    auto destination = [&](std::size_t i) { return (r + static_cast<int>(i) + 1) % p; };
    for (std::size_t i = 0; i < others; ++i) {
      const int source = (r - static_cast<int>(i) - 1 + p) % p;
      const detail::bytes incoming = into(source);
      receive(i) = comm.recv(source, incoming);
      if (held(incoming.size()))
        ready_to(i) = comm.send(source, detail::const_bytes{}, ready_channel);
      const detail::const_bytes outgoing = from(destination(i));
      if (held(outgoing.size())) {
        ready_from(i) = comm.recv(destination(i), detail::bytes{}, ready_channel);
      } else {
        send(i) = comm.send(destination(i), outgoing);
      }
    }
    meanwhile();
    if (threshold > 0) {
      for (;;) {
        std::size_t waiting = others;  // the first receiver not yet ready
        for (std::size_t i = 0; i < others; ++i) {
          if (send(i).active()) continue;  // posted above (not held), or sent already
          if (!comm.test(ready_from(i))) {
            if (waiting == others) waiting = i;
            continue;
          }
          send(i) = comm.send(destination(i), from(destination(i)));
        }
        if (waiting == others) break;
        comm.wait(ready_from(waiting));
      }
    }
    comm.wait_each(operations);
  }

  static constexpr int ready_channel = 1;  // the zero-byte "my receive is posted" messages

  // out = slot 0 op slot 1 op ... op slot p-1, left to right.
  template <class Comm>
  static void reduce_in_order(Comm& comm, detail::bytes slots, std::size_t n, detail::bytes out,
                              const detail::reducer& combine) {
    const int p = comm.size();
    auto slot = [&](int i) { return slots.subspan(static_cast<std::size_t>(i) * n, n); };
    if (p == 1) return comm.copy(out, slot(0));
    combine(out, slot(0), slot(1));
    for (int i = 2; i < p; ++i) combine(out, out, slot(i));
  }
};

}  // namespace weft
