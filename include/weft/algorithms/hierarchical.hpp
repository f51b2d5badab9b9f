// weft/algorithms/hierarchical.hpp — two tiers: the ranks of each host among themselves (Intra),
// then across hosts (Inter), each phase run by an algorithm of its own.
//
//   weft::allreduce(comm, data, weft::sum{}, weft::hierarchical<weft::ring, weft::ring>{});
//   WEFT_ALGO=allreduce=hierarchical(ring,recursive_halving)
//
// What it does (h hosts, host g with L_g ranks; the layout is comm.hosts(), weft/hosts.hpp)
//   allreduce       1. On each host, Intra's reduce_scatter: local rank i holds the host's sum of
//                      block i of L_g (blocks of ceil(n/L_g) elements; a vector that does not
//                      divide is padded in scratch).
//                   2. Across hosts, Inter's allreduce of each block among the ranks that hold
//                      it on every host: the rails (local rank i of every host) when the hosts
//                      have equal rank counts; with unequal hosts, each segment between the
//                      hosts' block boundaries has its own group, taken in ascending order.
//                   3. On each host, Intra's allgatherv of the reduced blocks.
//   reduce_scatter  the allreduce into scratch, then this rank's block is copied out.
//   broadcast       1. Inter's broadcast among one rank per host (the root, and on every other
//                      host the rank with the root's local index, or its last rank);
//                   2. Intra's broadcast on each host from that rank.
//   reduce          1. Intra's reduce on each host to that host's rank (as broadcast's);
//                   2. Inter's reduce among those ranks to the root.
//   allgather       1. Intra's allgather on each host; 2. Inter's allgatherv of the hosts'
//                      blocks among each host's first rank; 3. Intra's broadcast of everything
//                      on each host; blocks are put in rank order where hosts are not runs of
//                      consecutive ranks.
//   One host: Intra's algorithm on all ranks; one rank per host: Inter's.
// Cost (allreduce, n bytes, L ranks per host, h hosts; each tier with its own alpha and beta)
//   Intra reduce_scatter + allgather of n among L, Inter allreduce of n/L among h: the bytes that
//   cross hosts are 2(h-1)/h * n/L per rank, L times fewer than a flat ring puts on the slowest
//   link, for 2(L-1) more steps on the fast one.
// Preconditions
//   Commutative reductions (ranks are combined host by host). Intra and Inter must implement the
//   phases: allreduce needs Intra's reduce_scatter and allgatherv and Inter's allreduce
//   (ring/ring, ring/recursive_halving, direct/double_binary_tree, ...); reduce needs both to
//   implement reduce (binomial_tree, direct). Results are bitwise equal on every rank: each
//   element is reduced once per tier and then copied.
// When to prefer it
//   Hosts whose ranks share a fast tier (shared memory, NVLink) joined by a slower network: the
//   network carries 1/L of the bytes. weft::automatic costs it with each tier's constants where the
//   transport knows the layout (weft::tiered) and picks it when it wins.
#pragma once

#include "weft/communicator.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/error.hpp"
#include "weft/hosts.hpp"
#include "weft/tuning/cost_model.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <string_view>
#include <vector>

