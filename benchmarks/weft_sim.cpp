// weft-sim: weft's collectives on a simulated machine, in weft-bench's columns plus where the
// bytes went (weft/transport/sim.hpp; docs/simulator.md has the model).
//
//   weft-sim --fabric nvl72 --nodes 4 --collective allreduce -b 1M -e 1G -f 32
//            --algorithm 'ring,recursive_halving,hierarchical(ring,ring),automatic'
//            [--json out.json] [--traffic traffic.svg] [--tiers-svg tiers.svg]
//
// Fabrics (weft/transport/sim/machines.hpp): hgx (--nodes domains of --gpus-per-node GPUs:
// NVLink --scale-up-gbps, --scale-up-us; HBM --memory-gbs), nvl72 (racks of --gpus-per-node
// GPUs, 72 unless fewer are asked for, at 1.8 TB/s), ualink (pods of --accelerators with --lanes
// lanes of 200 Gbit/s each), and uniform
// (--ranks ports of --gbps at --latency-us into a switch that never blocks: the alpha-beta
// machine; computing is free unless --memory-gbs). Between domains: --nics a domain (default
// one a GPU) of --scale-out-gbps at --scale-out-us, through --tiers 1, 2 or 3 of Clos with
// --oversubscription at the leaves (--leaf-ports NICs a leaf, --pod-leaves leaves a pod),
// --hop-us a link between switches. Buffers are phantom: nothing is moved, so sizes and rank
// counts are those of the machine simulated. --traffic draws each run's rank x rank traffic at
// the largest size as a heat map, --tiers-svg the bytes that stayed in and left the scale-up
// domains. A flag the chosen fabric has no use for is refused (--ranks on nvl72, --lanes on hgx,
// scale-out flags on a single domain), never ignored. Exit 0, 2 for bad flags, 1 when a run
// failed.
#include "bench_cli.hpp"
#include "sim_pictures.hpp"

#include <weft/transport/sim.hpp>
#include <weft/weft.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct sim_settings {
  std::string fabric = "hgx";
  int nodes = 0;          // 0: the fabric's (hgx 2, nvl72 and ualink 1)
  int gpus_per_node = 8;  // hgx; an nvl72 rack: 72 unless given
  int nics = 0;           // 0: one a GPU
  double scale_up_gbps = 3600, scale_up_us = weft::sim::nvlink_latency_us;
  // what software reaches of the links (weft/transport/sim/machines.hpp): the machine's unless
  // given
  double scale_up_efficiency = weft::sim::nvlink_efficiency;
  double switch_efficiency = weft::sim::nvlink_switch_efficiency;
  double switch_us = weft::sim::nvlink_switch_latency_us;
  double launch_us = weft::sim::gpu_launch_us;
  double scale_out_efficiency = 1;
  double sharp_efficiency = 0, sharp_us = 0;
  double scale_out_gbps = 400, scale_out_us = 2;
  double memory_gbs = 4800;
  int accelerators = 1024, lanes = 4;  // ualink
  int tiers = 1;
  double oversubscription = 1;
  int leaf_ports = 32, pod_leaves = 16;
  double hop_us = 1;
  std::string traffic_svg, tiers_svg;
  bool given_scale_up = false, given_memory = false;
  int ranks = 8;  // uniform
  double gbps = 400, latency_us = 2;
  std::string collective = "allreduce";
  std::vector<std::string> algorithms = {"automatic"};
  std::size_t min_bytes = std::size_t{1} << 20, max_bytes = std::size_t{1} << 30, factor = 4;
  std::string json;
  std::set<std::string> given;  // the flags on the command line
};

