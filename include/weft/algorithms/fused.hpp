// weft/algorithms/fused.hpp — fused: the whole collective in one pass over every rank's buffers.
//
// What it does
//   Runs on a transport whose ranks reach each other's buffers (weft::collective_transport:
//   weft::cuda::communicators; weft::cuda::ipc_transport and weft::stream::host_process_transport,
//   whose ranks are processes reaching each other's pools), which runs the collective whole once
//   every rank has posted. Between processes the work is cut by rank, each rank's device doing
//   its share, and buffers outside a rank's pool are staged there first.
//   allreduce       A reduce-scatter and an allgather fused into one pass: the vector is cut
//                   into one share per device (none smaller than 1 MiB, so a small vector is
//                   one share), and each device reduces its share straight from all p inputs
//                   in rank order 0, 1, ..., p-1 and stores it into all p outputs (one kernel
//                   on a GPU). No messages, no scratch: every byte of input is read once and
//                   every byte of output written once, the least memory traffic an allreduce
//                   can make on one GPU.
//   reduce_scatter  Rank j's block is reduced from all p inputs into rank j's output.
//   allgather       Rank j's block is copied into all p outputs.
//   Each device's work waits for every rank's earlier work; each rank goes on once every
//   device's work is done. Every element is computed once, so every rank gets the same bits.
// Cost per rank (n bytes)
//   One step (a wait for the others' posts, then for the devices' work); a share reads n/p
//   bytes of each of p inputs and writes n/p bytes into each of p outputs: counted as n bytes
//   moved and no reduction of its own (the reduction is fused into the move).
// Preconditions
//   A collective_transport whose every device reaches every other's memory (one GPU, or GPUs
//   with peer access), the communicator the transport's whole world, at most 64 ranks.
// When to prefer it
//   Always, where it runs. Ranks sharing one GPU: 0.44x the GPU's copy bandwidth in busbw at 2
//   ranks against the ring's 0.11x (256 MiB on an H200), and one step's latency. Across GPUs
//   with peer access each GPU's links carry 2(p-1)/p * n, as a ring's do, in one step instead
//   of 2(p-1).
#pragma once

#include "weft/call.hpp"
#include "weft/communicator.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/transport.hpp"
#include "weft/tuning/cost_model.hpp"

#include <string_view>

namespace weft {

struct fused {
  static constexpr std::string_view name = "fused";
  static constexpr bool keeps_rank_order = true;
  static constexpr int most_ranks = 64;

  template <class Comm>
  requires collective_transport<typename Comm::transport_type>
  static void allreduce(Comm& comm, detail::const_bytes in, detail::bytes out,
                        const detail::reducer& combine) {
    run(comm, in, out, &combine);
  }

  template <class Comm>
  requires collective_transport<typename Comm::transport_type>
  static void reduce_scatter(Comm& comm, detail::const_bytes in, detail::bytes out,
                             const detail::reducer& combine) {
    run(comm, in, out, &combine);
  }

  template <class Comm>
  requires collective_transport<typename Comm::transport_type>
  static void allgather(Comm& comm, detail::const_bytes in, detail::bytes out) {
    run(comm, in, out, nullptr);
  }

  static constexpr tuning::cost cost(collective kind, int p, double bytes, double /*chunk_bytes*/) {
    if (p > most_ranks) return tuning::unsupported;
    switch (kind) {
      case collective::allreduce:
        return {1, bytes, 0};
      case collective::reduce_scatter:
      case collective::allgather:
        return {1, bytes * p, 0};  // bytes: one rank's block
      default:
        return tuning::unsupported;
    }
  }

  // weft::automatic's estimate: never where this world cannot run it.
  template <class Comm>
  static double estimate_us(Comm& comm, collective kind, double bytes,
                            const tuning::link_constants&,
                            const tuning::link_constants& constants) {
    auto& t = comm.underlying_transport();
    if (!t.runs_collectives() || comm.size() != t.size()) return tuning::never;
    return tuning::estimate_us(cost(kind, comm.size(), bytes, 0), constants);
  }

 private:
  template <class Comm>
  static void run(Comm& comm, detail::const_bytes in, detail::bytes out,
                  const detail::reducer* combine) {
    if (comm.size() > most_ranks) {
      throw error(errc::invalid_argument,
                  "rank " + std::to_string(comm.rank()) + ": fused runs on at most " +
                      std::to_string(most_ranks) + " ranks, and this communicator has " +
                      std::to_string(comm.size()) + "; nothing was sent");
    }
    comm.next_step();
    auto part = comm.post_collective(in, out, combine);
    comm.wait(part);
  }
};

}  // namespace weft