namespace weft {

namespace detail {

// "hierarchical(ring,recursive_halving)", as WEFT_ALGO names it.
template <class Intra, class Inter>
struct hierarchical_name {
  static constexpr std::string_view head = "hierarchical(";
  static constexpr std::size_t length =
      head.size() + Intra::name.size() + 1 + Inter::name.size() + 1;
  static constexpr std::array<char, length> text = [] {
    std::array<char, length> out{};
    std::size_t at = 0;
    for (const char c : head) out[at++] = c;
    for (const char c : Intra::name) out[at++] = c;
    out[at++] = ',';
    for (const char c : Inter::name) out[at++] = c;
    out[at++] = ')';
    return out;
  }();
  static constexpr std::string_view value{text.data(), length};
};

// Runs one phase: `run(group)` as a call of `kind` by `Algorithm` on the group of `members`; what
// it sent counts in this call's report, and its failure fails `comm`.
template <class Algorithm, class Comm, class Run>
void run_phase(Comm& comm, std::span<const int> members, collective kind, Run&& run) {
  try {
    Comm& group = comm.group(members);
    const auto scope = group.begin(kind, Algorithm::name);
    try {
      run(group);
    } catch (...) {
      group.cancel_requests();
      throw;
    }
    comm.count_phase(group.finish());
  } catch (const error& failure) {
    comm.fail_phase(failure);
  }
}

// The rank that stands for host `host` across hosts when `root` is the call's root: the root on
// its own host, elsewhere the rank with the root's local index (its rail), or the host's last.
inline int host_delegate(const host_layout& layout, int host, int root) {
  if (layout.host_of(root) == host) return root;
  const auto ranks = layout.ranks_on(host);
  return ranks[std::min(static_cast<std::size_t>(layout.local_index(root)), ranks.size() - 1)];
}

inline std::vector<int> delegates(const host_layout& layout, int root) {
  std::vector<int> ranks;
  for (int g = 0; g < layout.hosts(); ++g) ranks.push_back(host_delegate(layout, g, root));
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

inline int position_of(std::span<const int> ranks, int rank) {
  return static_cast<int>(std::find(ranks.begin(), ranks.end(), rank) - ranks.begin());
}

// What the two-tier allreduce (and reduce_scatter) needs of its tiers.
template <class Intra, class Inter, class Comm>
concept tiers_reduce = requires(Comm& c, const_bytes i, bytes o, const reducer& f, layout b) {
  Intra::reduce_scatter(c, i, o, f);
  Intra::allgatherv(c, i, o, b);
  Inter::allreduce(c, i, o, f);
};

// Elements per block when `count` is cut into `parts` equal blocks (the last ones may be short).
inline std::size_t block_elements(std::size_t count, std::size_t parts) {
  return (count + parts - 1) / parts;
}

}  // namespace detail

template <class Intra, class Inter>
struct hierarchical {
  static constexpr std::string_view name = detail::hierarchical_name<Intra, Inter>::value;
  static constexpr bool keeps_rank_order = false;

