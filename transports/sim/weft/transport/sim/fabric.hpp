// weft/transport/sim/fabric.hpp — the simulated machine: links, the route of every message,
// and what a reduction costs on a rank.
//
//   auto flat = weft::sim::fabric::uniform(64, {.gbit_per_s = 400, .latency_us = 2});
//   auto hgx = weft::sim::fabric::nodes(4, 8,
//                                       {.gbit_per_s = 7200, .latency_us = 0.5},  // NVLink
//                                       {.gbit_per_s = 400, .latency_us = 5}, 8);  // 8 NICs a node
//
// A link carries bytes one way at its bandwidth and adds its latency to every message that
// crosses it. A message from rank a to rank b crosses the links of route(a, b) (never empty
// between two ranks; empty from a rank to itself): it starts when every one of them is free,
// holds them all for bytes / (the slowest one's bandwidth), and arrives the route's summed
// latency after its last byte left. So links are shared by serialization in start order (the
// simulator starts messages in order of virtual time), and a message is not split across
// links: a conservative model of a fabric's flow control (docs/simulator.md says why).
#pragma once

#include "weft/error.hpp"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace weft::sim {

// How fast and how far one link is.
struct link_speed {
  double gbit_per_s = 100;  // bandwidth, 10^9 bits per second
  double latency_us = 1;    // one-way latency added per crossing
  double bytes_per_s() const { return gbit_per_s * 1e9 / 8; }
};

// Which tier a link belongs to, for the per-tier byte counts.
enum class tier { scale_up, scale_out };

inline const char* to_string(tier t) { return t == tier::scale_up ? "scale-up" : "scale-out"; }

struct link {
  std::string name;  // "rank 3 out", "node 1 uplink in", ...
  double bytes_per_s;
  double latency_s;
  enum tier tier;
};

// A switch that reduces (NVLink SHARP, InfiniBand SHARP): the ranks whose ports hang off it,
// and how it serves an in-switch operation (weft::in_switch). Each rank's port is the pair of
// links (out, in) its in-switch traffic holds; an operation moves at `bytes_per_s` a port in each
// direction and adds `latency_s` once (up, reduce, down).
struct reducing_switch {
  std::string name;
  std::vector<int> ranks;                  // ascending
  std::vector<std::pair<int, int>> ports;  // ranks[i]'s (out link, in link)
  double bytes_per_s = 0;
  double latency_s = 0;
};

class fabric {
 public:
  // route(a, b, out): appends the links a message from a to b crosses, in order.
  using router = std::function<void(int from, int to, std::vector<int>& out)>;

  // `node_of[r]` is rank r's node (the hosts weft::hierarchical sees); empty: every rank its own.
  fabric(std::string name, int ranks, std::vector<link> links, router route,
         std::vector<int> node_of = {})
      : name_(std::move(name)),
        ranks_(ranks),
        links_(std::move(links)),
        route_(std::move(route)),
        node_of_(std::move(node_of)) {
    if (ranks_ < 1)
      throw error(errc::invalid_argument, "a simulated fabric needs at least one rank");
    if (node_of_.empty()) {
      for (int r = 0; r < ranks_; ++r) node_of_.push_back(r);
    }
    if (node_of_.size() != static_cast<std::size_t>(ranks_)) {
      throw error(errc::invalid_argument, "a simulated fabric of " + std::to_string(ranks_) +
                                              " ranks was given the "
                                              "nodes of " +
                                              std::to_string(node_of_.size()));
    }
    for (const auto& l : links_) {
      if (!(l.bytes_per_s > 0) || !(l.latency_s >= 0)) {
        throw error(errc::invalid_argument, "simulated link " + l.name +
                                                ": bandwidth must be positive and latency "
                                                "not negative");
      }
    }
  }

  const std::string& name() const { return name_; }
  int ranks() const { return ranks_; }
  const std::vector<link>& links() const { return links_; }
  const std::vector<int>& nodes() const { return node_of_; }
  void route(int from, int to, std::vector<int>& out) const {
    out.clear();
    if (from != to) route_(from, to, out);
  }

  // Memory bandwidth a rank reduces and copies at (bytes per second; 0: free): a combine of n
  // bytes reads 2n and writes n, a copy reads n and writes n.
  double memory_bytes_per_s() const { return memory_bytes_per_s_; }
  fabric& with_memory_bandwidth(double gbyte_per_s) {
    memory_bytes_per_s_ = gbyte_per_s * 1e9;
    return *this;
  }

