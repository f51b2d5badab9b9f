// expert_parallel.hpp — expert parallelism (a mixture-of-experts layer): each rank holds some of
// the experts, a router sends each token to one expert, and two alltoalls carry the tokens to
// their experts' ranks and the results back.
//
// The router is skewed (Zipf: a few experts get most tokens, as real routers do before
// load-balancing losses even them out), so the alltoall is uneven: the rank holding the
// popular experts receives many times the mean, and the whole layer waits for it. Every rank
// talks to every other, so where the ranks span nodes the alltoall crosses the scale-out
// network whole: the hardest collective to keep balanced.
#pragma once

#include "step.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace parallelism {

// The expert of `token` of `rank`: a Zipf(skew) draw over `experts`, the same on every run.
inline int route(int rank, std::size_t token, int experts, double skew) {
  std::uint64_t x = (static_cast<std::uint64_t>(rank) << 32 | token) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  const double u = static_cast<double>(x >> 11) / 9007199254740992.0;  // [0, 1)
  double total = 0;
  for (int e = 0; e < experts; ++e) total += 1.0 / std::pow(e + 1, skew);
  double below = 0;
  for (int e = 0; e < experts; ++e) {
    below += 1.0 / std::pow(e + 1, skew) / total;
    if (u < below) return e;
  }
  return experts - 1;
}

struct expert_load {
  std::size_t most = 0;  // tokens the busiest rank's experts received
  double mean = 0;       // tokens a rank's experts received, on average
};

// One MoE layer forward (dispatch, experts, combine) over the ranks of `comm`. Expert e lives
// on rank e / experts_per_rank; real ranks' experts add e + 1 to a token, and each rank checks
// that every token came back with its expert's number added. Returns false if one did not.
template <class T, class Comm>
bool expert_parallel_step(Comm& comm, const shape& s, expert_load* load = nullptr) {
  const int p = comm.size();
  const int experts = p * s.experts_per_rank;
  const std::size_t h = s.hidden;
  std::vector<int> expert(s.tokens);
  std::vector<std::size_t> to(static_cast<std::size_t>(p), 0), from(static_cast<std::size_t>(p), 0);
  for (std::size_t t = 0; t < s.tokens; ++t) {
    expert[t] = route(comm.rank(), t, experts, s.skew);
    ++to[static_cast<std::size_t>(expert[t] / s.experts_per_rank)];
  }
  weft::alltoall(comm, std::span<const std::size_t>(to),
                 std::span<std::size_t>(from));  // who sends me how many
  std::size_t received = 0;
  for (const std::size_t n : from) received += n;
  if (load != nullptr) {
    std::vector<std::size_t> all(static_cast<std::size_t>(p));
    weft::allgather(comm, std::span<const std::size_t>(&received, 1), std::span<std::size_t>(all));
    load->most = *std::max_element(all.begin(), all.end());
    load->mean = static_cast<double>(s.tokens);
  }
  std::vector<std::size_t> send_counts(to), recv_counts(from);  // in elements: tokens x h
  for (auto& n : send_counts) n *= h;
  for (auto& n : recv_counts) n *= h;
  auto outgoing = make_buffer<T>(comm, s.tokens * h);
  auto incoming = make_buffer<T>(comm, received * h);
  std::vector<std::size_t> order(s.tokens);  // tokens grouped by destination rank
  if constexpr (!simulated<Comm>) {
    std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
    for (int r = 1; r < p; ++r)
      next[static_cast<std::size_t>(r)] =
          next[static_cast<std::size_t>(r - 1)] + to[static_cast<std::size_t>(r - 1)];
    for (std::size_t t = 0; t < s.tokens; ++t) {
      const std::size_t slot = next[static_cast<std::size_t>(expert[t] / s.experts_per_rank)]++;
      order[slot] = t;
      for (std::size_t k = 0; k < h; ++k) {
        outgoing.values()[slot * h + k] =
            static_cast<T>(static_cast<int>((t + k) % 5) * 100 + expert[t]);
      }
    }
  }
  weft::alltoallv(comm, std::span<const T>(outgoing.span()),
                  std::span<const std::size_t>(send_counts), incoming.span(),
                  std::span<const std::size_t>(recv_counts));
  // the experts: two GEMMs of h x 4h per token received
  compute(comm,
          2.0 * 2.0 * static_cast<double>(received) * static_cast<double>(h) * 4.0 *
              static_cast<double>(h),
          s);
  if constexpr (!simulated<Comm>) {  // expert e adds e + 1 (a token carries e in its low digits)
    for (auto& x : incoming.values())
      x = static_cast<T>(x + static_cast<T>(static_cast<int>(x) % 100 + 1));
  }
  weft::alltoallv(comm, std::span<const T>(incoming.span()),
                  std::span<const std::size_t>(recv_counts), outgoing.span(),
                  std::span<const std::size_t>(send_counts));
  bool right = true;
  if constexpr (!simulated<Comm>) {
    for (std::size_t slot = 0; slot < s.tokens; ++slot) {
      const std::size_t t = order[slot];
      for (std::size_t k = 0; k < h; ++k) {
        const int sent = static_cast<int>((t + k) % 5) * 100 + expert[t];
        right = right && outgoing.values()[slot * h + k] == static_cast<T>(sent + expert[t] + 1);
      }
    }
  }
  return right;
}

}  // namespace parallelism
