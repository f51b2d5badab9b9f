// weft/transport/sim/machines.hpp — the machines the field builds, as simulated fabrics: a
// scale-up domain (NVLink, an NVL72 rack, a UALink pod) and a scale-out network of Clos tiers
// between the domains.
//
//   auto racks = weft::sim::cluster(4, weft::sim::nvl72(), weft::sim::ethernet(800));
//   auto pod = weft::sim::cluster(1, weft::sim::ualink_pod(1024, 4), {});
//   auto hgx = weft::sim::cluster(16, weft::sim::hgx_h200(),   // 4:1 at the leaves
//                                 weft::sim::ethernet(400).with_tiers(3, 4.0));
//
// A domain is `gpus` ranks, each with a port (one link out, one in) into a switch that never
// blocks (an NVLink switch, a UALink switch). Between domains each rank leaves through a NIC of
// its domain (its own, or one shared: `nics`), and the NICs hang off leaf switches: one tier
// (every NIC on one switch that never blocks), two (leaves and spines) or three (leaves,
// spines and cores, spines grouped in pods). A leaf has `leaf_ports` NICs below it and
// leaf_ports / oversubscription uplinks of the NIC's speed, one to each spine; a message
// between leaves takes one spine, picked by a hash of the two ranks (ECMP), and in three tiers
// a core the same way. Every link is one physical link: messages on it take turns
// (weft/transport/sim/fabric.hpp). Latencies are per crossing: a scale-up port's, a NIC's, and
// each link between switches.
#pragma once

#include "weft/error.hpp"
#include "weft/transport/sim/fabric.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace weft::sim {

// A scale-up domain: `gpus` ranks, each a port of `gbyte_per_s` in each direction (a vendor's
// "GB/s a GPU" counts both directions together: halve it) into a switch that never blocks;
// `memory_gbyte_per_s` is each GPU's memory (reductions). What software reaches of it:
//   efficiency         the share of the line rate a collective's messages move at (protocol,
//                      flow control and synchronization overhead);
//   latency_us         one message's one-way latency, wire and protocol together;
//   switch_efficiency  the share of the line rate an in-switch reduction moves at (NVLink
//                      SHARP's multimem loads and stores); 0: the switch does not reduce;
//   switch_latency_us  one in-switch operation's latency;
//   launch_us          what each call costs before its first byte moves (a kernel launch and
//                      the library's setup), on every rank.
// docs/simulator.md has each figure's source and the measurements it is checked against.
struct scale_up_domain {
  std::string name = "domain";
  int gpus = 8;
  double gbyte_per_s = 450;
  double latency_us = 0.5;
  double memory_gbyte_per_s = 4800;
  double efficiency = 1;
  double switch_efficiency = 0;
  double switch_latency_us = 0;
  double launch_us = 0;
};

// What NVIDIA's GPUs reach of NVLink through a collective library (NCCL's figures; each is
// checked against the measurements in docs/simulator.md's validation table):
//   ring messages at 0.82 of the line rate: an NCCL maintainer states "~20%" protocol overhead,
//     370 of NVLink 4's 450 GB/s (NVIDIA/nccl-tests#212), the busbw of every ring from 2 to 8
//     H100s (NVIDIA/nccl#1455);
//   NVLink SHARP at 0.68 of it: 8 H100s reach an allreduce algbw of 273 GB/s (nccl#1455), each
//     port moving (1 + 1/8) of the data each way;
//   a call's launch, 6.0 us: the ring allreduce of 8 bytes on 2 and 8 A100s (nccl-tests#123: 10
//     and 33.7 us, 2 and 14 messages) is 6.0 us plus 1.98 us a message;
//   a message's latency on NVLink 4, 0.94 us: the ring allreduce of 128 bytes on 8 H100s through
//     torch.distributed, 19.2 us (ByteDance-Seed/Triton-distributed#57), less the launch, over
//     its 14 messages;
//   an in-switch operation's latency, 18 us: 2 x 8 H20s' NVLink SHARP + tree allreduce of 4 B to
//     1 KiB, 46-48 us (nccl#1244), less the launch and the two messages across the network.
inline constexpr double nvlink_efficiency = 0.82;
inline constexpr double nvlink_switch_efficiency = 0.68;
inline constexpr double nvlink_latency_us = 0.94;
inline constexpr double nvlink_switch_latency_us = 18;
inline constexpr double gpu_launch_us = 6.0;