// The flags, with their defaults: to stdout for --help (exit 0), to stderr after a problem
// (exit 2).
[[noreturn]] void usage(const std::string& problem) {
  const sim_settings d;
  std::FILE* out = problem.empty() ? stdout : stderr;
  if (!problem.empty()) std::fprintf(out, "weft-sim: %s\n", problem.c_str());
  std::fprintf(
      out,
      "usage: weft-sim [flags]   (predicts a collective's time on a machine; defaults in "
      "brackets)\n"
      "  --fabric hgx|nvl72|ualink|uniform  the machine [%s]\n"
      "  --nodes N                 nodes (hgx) or racks (nvl72) [hgx 2, nvl72 and ualink 1]\n"
      "  --gpus-per-node G         GPUs of an hgx node [%d] or an nvl72 rack [72, at most]\n"
      "  --nics K                  scale-out NICs of a node [one a GPU]\n"
      "  --accelerators N --lanes L  a UALink pod [%d, %d]\n"
      "  --scale-up-gbps X --scale-up-us X  the scale-up links, each way, and a message's\n"
      "                            latency [%g Gbit/s, %g us]\n"
      "  --scale-up-efficiency X   the share of the line rate messages move at [%g]\n"
      "  --switch-efficiency X --switch-us X  the scale-up switch's reductions (algorithm\n"
      "                            in_switch): share of the line rate, latency; 0: none\n"
      "                            [%g, %g us; ualink 0]\n"
      "  --launch-us X             what each call costs before its first byte [%g us]\n"
      "  --memory-gbs X            HBM bandwidth [%g GB/s]\n"
      "  --scale-out-gbps X --scale-out-us X  the scale-out network [%g Gbit/s, %g us]\n"
      "  --scale-out-efficiency X  the share of a NIC's line rate messages move at [%g]\n"
      "  --sharp-efficiency X --sharp-us X  a one-tier network whose switch reduces\n"
      "                            (InfiniBand SHARP): share of the NIC's rate, latency [none]\n"
      "  --tiers 1|2|3 --oversubscription R --leaf-ports K --pod-leaves K --hop-us X\n"
      "                            the Clos network [%d, %g, %d, %d, %g us]\n"
      "  --ranks N --gbps X --latency-us X  the uniform fabric [%d, %g Gbit/s, %g us]\n"
      "  --collective allreduce|reduce_scatter|allgather|broadcast|alltoall [%s]\n"
      "  --algorithm A[,B...]      any WEFT_ALGO spelling (ring, recursive_halving,\n"
      "                            hierarchical(ring,ring), ...) or automatic [automatic]\n"
      "  -b MIN_BYTES -e MAX_BYTES -f FACTOR  the sizes, with K, M and G suffixes (powers of\n"
      "                            1024) [%zu, %zu, %zu]\n"
      "  --json FILE --traffic FILE.svg --tiers-svg FILE.svg  results and pictures [none]\n"
      "  --help                    this text\n",
      d.fabric.c_str(), d.gpus_per_node, d.accelerators, d.lanes, d.scale_up_gbps, d.scale_up_us,
      d.scale_up_efficiency, d.switch_efficiency, d.switch_us, d.launch_us, d.memory_gbs,
      d.scale_out_gbps, d.scale_out_us, d.scale_out_efficiency, d.tiers, d.oversubscription,
      d.leaf_ports, d.pod_leaves, d.hop_us, d.ranks, d.gbps, d.latency_us, d.collective.c_str(),
      d.min_bytes, d.max_bytes, d.factor);
  std::exit(problem.empty() ? 0 : 2);
}

// A finite number no smaller than `lowest` (or, `above`, larger than it).
double number(const std::string& flag, const char* text, double lowest, bool above = false) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  const bool in_range = above ? value > lowest : value >= lowest;
  if (end == text || *end != '\0' || !std::isfinite(value) || !in_range) {
    char bound[64];
    std::snprintf(bound, sizeof bound, "%s %g", above ? ">" : ">=", lowest);
    usage(flag + " wants a finite number " + bound + ", not '" + text + "'");
  }
  return value;
}

// A rate: a finite number larger than 0.
double rate(const std::string& flag, const char* text) { return number(flag, text, 0, true); }

// A share of a line rate: in (0, 1], or [0, 1] where 0 means "none".
double share(const std::string& flag, const char* text, bool zero_is_none) {
  const double value = number(flag, text, 0, !zero_is_none);
  if (value > 1) usage(flag + " is a share of the line rate, at most 1, not '" + text + "'");
  return value;
}

int whole(const std::string& flag, const char* text, int lowest) {
  const double value = number(flag, text, lowest);
  if (value != static_cast<int>(value))
    usage(flag + " wants a whole number, not '" + std::string(text) + "'");
  return static_cast<int>(value);
}

// Splits "a,b(c,d),e" at the commas outside parentheses.
std::vector<std::string> algorithm_list(const std::string& text) {
  std::vector<std::string> names;
  std::string current;
  int depth = 0;
  for (const char c : text) {
    if (c == ',' && depth == 0) {
      names.push_back(current);
      current.clear();
      continue;
    }
    depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    current += c;
  }
  names.push_back(current);
  for (const auto& name : names) {
    if (name.empty()) usage("--algorithm has an empty name in '" + text + "'");
  }
  return names;
}

