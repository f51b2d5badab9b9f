// weft/tuning/cost_model.hpp — the alpha-beta-gamma cost model and its constants.
//
// An algorithm states its cost as a formula (algorithms hold no thresholds):
//   steps          messages on this rank's critical path           (each costs alpha; direct's
//                  gathering collectives count their p-1 concurrent blocks once: see direct.hpp)
//   bytes          bytes this rank sends on its critical path       (each costs beta)
//   reduced_bytes  bytes this rank reduces on its critical path     (each costs gamma)
// weft::automatic picks the algorithm with the smallest alpha*steps + beta*bytes + gamma*reduced.
// The constants live in one table, per transport, with the measurement behind each; so does
// the piece size a transport's pipelined reductions run best with.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <string_view>
#include <utility>

namespace weft::tuning {

struct cost {
  double steps = 0;
  double bytes = 0;
  double reduced_bytes = 0;
};

// The cost an algorithm states for a collective it does not implement: never the cheapest.
inline constexpr cost unsupported{1e30, 0, 0};
// An estimate that is never the cheapest (an algorithm that cannot help this call).
inline constexpr double never = 1e300;

struct link_constants {
  std::string_view transport;
  double alpha_us;           // latency of one message, microseconds
  double beta_us_per_byte;   // 1 / bandwidth of one transfer
  double gamma_us_per_byte;  // 1 / bandwidth of one elementwise reduction
  // Piece size of a pipelined reduction (options::reduce_chunk_bytes when 0 there; 0 here:
  // options::chunk_bytes, the same pieces as the forwarding pipelines).
  std::size_t reduce_chunk_bytes;
  // direct's exchanges with everyone (on 3 or more ranks) send a block of at least this many
  // bytes only once its receiver says it has posted the receive (options::handshake_bytes
  // overrides; 0: never).
  std::size_t handshake_bytes;
  std::string_view measured;  // where the numbers come from
};

// clang-format off
inline constexpr std::array<link_constants, 6> constants_table{{
  {"inproc", 25.0, 1.0 / 2500.0, 1.0 / 4000.0, 0, 0,
   "2-core x86-64 VM, 2 thread-ranks, weft-bench --ranks 2 (2026-11-29): 8 B direct "
   "allreduce (one step) 28 us median -> alpha 25 us (condition-variable wake-ups); 64 MiB ring "
   "allgather, each rank copying 32 MiB at once, 13.1 ms -> 2.5 GB/s per rank -> beta; 64 MiB "
   "ring reduce-scatter 13.9 ms with the reduction fused into the copy -> gamma ~ 1/4 GB/s"},
  {"tcp", 25.0, 1.0 / 2000.0, 1.0 / 4000.0, std::size_t{256} << 10, std::size_t{64} << 10,
   "2-core x86-64 VM, 2 processes on loopback, weft-run -n 2 weft-bench --transport tcp (2026-11-29): 8 B "
   "direct allreduce (one exchange) 15-47 us median over runs (spin 50 us, then epoll) -> alpha "
   "25 us; 2 MiB ring allreduce busbw 1.8-2.2 GB/s -> beta 1/2 GB/s (two copies through the "
   "kernel per byte); gamma as inproc (the same CPU loop). Reduction pieces (2026-12-01, "
   "WEFT_CHUNK_BYTES in alternating launches, allreduce 256 KiB-64 MiB): 256 KiB pieces "
   "4.2-4.6 GB/s at 2 ranks against 1.9-2.2 with 1 MiB (64 KiB 2.7-2.9, 128 KiB 3.2-3.7), at 4 "
   "ranks 1.05-1.15x faster than 1 MiB at every size; a piece a rank reduces and sends on while "
   "the kernel's copy of it is still in cache. The broadcast pipeline keeps 1 MiB: 256 KiB "
   "pieces made the 4-rank 64 MiB broadcast 0.83 against 1.01 GB/s. Handshake from 64 KiB blocks "
   "(2026-12-01, 4 ranks on 2 cores, alternating launches, alltoall busbw new / old): 1 MiB "
   "1.09-1.31 (5 of 5), 4 MiB 0.97-1.24 (3 of 5), 16 MiB 1.04-1.17 (5 of 5): ranks that left "
   "the barrier first no longer spend the cores copying blocks into the sockets of ranks that "
   "have not left it (a 4 MiB call's spread of starts 2.1-2.5 ms -> 0.7-1.2 ms, --trace)"},
  {"shm", 2.0, 1.0 / 5000.0, 1.0 / 4000.0, std::size_t{4} << 20, 0,
   "2-core x86-64 VM, 2 processes, weft-run -n 2 weft-bench --transport shm (2026-12-03): 8 B "
   "allreduce (one exchange through the slots) 0.5-0.8 us median over runs, 4 ranks on the 2 "
   "cores 7 us (two steps, ranks sleeping on the futex) -> alpha 2 us; 2 MiB ring allreduce "
   "busbw 4.7-5.7 GB/s -> beta 1/5 GB/s (a copy into the receiver's slots, read out or "
   "combined straight from them); gamma as inproc (the same CPU loop). Reduction pieces "
   "(WEFT_REDUCE_CHUNK_BYTES 64 KiB / 256 KiB / 1 MiB in alternating launches, allreduce 1-64 "
   "MiB, 2 and 4 ranks): 1 MiB as fast or faster at every size (2 ranks 1 MiB 5.6-6.0 against "
   "5.0-6.5 and 5.2-5.7 GB/s, within the noise elsewhere). Since large sends from the pool "
   "are lent (read once from the sender's pool, one loan per pair at a time), fewer, larger "
   "pieces win (WEFT_REDUCE_CHUNK_BYTES 1 MiB / 4 MiB / 64 MiB, 3 alternating launches, ring, "
   "2 ranks, busbw out of place): 4 MiB 8.1-8.6 / 8.2-10.8 / 8.0-10.6, 16 MiB 5.5-6.8 / "
   "6.6-6.9 / 5.9-7.3 GB/s; 4 ranks within the noise: pieces of 4 MiB. No handshake: a block "
   "waiting in the receiver's slots costs no core."},
  {"cuda", 30.0, 1.0 / 950000.0, 1.0 / 1500000.0, std::size_t{8} << 20, 0,
   "one H200, ranks of weft::cuda::communicators sharing it, weft-bench --transport cuda, CUDA "
   "events (2026-12-04, tests/gpu/run): a message step (two posts, the lane's waits, a copy or "
   "combine kernel, the done flag, the waits) ~30 us: the 2-rank ring's two steps 58-61 us from 8 "
   "B to 256 KiB; fused's one step 18.4-19.2 us over the same sizes. beta from fused at 2 ranks, "
   "16 MiB 39.7 us and 128 MiB 161.3 us -> 0.97 TB/s per byte of the vector (every input read "
   "and every output written once; the GPU's device-to-device copy 2.09 TB/s). gamma (a combine "
   "reads two operands and writes one, ~1/1.5 TB/s) and the 8 MiB pieces of the message "
   "algorithms' reductions are estimates from the datasheet, not measured one against another. "
   "No handshake: a transfer starts only once both sides have posted."},
  {"cuda-ipc", 35.0, 1.0 / 950000.0, 1.0 / 1500000.0, std::size_t{8} << 20, 0,
   "weft::cuda::ipc_transport, ranks as processes sharing GPUs: not measured yet (no GPU run of "
   "it). Part 1's row (the same stream waits, flag writes, copies and combine kernels) with 5 "
   "us added to alpha for the envelope's hop through the receiver's host (its progress thread "
   "woken by a futex); whole collectives (fused) read the peers' pools as part 1's read the "
   "ranks' buffers, so beta and gamma are part 1's."},
  {"default", 20.0, 1.0 / 1000.0, 1.0 / 3000.0, 0, 0,
   "conservative guess for transports without their own row: 20 us latency, 1 GB/s"},
}};
// clang-format on

constexpr const link_constants& constants_for(std::string_view transport) {
  for (const auto& row : constants_table) {
    if (row.transport == transport) return row;
  }
  return constants_table.back();
}

// The transport's row: T::tuning_key if it has one, else "default".
template <class Transport>
constexpr const link_constants& constants_of() {
  if constexpr (requires { Transport::tuning_key; })
    return constants_for(Transport::tuning_key);
  else
    return constants_for("default");
}

// The rows of a transport's two tiers (weft::tiered): the node-local one (T::local_tuning_key)
// and the network (T::tuning_key). A transport with one tier has the same row for both.
template <class Transport>
constexpr const link_constants& local_constants_of() {
  if constexpr (requires { Transport::local_tuning_key; })
    return constants_for(Transport::local_tuning_key);
  else
    return constants_of<Transport>();
}

// The rows a transport object costs with, node-local first: what it knows of its links at run
// time (t.cost_constants(): the simulator's fabric), else its compile-time rows.
template <class Transport>
std::pair<link_constants, link_constants> rows_of(const Transport& t) {
  if constexpr (requires {
                  { t.cost_constants() } -> std::same_as<std::pair<link_constants, link_constants>>;
                }) {
    return t.cost_constants();
  } else {
    return {local_constants_of<Transport>(), constants_of<Transport>()};
  }
}

constexpr double estimate_us(const cost& c, const link_constants& k) {
  return k.alpha_us * c.steps + k.beta_us_per_byte * c.bytes +
         k.gamma_us_per_byte * c.reduced_bytes;
}

// True for 1, 2, 4, 8, ...
constexpr bool is_power_of_two(int p) { return p > 0 && (p & (p - 1)) == 0; }

// ceil(log2(p)) for p >= 1.
constexpr double log2_ceil(int p) {
  int steps = 0;
  for (int reach = 1; reach < p; reach *= 2) ++steps;
  return steps;
}

}  // namespace weft::tuning