  // The switches that reduce (a rank may hang off several: its scale-up domain's, the network's).
  const std::vector<reducing_switch>& switches() const { return switches_; }
  fabric& with_reducing_switch(reducing_switch reducer) {
    if (!(reducer.bytes_per_s > 0) || !(reducer.latency_s >= 0) ||
        reducer.ports.size() != reducer.ranks.size() || reducer.ranks.empty() ||
        !std::is_sorted(reducer.ranks.begin(), reducer.ranks.end())) {
      throw error(errc::invalid_argument, "reducing switch " + reducer.name +
                                              ": needs its ranks in ascending order, a port for "
                                              "each, a positive rate and a latency not negative");
    }
    for (const int r : reducer.ranks) {
      if (r < 0 || r >= ranks_) {
        throw error(errc::invalid_argument, "reducing switch " + reducer.name + ": rank " +
                                                std::to_string(r) + " is not on this fabric");
      }
    }
    switches_.push_back(std::move(reducer));
    return *this;
  }

  // What each call costs before its first byte moves, on every rank: a GPU collective's kernel
  // launch and its setup (seconds; 0, the default, for a fabric of CPUs or the alpha-beta
  // machine).
  double launch_seconds() const { return launch_s_; }
  fabric& with_launch_overhead(double us) {
    if (!(us >= 0)) throw error(errc::invalid_argument, "a launch overhead must not be negative");
    launch_s_ = us * 1e-6;
    return *this;
  }

  // Every rank has one link out and one in (a full-duplex port) of `speed` into a switch that
  // never blocks: the alpha-beta machine, alpha = speed's latency, beta = 1 / its bandwidth.
  // Each rank is a node of its own.
  static fabric uniform(int ranks, link_speed speed) {
    std::vector<link> links;
    links.reserve(2 * static_cast<std::size_t>(std::max(ranks, 0)));
    for (int r = 0; r < ranks; ++r) {
      links.push_back({"rank " + std::to_string(r) + " out", speed.bytes_per_s(),
                       speed.latency_us * 1e-6, tier::scale_out});
      links.push_back(
          {"rank " + std::to_string(r) + " in", speed.bytes_per_s(), 0.0, tier::scale_out});
    }
    return fabric("uniform", ranks, std::move(links), [](int from, int to, std::vector<int>& out) {
      out.push_back(2 * from);
      out.push_back(2 * to + 1);
    });
  }

  // `nodes` nodes of `per_node` ranks (ranks 0..per_node-1 on node 0, and so on). Inside a node
  // every rank has a port of `scale_up` into a non-blocking switch (NVLink); between nodes a
  // message leaves through one of the node's `nics` NICs of `scale_out` and enters through one
  // of the other node's, into a non-blocking network above them. With nics == per_node each
  // rank has its own (rail-optimized); with 1 the node's ranks share one.
  static fabric nodes(int nodes, int per_node, link_speed scale_up, link_speed scale_out,
                      int nics) {
    if (nodes < 1 || per_node < 1 || nics < 1 || nics > per_node) {
      throw error(errc::invalid_argument,
                  "simulated nodes: need nodes >= 1, ranks per node >= 1 and 1 <= NICs a node <= "
                  "ranks per node");
    }
    const int ranks = nodes * per_node;
    std::vector<link> links;
    for (int r = 0; r < ranks; ++r) {
      links.push_back({"rank " + std::to_string(r) + " scale-up out", scale_up.bytes_per_s(),
                       scale_up.latency_us * 1e-6, tier::scale_up});
      links.push_back({"rank " + std::to_string(r) + " scale-up in", scale_up.bytes_per_s(), 0.0,
                       tier::scale_up});
    }
    const int first_nic = static_cast<int>(links.size());
    for (int n = 0; n < nodes; ++n) {
      for (int i = 0; i < nics; ++i) {
        const std::string nic = "node " + std::to_string(n) + " nic " + std::to_string(i);
        links.push_back(
            {nic + " out", scale_out.bytes_per_s(), scale_out.latency_us * 1e-6, tier::scale_out});
        links.push_back({nic + " in", scale_out.bytes_per_s(), 0.0, tier::scale_out});
      }
    }
    std::vector<int> node_of;
    for (int r = 0; r < ranks; ++r) node_of.push_back(r / per_node);
    return fabric(
        "nodes", ranks, std::move(links),
        [=](int from, int to, std::vector<int>& out) {
          const int a = from / per_node, b = to / per_node;
          if (a == b) {
            out.push_back(2 * from);
            out.push_back(2 * to + 1);
            return;
          }
          // A rank's NIC: local index modulo the NICs (rank i of a node uses NIC i % nics).
          out.push_back(first_nic + 2 * (a * nics + (from % per_node) % nics));
          out.push_back(first_nic + 2 * (b * nics + (to % per_node) % nics) + 1);
        },
        std::move(node_of));
  }

 private:
  std::string name_;
  int ranks_;
  std::vector<link> links_;
  router route_;
  std::vector<int> node_of_;
  double memory_bytes_per_s_ = 0;
  std::vector<reducing_switch> switches_;
  double launch_s_ = 0;
};

}  // namespace weft::sim