  template <class Comm>
  requires detail::tiers_reduce<Intra, Inter, Comm>
  static void allreduce(Comm& comm, detail::const_bytes in, detail::bytes out,
                        const detail::reducer& combine) {
    if (out.empty()) return;  // every rank has the same count
    const host_layout& layout = comm.hosts();
    if (layout.hosts() == 1) {
      if constexpr (requires { Intra::allreduce(comm, in, out, combine); })
        return Intra::allreduce(comm, in, out, combine);
    }
    if (layout.largest_host() == 1) return Inter::allreduce(comm, in, out, combine);
    const std::size_t element = combine.element_size();
    const std::size_t count = out.size() / element;
    const int r = comm.rank();
    const auto local = layout.ranks_on(layout.host_of(r));
    const auto places = local.size();
    const std::size_t block = detail::block_elements(count, places);
    const auto index = static_cast<std::size_t>(layout.local_index(r));
    const std::size_t low = std::min(count, index * block);
    const std::size_t high = std::min(count, low + block);
    // Scratch: this rank's reduced block, then (a vector that does not divide) the padded input.
    const bool padded = block * places != count;
    auto scratch = comm.scratch(block * element + (padded ? block * places * element : 0));
    const detail::bytes reduced = scratch.first(block * element);
    detail::const_bytes source = in;
    if (padded) {
      const detail::bytes copy = scratch.subspan(block * element);
      comm.copy(copy.first(in.size()), in);
      // The padding is reduced and dropped; it holds copies of the input, never unset memory.
      for (std::size_t at = in.size(); at < copy.size();
           at += std::min(in.size(), copy.size() - at)) {
        comm.copy(copy.subspan(at, std::min(in.size(), copy.size() - at)),
                  in.first(std::min(in.size(), copy.size() - at)));
      }
      source = copy;
    }
    detail::run_phase<Intra>(comm, local, collective::reduce_scatter, [&](Comm& group) {
      Intra::reduce_scatter(group, source, reduced, combine);
    });
    // Across hosts, segment by segment: the hosts' block boundaries cut [0, count).
    std::vector<std::size_t> cuts{0, count};
    for (int g = 0; g < layout.hosts(); ++g) {
      const std::size_t size = detail::block_elements(count, layout.ranks_on(g).size());
      for (std::size_t at = size; size > 0 && at < count; at += size) cuts.push_back(at);
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    std::vector<int> owners;
    for (std::size_t s = 0; s + 1 < cuts.size(); ++s) {
      if (cuts[s] < low || cuts[s] >= high) continue;
      owners.clear();
      for (int g = 0; g < layout.hosts(); ++g) {
        const auto ranks = layout.ranks_on(g);
        owners.push_back(ranks[cuts[s] / detail::block_elements(count, ranks.size())]);
      }
      std::sort(owners.begin(), owners.end());
      const detail::bytes part =
          reduced.subspan((cuts[s] - low) * element, (cuts[s + 1] - cuts[s]) * element);
      detail::run_phase<Inter>(comm, owners, collective::allreduce,
                               [&](Comm& group) { Inter::allreduce(group, part, part, combine); });
    }
    auto displs = comm.indices(0, places + 1);
    for (std::size_t i = 0; i <= places; ++i) displs[i] = std::min(count, i * block) * element;
    detail::run_phase<Intra>(comm, local, collective::allgatherv, [&](Comm& group) {
      Intra::allgatherv(group, reduced.first((high - low) * element), out, detail::layout{displs});
    });
  }

  template <class Comm>
  requires detail::tiers_reduce<Intra, Inter, Comm>
  static void reduce_scatter(Comm& comm, detail::const_bytes in, detail::bytes out,
                             const detail::reducer& combine) {
    // The whole reduced vector needs memory of its own: the allreduce uses this call's scratch.
    auto& memory = comm.memory();
    struct held {
      decltype(memory)& space;
      std::byte* data;
      std::size_t size;
      ~held() { space.deallocate(data, size); }
    } all{memory, memory.allocate(in.size()), in.size()};
    allreduce(comm, in, detail::bytes(all.data, all.size), combine);
    comm.copy(out, detail::const_bytes(
                       all.data + static_cast<std::size_t>(comm.rank()) * out.size(), out.size()));
  }

  template <class Comm>
  requires requires(Comm& c, detail::bytes d, int root) {
    Intra::broadcast(c, d, root);
    Inter::broadcast(c, d, root);
  }
  static void broadcast(Comm& comm, detail::bytes data, int root) {
    const host_layout& layout = comm.hosts();
    if (layout.hosts() == 1) return Intra::broadcast(comm, data, root);
    if (layout.largest_host() == 1) return Inter::broadcast(comm, data, root);
    const int r = comm.rank();
    const int host = layout.host_of(r);
    const auto across = detail::delegates(layout, root);
    const int delegate = detail::host_delegate(layout, host, root);
    if (r == delegate) {
      detail::run_phase<Inter>(comm, across, collective::broadcast, [&](Comm& group) {
        Inter::broadcast(group, data, detail::position_of(across, root));
      });
    }
    detail::run_phase<Intra>(comm, layout.ranks_on(host), collective::broadcast, [&](Comm& group) {
      Intra::broadcast(group, data, layout.local_index(delegate));
    });
  }

  template <class Comm>
  requires requires(Comm& c, detail::const_bytes i, detail::bytes o, const detail::reducer& f,
                    int root) {
    Intra::reduce(c, i, o, f, root);
    Inter::reduce(c, i, o, f, root);
  }
  static void reduce(Comm& comm, detail::const_bytes in, detail::bytes out,
                     const detail::reducer& combine, int root) {
    const host_layout& layout = comm.hosts();
    if (layout.hosts() == 1) return Intra::reduce(comm, in, out, combine, root);
    if (layout.largest_host() == 1) return Inter::reduce(comm, in, out, combine, root);
    const int r = comm.rank();
    const int host = layout.host_of(r);
    const int delegate = detail::host_delegate(layout, host, root);
    // The host's sum lands in `out` at the root and in scratch at the other hosts' delegates.
    const detail::bytes host_sum = r == root       ? out
                                   : r == delegate ? comm.scratch(in.size())
                                                   : detail::bytes{};
    detail::run_phase<Intra>(comm, layout.ranks_on(host), collective::reduce, [&](Comm& group) {
      Intra::reduce(group, in, host_sum, combine, layout.local_index(delegate));
    });
    if (r != delegate) return;
    const auto across = detail::delegates(layout, root);
    detail::run_phase<Inter>(comm, across, collective::reduce, [&](Comm& group) {
      Inter::reduce(group, host_sum, r == root ? out : detail::bytes{}, combine,
                    detail::position_of(across, root));
    });
  }

  template <class Comm>
  requires requires(Comm& c, detail::const_bytes i, detail::bytes o, detail::layout b, int root) {
    Intra::allgather(c, i, o);
    Inter::allgatherv(c, i, o, b);
    Intra::broadcast(c, o, root);
  }
  static void allgather(Comm& comm, detail::const_bytes in, detail::bytes out) {
    const host_layout& layout = comm.hosts();
    if (layout.hosts() == 1) return Intra::allgather(comm, in, out);
    const std::size_t block = in.size();
    const int r = comm.rank();
    const int host = layout.host_of(r);
    // Hosts in order, each host's ranks in order: rank order itself when hosts are runs of
    // consecutive ranks, else gathered in scratch and put in rank order at the end.
    bool in_rank_order = true;
    for (int rank = 1; rank < comm.size(); ++rank)
      in_rank_order = in_rank_order && layout.host_of(rank) >= layout.host_of(rank - 1);
    const detail::bytes gathered = in_rank_order ? out : comm.scratch(out.size());
    auto displs = comm.indices(0, static_cast<std::size_t>(layout.hosts()) + 1);
    displs[0] = 0;
    for (int g = 0; g < layout.hosts(); ++g) {
      displs[static_cast<std::size_t>(g) + 1] =
          displs[static_cast<std::size_t>(g)] + layout.ranks_on(g).size() * block;
    }
    const detail::layout hosts_blocks{displs};
    const detail::bytes mine = gathered.subspan(hosts_blocks.offset(host), hosts_blocks.size(host));
    const auto local = layout.ranks_on(host);
    detail::run_phase<Intra>(comm, local, collective::allgather,
                             [&](Comm& group) { Intra::allgather(group, in, mine); });
    const int first = local.front();
    if (r == first) {
      std::vector<int> firsts;
      for (int g = 0; g < layout.hosts(); ++g) firsts.push_back(layout.ranks_on(g).front());
      detail::run_phase<Inter>(comm, firsts, collective::allgatherv, [&](Comm& group) {
        Inter::allgatherv(group, mine, gathered, hosts_blocks);
      });
    }
    detail::run_phase<Intra>(comm, local, collective::broadcast,
                             [&](Comm& group) { Intra::broadcast(group, gathered, 0); });
    if (in_rank_order) return;
    for (int rank = 0; rank < comm.size(); ++rank) {
      const std::size_t from = hosts_blocks.offset(layout.host_of(rank)) +
                               static_cast<std::size_t>(layout.local_index(rank)) * block;
      comm.copy(out.subspan(static_cast<std::size_t>(rank) * block, block),
                gathered.subspan(from, block));
    }
  }

  // weft::automatic's estimate: each tier costed with its own constants (Local and Network of a
  // tiered transport, or the transport's one row for both), on the layout the communicator knows;
  // never chosen where it does not know one yet or the layout has one tier.
  template <class Comm>
  static double estimate_us(Comm& comm, collective kind, double bytes,
                            const tuning::link_constants& intra,
                            const tuning::link_constants& inter) {
    const host_layout* layout = comm.known_hosts();
    if (layout == nullptr || layout->flat()) return tuning::never;
    const int local = layout->largest_host();
    const int hosts = layout->hosts();
    const double chunk = static_cast<double>(comm.pipeline_bytes(kind));
    auto cost = [&](auto algorithm, collective phase, int ranks, double size,
                    const tuning::link_constants& tier) {
      using Algorithm = decltype(algorithm);
      if (ranks <= 1) return 0.0;
      // A first tier that times itself on each host's ranks (weft::in_switch: the switch's own
      // rate and latency, never where a host's ranks do not share one).
      if constexpr (requires { Algorithm::host_us(comm, *layout, phase, size); }) {
        if (&tier == &intra) return Algorithm::host_us(comm, *layout, phase, size);
      }
      return tuning::estimate_us(Algorithm::cost(phase, ranks, size, chunk), tier);
    };
    switch (kind) {
      case collective::allreduce:
      case collective::reduce_scatter: {
        const double total = kind == collective::allreduce ? bytes : bytes * comm.size();
        return cost(Intra{}, collective::reduce_scatter, local, total / local, intra) +
               cost(Inter{}, collective::allreduce, hosts, total / local, inter) +
               cost(Intra{}, collective::allgather, local, total / local, intra);
      }
      case collective::broadcast:
        return cost(Inter{}, collective::broadcast, hosts, bytes, inter) +
               cost(Intra{}, collective::broadcast, local, bytes, intra);
      case collective::reduce:
        return cost(Intra{}, collective::reduce, local, bytes, intra) +
               cost(Inter{}, collective::reduce, hosts, bytes, inter);
      case collective::allgather:
        return cost(Intra{}, collective::allgather, local, bytes, intra) +
               cost(Inter{}, collective::allgatherv, hosts, bytes * local, inter) +
               cost(Intra{}, collective::broadcast, local, bytes * comm.size(), intra);
      default:
        return tuning::never;
    }
  }
};

}  // namespace weft