// The domains (nodes, racks, pods) of the machine: --nodes, else the fabric's default.
int domain_count(const sim_settings& s) {
  return s.nodes != 0 ? s.nodes : s.fabric == "hgx" ? 2 : 1;
}

// The GPUs of one domain: a UALink pod's accelerators, an NVL72 rack's 72 unless
// --gpus-per-node says fewer, an HGX node's --gpus-per-node.
int gpus_a_domain(const sim_settings& s) {
  if (s.fabric == "ualink") return s.accelerators;
  if (s.fabric == "nvl72" && !s.given.contains("--gpus-per-node")) return weft::sim::nvl72().gpus;
  return s.gpus_per_node;
}

// How the chosen fabric is sized, for a refusal's hint.
std::string sized_by(const std::string& fabric) {
  if (fabric == "hgx") return "--nodes nodes of --gpus-per-node GPUs";
  if (fabric == "nvl72") return "--nodes racks of --gpus-per-node GPUs (72 at most)";
  if (fabric == "ualink") return "--nodes pods of --accelerators";
  return "--ranks";
}

// Refuses (exit 2) a flag the chosen fabric has no use for, rather than run a machine other
// than the one asked for: --ranks on nvl72 would otherwise simulate all 72 GPUs.
void refuse_what_does_not_apply(const sim_settings& s) {
  struct scope {
    const char* flag;
    std::set<std::string> fabrics;
  };
  const std::set<std::string> domains = {"hgx", "nvl72", "ualink"};
  const std::vector<scope> scopes = {
      {"--nodes", domains},
      {"--gpus-per-node", {"hgx", "nvl72"}},
      {"--accelerators", {"ualink"}},
      {"--lanes", {"ualink"}},
      {"--scale-up-gbps", {"hgx", "nvl72"}},  // a UALink port is its --lanes
      {"--scale-up-us", domains},
      {"--scale-up-efficiency", domains},
      {"--switch-efficiency", {"hgx", "nvl72"}},  // UALink's switch does not reduce
      {"--switch-us", {"hgx", "nvl72"}},
      {"--launch-us", domains},
      {"--ranks", {"uniform"}},
      {"--gbps", {"uniform"}},
      {"--latency-us", {"uniform"}},
  };
  for (const auto& [flag, fabrics] : scopes) {
    if (!s.given.contains(flag) || fabrics.contains(s.fabric)) continue;
    std::string hint = "; --fabric " + s.fabric + " is sized by " + sized_by(s.fabric);
    if (std::string(flag) == "--scale-up-gbps") hint = "; a UALink port is set by --lanes";
    std::string where;
    for (const auto& f : fabrics) {
      where += (where.empty() ? "" : f == *fabrics.rbegin() ? " or " : ", ") + f;
    }
    usage(std::string(flag) + " applies to --fabric " + where + ", not " + s.fabric + hint);
  }
  // Scale-out flags need domains to join.
  const std::vector<const char*> scale_out = {"--nics",
                                              "--scale-out-gbps",
                                              "--scale-out-us",
                                              "--tiers",
                                              "--oversubscription",
                                              "--leaf-ports",
                                              "--pod-leaves",
                                              "--hop-us",
                                              "--scale-out-efficiency",
                                              "--sharp-efficiency",
                                              "--sharp-us"};
  for (const char* flag : scale_out) {
    if (!s.given.contains(flag)) continue;
    if (s.fabric == "uniform") {
      usage(std::string(flag) + " sets the network between domains; --fabric uniform has none");
    }
    if (domain_count(s) == 1) {
      usage(std::string(flag) + " sets the network between domains, and this " + s.fabric +
            " machine is one domain; ask for more with --nodes");
    }
  }
}