// A domain of `gpus` NVIDIA GPUs on NVLink switches at `gbyte_per_s` each way, at the
// efficiencies and latencies above; `reduces`: the switches reduce (NVLink SHARP, from NVLink 4).
inline scale_up_domain nvlink_domain(std::string name, int gpus, double gbyte_per_s,
                                     double memory_gbyte_per_s, bool reduces) {
  return {std::move(name),
          gpus,
          gbyte_per_s,
          nvlink_latency_us,
          memory_gbyte_per_s,
          nvlink_efficiency,
          reduces ? nvlink_switch_efficiency : 0.0,
          reduces ? nvlink_switch_latency_us : 0.0,
          gpu_launch_us};
}

// An HGX H200 board: 8 GPUs, NVLink 4 (the vendor's "900 GB/s a GPU": 18 links of 25 GB/s in
// each direction, both directions counted), so 450 GB/s each way; NVLink SHARP in its four
// NVSwitches; HBM3e 4.8 TB/s. The H100's board is the same NVLink (HBM3 3.35 TB/s), the H800's
// has 8 links a GPU (200 GB/s each way).
inline scale_up_domain hgx_h200() { return nvlink_domain("hgx-h200", 8, 450, 4800, true); }
// A DGX A100: 8 GPUs, NVLink 3 (the vendor's "600 GB/s a GPU": 12 links of 25 GB/s each way),
// so 300 GB/s each way; no in-switch reduction; HBM2e 2 TB/s; 1.98 us a message (the A100
// measurement above).
inline scale_up_domain dgx_a100() {
  auto domain = nvlink_domain("dgx-a100", 8, 300, 2000, false);
  domain.latency_us = 1.98;
  return domain;
}
// An NVL72 rack: 72 GPUs through the NVLink switch, NVLink 5 (the vendor's "1.8 TB/s a GPU",
// 130 TB/s a rack, both directions counted), so 900 GB/s each way, with NVLink SHARP; HBM3e
// 8 TB/s. Its efficiencies and latencies are NVLink 4's: no measurement of NVLink 5 is in the
// validation table.
inline scale_up_domain nvl72() { return nvlink_domain("nvl72", 72, 900, 8000, true); }
// A UALink pod of `accelerators` (up to 1024), each with `lanes` lanes of 200 Gbit/s in each
// direction (the UALink 200G specification's lane rate, one way). No measurement of UALink is
// published: its links run at NVLink's efficiency and latency, its accelerators launch as GPUs
// do, and its switch does not reduce (the 1.0 specification has no in-switch collectives).
inline scale_up_domain ualink_pod(int accelerators, int lanes) {
  if (accelerators < 1 || accelerators > 1024 || lanes < 1) {
    throw error(errc::invalid_argument,
                "a UALink pod has 1 to 1024 accelerators and at least one lane each (was " +
                    std::to_string(accelerators) + " and " + std::to_string(lanes) + ")");
  }
  return nvlink_domain("ualink", accelerators, lanes * 200.0 / 8, 4800, false);
}

// The network between domains.
struct scale_out_network {
  double nic_gbit_per_s = 400;
  int nics = 0;       // NICs a domain; 0: one a GPU (each rank its own)
  bool rails = true;  // NIC i of every domain on the same leaves (rail-optimized)
  int tiers = 1;      // 1: one switch that never blocks; 2: leaf-spine; 3: leaf-spine-core
  double oversubscription = 1;  // NICs below a leaf over its uplinks
  int leaf_ports = 32;          // NICs below a leaf
  int pod_leaves = 16;          // leaves a pod (three tiers)
  double nic_latency_us = 2;    // a message through a NIC and its leaf, one way
  double hop_latency_us = 1;    // each link between switches
  double efficiency = 1;        // the share of the NIC's line rate messages move at
  // SHARP: a one-tier network's switch reduces (InfiniBand SHARP), at this share of the NIC's
  // rate and this latency an operation; 0: it does not.
  double switch_efficiency = 0;
  double switch_latency_us = 0;

  scale_out_network& with_tiers(int t, double ratio = 1) {
    tiers = t;
    oversubscription = ratio;
    return *this;
  }
  // The network's switch reduces (InfiniBand SHARP): one tier only.
  scale_out_network& with_in_switch_reduction(double share_of_line_rate, double latency_us) {
    switch_efficiency = share_of_line_rate;
    switch_latency_us = latency_us;
    return *this;
  }
};