sim_settings parse(int argc, char** argv) {
  sim_settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") usage("");
    if (i + 1 >= argc) usage(flag + " needs a value");
    const char* value = argv[++i];
    s.given.insert(flag);
    if (flag == "--fabric")
      s.fabric = value;
    else if (flag == "--nodes")
      s.nodes = whole(flag, value, 1);
    else if (flag == "--gpus-per-node")
      s.gpus_per_node = whole(flag, value, 1);
    else if (flag == "--nics")
      s.nics = whole(flag, value, 1);
    else if (flag == "--scale-up-gbps")
      s.scale_up_gbps = rate(flag, value), s.given_scale_up = true;
    else if (flag == "--scale-up-us")
      s.scale_up_us = number(flag, value, 0);
    else if (flag == "--scale-up-efficiency")
      s.scale_up_efficiency = share(flag, value, false);
    else if (flag == "--switch-efficiency")
      s.switch_efficiency = share(flag, value, true);
    else if (flag == "--switch-us")
      s.switch_us = number(flag, value, 0);
    else if (flag == "--launch-us")
      s.launch_us = number(flag, value, 0);
    else if (flag == "--scale-out-efficiency")
      s.scale_out_efficiency = share(flag, value, false);
    else if (flag == "--sharp-efficiency")
      s.sharp_efficiency = share(flag, value, false);
    else if (flag == "--sharp-us")
      s.sharp_us = number(flag, value, 0);
    else if (flag == "--accelerators")
      s.accelerators = whole(flag, value, 1);
    else if (flag == "--lanes")
      s.lanes = whole(flag, value, 1);
    else if (flag == "--tiers")
      s.tiers = whole(flag, value, 1);
    else if (flag == "--oversubscription")
      s.oversubscription = number(flag, value, 1);
    else if (flag == "--leaf-ports")
      s.leaf_ports = whole(flag, value, 1);
    else if (flag == "--pod-leaves")
      s.pod_leaves = whole(flag, value, 1);
    else if (flag == "--hop-us")
      s.hop_us = number(flag, value, 0);
    else if (flag == "--traffic")
      s.traffic_svg = value;
    else if (flag == "--tiers-svg")
      s.tiers_svg = value;
    else if (flag == "--scale-out-gbps")
      s.scale_out_gbps = rate(flag, value);
    else if (flag == "--scale-out-us")
      s.scale_out_us = number(flag, value, 0);
    else if (flag == "--memory-gbs")
      s.memory_gbs = number(flag, value, 0), s.given_memory = true;
    else if (flag == "--ranks")
      s.ranks = whole(flag, value, 1);
    else if (flag == "--gbps")
      s.gbps = rate(flag, value);
    else if (flag == "--latency-us")
      s.latency_us = number(flag, value, 0);
    else if (flag == "--collective")
      s.collective = value;
    else if (flag == "--algorithm")
      s.algorithms = algorithm_list(value);
    else if (flag == "--json")
      s.json = value;
    else if (flag == "-b" || flag == "-e" || flag == "-f") {
      const auto bytes = weft_bench::size_value(value);
      if (!bytes || (flag == "-f" && *bytes < 2))
        usage(flag + " wants a size such as 8, 64K or 16M, not '" + value + "'");
      (flag == "-b" ? s.min_bytes : flag == "-e" ? s.max_bytes : s.factor) = *bytes;
    } else {
      usage("unknown flag " + flag);
    }
  }
  if (s.fabric != "hgx" && s.fabric != "nvl72" && s.fabric != "ualink" && s.fabric != "uniform") {
    usage("--fabric '" + s.fabric + "' is not hgx, nvl72, ualink or uniform");
  }
  if (s.tiers > 3) usage("--tiers is 1, 2 or 3");
  if (s.given.contains("--sharp-efficiency") && s.tiers != 1)
    usage("--sharp-efficiency: a reducing network switch is one tier (--tiers 1)");
  if (s.given.contains("--sharp-us") && !s.given.contains("--sharp-efficiency"))
    usage("--sharp-us sets the latency of a network switch that reduces: give --sharp-efficiency");
  if (s.given.contains("--switch-us") && s.switch_efficiency == 0)
    usage("--switch-us: the scale-up switch does not reduce (--switch-efficiency 0)");
  if (s.accelerators > 1024) usage("--accelerators: a UALink pod has at most 1024");
  const std::vector<std::string> collectives = {"allreduce", "reduce_scatter", "allgather",
                                                "broadcast", "alltoall"};
  if (std::find(collectives.begin(), collectives.end(), s.collective) == collectives.end()) {
    usage("--collective '" + s.collective +
          "' is not one of allreduce, reduce_scatter, allgather, broadcast, alltoall");
  }
  if (s.fabric == "nvl72" && s.given.contains("--gpus-per-node") && s.gpus_per_node > 72)
    usage("--gpus-per-node: an NVL72 rack has at most 72 GPUs");
  const int domain_gpus = gpus_a_domain(s);
  if (s.fabric != "uniform" && s.nics > domain_gpus)
    usage("--nics must not exceed the GPUs of a domain (" + std::to_string(domain_gpus) + ")");
  refuse_what_does_not_apply(s);
  if (s.min_bytes < sizeof(float)) usage("-b must be at least 4 bytes (one float)");
  if (s.min_bytes > s.max_bytes) usage("-b must not exceed -e");
  return s;
}

weft::sim::fabric machine_of(const sim_settings& s) {
  if (s.fabric == "uniform") {
    auto flat =
        weft::sim::fabric::uniform(s.ranks, {.gbit_per_s = s.gbps, .latency_us = s.latency_us});
    if (s.given_memory) flat.with_memory_bandwidth(s.memory_gbs);  // else computing is free
    return flat;
  }
  weft::sim::scale_up_domain domain = weft::sim::hgx_h200();
  if (s.fabric == "nvl72") domain = weft::sim::nvl72();
  if (s.fabric == "ualink") domain = weft::sim::ualink_pod(s.accelerators, s.lanes);
  domain.gpus = gpus_a_domain(s);
  if (s.fabric == "hgx" || s.given_scale_up) domain.gbyte_per_s = s.scale_up_gbps / 8;
  domain.latency_us = s.scale_up_us;
  domain.efficiency = s.scale_up_efficiency;
  domain.launch_us = s.launch_us;
  if (s.fabric != "ualink") {
    domain.switch_efficiency = s.switch_efficiency;
    domain.switch_latency_us = s.switch_us;
  }
  if (s.given_memory || s.fabric == "hgx") domain.memory_gbyte_per_s = s.memory_gbs;
  weft::sim::scale_out_network net = weft::sim::ethernet(s.scale_out_gbps);
  net.nics = s.nics;
  net.nic_latency_us = s.scale_out_us;
  net.hop_latency_us = s.hop_us;
  net.leaf_ports = s.leaf_ports;
  net.pod_leaves = s.pod_leaves;
  net.with_tiers(s.tiers, s.oversubscription);
  net.efficiency = s.scale_out_efficiency;
  net.with_in_switch_reduction(s.sharp_efficiency, s.sharp_us);
  return weft::sim::cluster(domain_count(s), domain, net);
}

// One call of the collective on this rank on `count` floats in its largest buffer (weft-bench's
// size: allreduce and broadcast the buffer, allgather the whole output, reduce_scatter the whole
// input, alltoall one rank's input; a multiple of the ranks for the last three); returns the
// algorithm that ran.
std::string call(weft::communicator<weft::sim::transport>& comm, const std::string& collective,
                 std::size_t count) {
  const std::size_t block = count / static_cast<std::size_t>(comm.size());
  if (collective == "allreduce") {
    weft::sim::phantom<float> data(count);
    return std::string(weft::allreduce(comm, data.span(), weft::sum{}).algorithm);
  }
  if (collective == "broadcast") {
    weft::sim::phantom<float> data(count);
    return std::string(weft::broadcast(comm, data.span(), 0).algorithm);
  }
  if (collective == "allgather") {
    weft::sim::phantom<float> mine(block), all(count);
    return std::string(
        weft::allgather(comm, std::span<const float>(mine.span()), all.span()).algorithm);
  }
  if (collective == "reduce_scatter") {
    weft::sim::phantom<float> all(count), mine(block);
    return std::string(
        weft::reduce_scatter(comm, std::span<const float>(all.span()), mine.span(), weft::sum{})
            .algorithm);
  }
  weft::sim::phantom<float> in(count), out(count);
  return std::string(weft::alltoall(comm, std::span<const float>(in.span()), out.span()).algorithm);
}

struct row {
  std::size_t bytes;
  std::string algorithm;
  std::string chosen;  // what ran (automatic's choice)
  weft::sim::report measured;
  double busbw;
  std::size_t hottest;
  double utilization;
};