// Ethernet scale-out (as the Ultra Ethernet specification classes a backend network: under
// 10 us one way): NICs of `gbit_per_s` in each direction (a NIC's rated speed, "400GbE", is
// one way), one a GPU, rail-optimized, one tier.
inline scale_out_network ethernet(double gbit_per_s) {
  scale_out_network net;
  net.nic_gbit_per_s = gbit_per_s;
  return net;
}

// The path a message between two ranks takes through the Clos (ECMP): a hash of the two
// ranks (splitmix64's finalizer), the same for every message of the pair.
inline std::uint64_t ecmp_hash(int from, int to) {
  std::uint64_t x =
      (static_cast<std::uint64_t>(static_cast<unsigned>(from)) << 32 | static_cast<unsigned>(to)) +
      0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// `domains` scale-up domains joined by `net`. Ranks 0..gpus-1 are domain 0, and so on; the
// hosts weft::hierarchical sees are the domains.
inline fabric cluster(int domains, const scale_up_domain& up, const scale_out_network& net) {
  const int g = up.gpus;
  const int nics = net.nics == 0 ? g : net.nics;
  if (domains < 1 || g < 1 || nics < 1 || nics > g || net.tiers < 1 || net.tiers > 3 ||
      !(net.oversubscription >= 1) || net.leaf_ports < 1 || net.pod_leaves < 1 ||
      !(up.gbyte_per_s > 0) || !(net.nic_gbit_per_s > 0) || !(up.efficiency > 0) ||
      !(up.efficiency <= 1) || !(net.efficiency > 0) || !(net.efficiency <= 1) ||
      !(up.switch_efficiency >= 0) || !(up.switch_efficiency <= 1) ||
      !(net.switch_efficiency >= 0) || !(net.switch_efficiency <= 1) ||
      (net.switch_efficiency > 0 && net.tiers != 1)) {
    throw error(errc::invalid_argument,
                "simulated cluster: needs domains >= 1, GPUs a domain >= 1, 1 <= NICs a domain <= "
                "GPUs a domain, "
                "1 to 3 tiers, oversubscription >= 1, leaf ports and pod leaves >= 1, positive "
                "bandwidths, efficiencies in (0, 1], switch efficiencies in [0, 1] and a reducing "
                "network of one tier");
  }
  const int ranks = domains * g;
  const link_speed port{up.gbyte_per_s * 8 * up.efficiency, up.latency_us};
  const double nic_bytes = net.nic_gbit_per_s * 1e9 / 8 * net.efficiency;
  std::vector<link> links;
  for (int r = 0; r < ranks; ++r) {
    links.push_back({"rank " + std::to_string(r) + " scale-up out", port.bytes_per_s(),
                     port.latency_us * 1e-6, tier::scale_up});
    links.push_back(
        {"rank " + std::to_string(r) + " scale-up in", port.bytes_per_s(), 0.0, tier::scale_up});
  }
  // NIC k of domain d is global NIC d * nics + k; its leaf: rail-optimized, the NICs of one
  // index across leaf_ports domains share a leaf; otherwise consecutive NICs do.
  const int total_nics = domains * nics;
  const int first_nic = static_cast<int>(links.size());
  for (int n = 0; n < total_nics; ++n) {
    const std::string name =
        "domain " + std::to_string(n / nics) + " nic " + std::to_string(n % nics);
    links.push_back({name + " out", nic_bytes, net.nic_latency_us * 1e-6, tier::scale_out});
    links.push_back({name + " in", nic_bytes, 0.0, tier::scale_out});
  }
  const int groups = (domains + net.leaf_ports - 1) / net.leaf_ports;  // rail leaves per NIC index
  auto leaf_of = [=](int nic) {
    const int d = nic / nics, k = nic % nics;
    return net.rails ? k * groups + d / net.leaf_ports : nic / net.leaf_ports;
  };
  const int leaves = net.rails ? nics * groups : (total_nics + net.leaf_ports - 1) / net.leaf_ports;
  const int uplinks =
      std::max(1, static_cast<int>(net.leaf_ports / net.oversubscription));  // = spines a pod
  const int pods = net.tiers == 3 ? (leaves + net.pod_leaves - 1) / net.pod_leaves : 1;
  const int cores_a_spine =
      net.tiers == 3 ? net.pod_leaves : 0;  // a spine's uplinks: as many as its leaves
  const double hop = net.hop_latency_us * 1e-6;
  // leaf l <-> spine s of its pod: up at first_up + 2 (l * uplinks + s), down + 1
  const int first_up = static_cast<int>(links.size());
  if (net.tiers >= 2) {
    for (int l = 0; l < leaves; ++l) {
      for (int s = 0; s < uplinks; ++s) {
        const std::string name = "leaf " + std::to_string(l) + " spine " + std::to_string(s);
        links.push_back({name + " up", nic_bytes, hop, tier::scale_out});
        links.push_back({name + " down", nic_bytes, hop, tier::scale_out});
      }
    }
  }
  // spine s of pod q <-> core c (of spine index s):
  //   at first_core + 2 ((q * uplinks + s) * cores_a_spine + c)
  const int first_core = static_cast<int>(links.size());
  if (net.tiers == 3) {
    for (int q = 0; q < pods; ++q) {
      for (int s = 0; s < uplinks; ++s) {
        for (int c = 0; c < cores_a_spine; ++c) {
          const std::string name = "pod " + std::to_string(q) + " spine " + std::to_string(s) +
                                   " core " + std::to_string(c);
          links.push_back({name + " up", nic_bytes, hop, tier::scale_out});
          links.push_back({name + " down", nic_bytes, hop, tier::scale_out});
        }
      }
    }
  }
  std::vector<int> node_of;
  for (int r = 0; r < ranks; ++r) node_of.push_back(r / g);
  const int tiers = net.tiers, pod_leaves = net.pod_leaves;
  std::string name = std::to_string(domains) + " x " + up.name;
  if (domains > 1) {
    name += ", " + std::to_string(tiers) + "-tier scale-out";
    if (net.oversubscription > 1) {
      char ratio[32];
      std::snprintf(ratio, sizeof(ratio), " %g:1", net.oversubscription);
      name += ratio;
    }
  }
  fabric result(
      name, ranks, std::move(links),
      [=](int from, int to, std::vector<int>& out) {
        const int a = from / g, b = to / g;
        if (a == b) {
          out.push_back(2 * from);
          out.push_back(2 * to + 1);
          return;
        }
        const int nic_a = a * nics + (from % g) % nics, nic_b = b * nics + (to % g) % nics;
        out.push_back(first_nic + 2 * nic_a);
        const int la = leaf_of(nic_a), lb = leaf_of(nic_b);
        if (la != lb && tiers >= 2) {
          const std::uint64_t hash = ecmp_hash(from, to);
          const int s = static_cast<int>(hash % static_cast<std::uint64_t>(uplinks));
          out.push_back(first_up + 2 * (la * uplinks + s));
          const int qa = la / pod_leaves, qb = lb / pod_leaves;
          if (tiers == 3 && qa != qb) {
            const int c = static_cast<int>((hash / static_cast<std::uint64_t>(uplinks)) %
                                           static_cast<std::uint64_t>(cores_a_spine));
            out.push_back(first_core + 2 * ((qa * uplinks + s) * cores_a_spine + c));
            out.push_back(first_core + 2 * ((qb * uplinks + s) * cores_a_spine + c) + 1);
          }
          out.push_back(first_up + 2 * (lb * uplinks + s) + 1);
        }
        out.push_back(first_nic + 2 * nic_b + 1);
      },
      std::move(node_of));
  result.with_memory_bandwidth(up.memory_gbyte_per_s);
  result.with_launch_overhead(up.launch_us);
  if (up.switch_efficiency > 0) {  // each domain's NVLink switches reduce
    for (int d = 0; d < domains; ++d) {
      reducing_switch domain{up.name + " " + std::to_string(d) + " switch",
                             {},
                             {},
                             up.gbyte_per_s * 1e9 * up.switch_efficiency,
                             up.switch_latency_us * 1e-6};
      for (int r = d * g; r < (d + 1) * g; ++r) {
        domain.ranks.push_back(r);
        domain.ports.emplace_back(2 * r, 2 * r + 1);
      }
      result.with_reducing_switch(std::move(domain));
    }
  }
  if (net.switch_efficiency > 0 && domains > 1) {  // the network's one switch reduces
    reducing_switch network{"network switch",
                            {},
                            {},
                            net.nic_gbit_per_s * 1e9 / 8 * net.switch_efficiency,
                            net.switch_latency_us * 1e-6};
    for (int r = 0; r < ranks; ++r) {
      const int nic = (r / g) * nics + (r % g) % nics;
      network.ranks.push_back(r);
      network.ports.emplace_back(first_nic + 2 * nic, first_nic + 2 * nic + 1);
    }
    result.with_reducing_switch(std::move(network));
  }
  return result;
}

}  // namespace weft::sim