std::string json_text(const std::string& text) {
  return "\"" + weft_bench::json_escape(text) + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  const sim_settings s = parse(argc, argv);
  const auto machine = machine_of(s);
  const int p = machine.ranks();
  std::printf("# weft-sim: fabric %s, %d ranks", machine.name().c_str(), p);
  if (s.fabric == "uniform") {
    std::printf(" (ports of %g Gbit/s, %g us)", s.gbps, s.latency_us);
  } else {
    const auto& port = machine.links().front();
    std::printf(" (scale-up ports %g GB/s each way at %g of it, %g us a message",
                port.bytes_per_s / s.scale_up_efficiency / 1e9, s.scale_up_efficiency,
                port.latency_s * 1e6);
    if (s.fabric != "ualink" && s.switch_efficiency > 0)
      std::printf(", the switch reducing at %g of it, %g us", s.switch_efficiency, s.switch_us);
    std::printf(", memory %g GB/s, launch %g us", machine.memory_bytes_per_s() / 1e9,
                machine.launch_seconds() * 1e6);
    if (machine.nodes().back() > 0) {  // more than one domain
      std::printf("; scale-out %s of %g Gbit/s %g us",
                  s.nics == 0 ? "a NIC a GPU" : (std::to_string(s.nics) + " NICs a domain").c_str(),
                  s.scale_out_gbps, s.scale_out_us);
      if (s.scale_out_efficiency < 1) std::printf(" at %g of it", s.scale_out_efficiency);
      if (s.tiers > 1) std::printf(", %d-port leaves, %g us a hop", s.leaf_ports, s.hop_us);
      if (s.sharp_efficiency > 0)
        std::printf(", the switch reducing at %g of it, %g us", s.sharp_efficiency, s.sharp_us);
    }
    std::printf(")");
  }
  std::printf(
      "\n# collective %s, float sum, phantom payload (simulated time; bytes counted once per "
      "message)\n",
      s.collective.c_str());
  std::printf("#%11s  %-30s %12s %9s %9s %12s %12s  %s\n", "size (B)", "algorithm", "time (us)",
              "algbw", "busbw", "scale-up B", "scale-out B", "hottest link (busy)");
  std::vector<row> rows;
  const auto started = std::chrono::steady_clock::now();
  auto last_progress = started;
  std::vector<std::size_t> sizes;
  for (std::size_t bytes = s.min_bytes; bytes <= s.max_bytes; bytes *= s.factor) {
    sizes.push_back(bytes);
    if (bytes > s.max_bytes / s.factor) break;
  }
  const std::size_t total = sizes.size() * s.algorithms.size();
  std::size_t runs = 0;
  int status = 0;
  for (const std::size_t asked : sizes) {
    const std::size_t count = weft_bench::element_count(s.collective, asked, sizeof(float), p);
    const std::size_t bytes = count * sizeof(float);
    if (count == 0) {
      std::printf("%12zu  %-30s skipped: under one float a rank\n", asked, s.collective.c_str());
      runs += s.algorithms.size();
      continue;
    }
    for (const auto& algorithm : s.algorithms) {
      if (algorithm == "automatic") {
        unsetenv("WEFT_ALGO");
      } else {
        const std::string spec = s.collective + "=" + algorithm;
        setenv("WEFT_ALGO", spec.c_str(), 1);
      }
      std::string chosen;
      try {
        const auto measured = weft::sim::run(
            machine,
            [&](weft::communicator<weft::sim::transport>& comm) {
              const std::string ran = call(comm, s.collective, count);
              if (comm.rank() == 0) chosen = ran;
            },
            weft::sim::payload::phantom);
        // The hottest link: the one busy longest (its bytes over its bandwidth).
        std::size_t hottest = 0;
        auto busy_seconds = [&](std::size_t l) {
          return measured.link_bytes[l] / machine.links()[l].bytes_per_s;
        };
        for (std::size_t l = 1; l < measured.link_bytes.size(); ++l) {
          if (busy_seconds(l) > busy_seconds(hottest)) hottest = l;
        }
        const auto& link = machine.links()[hottest];
        const double busy = measured.seconds > 0
                                ? measured.link_bytes[hottest] / link.bytes_per_s / measured.seconds
                                : 0;
        const double algbw =
            measured.seconds > 0 ? static_cast<double>(bytes) / measured.seconds / 1e9 : 0;
        const double busbw = algbw * weft_bench::bus_factor(s.collective, p);
        const std::string shown = algorithm == "automatic" ? "automatic: " + chosen : algorithm;
        std::printf("%12zu  %-30s %12.2f %9.2f %9.2f %12.4g %12.4g  %s (%.0f%%)\n", bytes,
                    shown.c_str(), measured.seconds * 1e6, algbw, busbw, measured.scale_up_bytes,
                    measured.scale_out_bytes, link.name.c_str(), 100 * busy);
        rows.push_back({bytes, algorithm, chosen, measured, busbw, hottest, busy});
      } catch (const std::exception& failure) {
        std::printf("%12zu  %-30s failed: %s\n", bytes, algorithm.c_str(), failure.what());
        status = 1;
      }
      std::fflush(stdout);
      ++runs;
      const auto now = std::chrono::steady_clock::now();
      if (now - last_progress > std::chrono::seconds(5)) {
        last_progress = now;
        std::fprintf(stderr, "weft-sim: %zu of %zu runs, %.0f s\n", runs, total,
                     std::chrono::duration<double>(now - started).count());
      }
    }
  }
  std::vector<weft_sim::picture_run> pictures;
  std::size_t largest = 0;
  for (const row& r : rows) largest = std::max(largest, r.bytes);
  for (const row& r : rows) {
    if (r.bytes != largest) continue;
    const std::string name = r.algorithm == "automatic" ? "automatic: " + r.chosen : r.algorithm;
    pictures.push_back({name + ", " + weft_sim::bytes_label(static_cast<double>(r.bytes)), p,
                        r.measured.traffic, r.measured.scale_up_bytes, r.measured.scale_out_bytes,
                        machine.nodes(), r.measured.seconds});
  }
  if (!s.traffic_svg.empty() && !weft_sim::write_traffic_svg(s.traffic_svg, pictures)) {
    std::fprintf(stderr, "weft-sim: could not write %s\n", s.traffic_svg.c_str());
    return 1;
  }
  if (!s.tiers_svg.empty() && !weft_sim::write_tiers_svg(s.tiers_svg, pictures)) {
    std::fprintf(stderr, "weft-sim: could not write %s\n", s.tiers_svg.c_str());
    return 1;
  }
  if (!s.json.empty()) {
    std::ofstream out(s.json);
    out.precision(17);
    out << "{\"fabric\": " << json_text(machine.name()) << ", \"ranks\": " << p
        << ", \"collective\": " << json_text(s.collective) << ", \"rows\": [";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const row& r = rows[i];
      char seconds[64];
      std::snprintf(seconds, sizeof(seconds), "%.17g", r.measured.seconds);
      out << (i ? ",\n  " : "\n  ") << "{\"bytes\": " << r.bytes
          << ", \"algorithm\": " << json_text(r.algorithm) << ", \"ran\": " << json_text(r.chosen)
          << ", \"seconds\": " << seconds << ", \"busbw_gbs\": " << r.busbw
          << ", \"scale_up_bytes\": " << r.measured.scale_up_bytes
          << ", \"scale_out_bytes\": " << r.measured.scale_out_bytes
          << ", \"messages\": " << r.measured.messages
          << ", \"hottest_link\": " << json_text(machine.links()[r.hottest].name)
          << ", \"hottest_busy\": " << r.utilization << ", \"links\": [";
      // Every link that carried bytes: its name, bytes and the share of the run it was busy.
      bool first_link = true;
      for (std::size_t l = 0; l < r.measured.link_bytes.size(); ++l) {
        if (r.measured.link_bytes[l] <= 0) continue;
        const auto& link = machine.links()[l];
        out << (first_link ? "" : ", ") << "{\"name\": " << json_text(link.name) << ", \"tier\": \""
            << weft::sim::to_string(link.tier) << "\", \"bytes\": " << r.measured.link_bytes[l]
            << ", \"busy\": "
            << (r.measured.seconds > 0
                    ? r.measured.link_bytes[l] / link.bytes_per_s / r.measured.seconds
                    : 0.0)
            << "}";
        first_link = false;
      }
      out << "], \"traffic\": ";
      // The rank x rank matrix (row: the rank sending), up to 256 ranks; null above.
      if (r.measured.traffic.empty() || p > 256) {
        out << "null";
      } else {
        for (int a = 0; a < p; ++a) {
          out << (a ? ", [" : "[[");
          for (int b = 0; b < p; ++b)
            out << (b ? "," : "") << r.measured.traffic[static_cast<std::size_t>(a) * p + b];
          out << "]";
        }
        out << "]";
      }
      out << "}";
    }
    out << "\n]}\n";
    if (!out) {
      std::fprintf(stderr, "weft-sim: could not write %s\n", s.json.c_str());
      return 1;
    }
  }
  return status;
}
