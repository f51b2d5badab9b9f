// sim-validation: the simulator's machines against published measurements of the same
// collective, algorithm and machine. Prints the table docs/simulator.md shows (Markdown), and
// fails (exit 1) when a cell's error passes 25%, the geometric-mean error passes 10%, or a
// prediction moved from the value pinned below by more than 0.5% (a model change must update
// the pin, and the docs with it).
//
//   sim-validation            the table, and the checks
//
// A cell is "fit" where one of the machine's figures was derived from it
// (weft/transport/sim/machines.hpp says which); the rest are predictions.
#include <weft/transport/sim.hpp>
#include <weft/weft.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace {

enum class metric { busbw, algbw, time_us };

struct cell {
  std::string what;     // the measurement, in words
  std::string source;   // where it is published
  std::string machine;  // as the table names it
  weft::sim::fabric fabric;
  std::string collective;  // allreduce or reduce_scatter
  std::string algorithm;   // weft's algorithm for the one measured
  std::size_t bytes;       // the call's largest buffer
  metric measure;
  double published;
  bool fit;
  double pinned;  // weft-sim's prediction when this table was last regenerated
};

weft::sim::fabric hgx(int gpus, double gbyte_per_s = 450) {
  auto domain = weft::sim::hgx_h200();
  domain.gpus = gpus;
  domain.gbyte_per_s = gbyte_per_s;
  domain.memory_gbyte_per_s = 3350;  // H100's HBM3 (the H800's and the H20's are alike)
  return weft::sim::cluster(1, domain, {});
}

weft::sim::fabric dgx_a100(int gpus) {
  auto domain = weft::sim::dgx_a100();
  domain.gpus = gpus;
  return weft::sim::cluster(1, domain, {});
}

weft::sim::fabric two_hgx_400g() {
  auto domain = weft::sim::hgx_h200();
  domain.memory_gbyte_per_s = 4000;  // the H20's HBM3
  return weft::sim::cluster(2, domain, weft::sim::ethernet(400));
}

// The simulated time of one call (seconds).
double simulate(const cell& c) {
  const auto report = weft::sim::run(
      c.fabric,
      [&](weft::communicator<weft::sim::transport>& comm) {
        const std::size_t count = c.bytes / sizeof(float);
        const std::size_t block = count / static_cast<std::size_t>(comm.size());
        auto with = [&](auto algorithm) {
          if (c.collective == "allreduce") {
            weft::sim::phantom<float> data(count);
            weft::allreduce(comm, data.span(), weft::sum{}, algorithm);
          } else {
            weft::sim::phantom<float> all(count), mine(block);
            weft::reduce_scatter(comm, std::span<const float>(all.span()), mine.span(), weft::sum{},
                                 algorithm);
          }
        };
        if (c.algorithm == "ring") with(weft::ring{});
        if (c.algorithm == "in_switch") with(weft::in_switch{});
        if (c.algorithm == "hierarchical(in_switch,ring)")
          with(weft::hierarchical<weft::in_switch, weft::ring>{});
      },
      weft::sim::payload::phantom);
  return report.seconds;
}

// The cell's figure from a simulated time, as nccl-tests computes it.
double figure(const cell& c, double seconds) {
  const double p = c.fabric.ranks();
  const double algbw = static_cast<double>(c.bytes) / seconds / 1e9;
  switch (c.measure) {
    case metric::busbw:
      return algbw * (c.collective == "allreduce" ? 2 * (p - 1) / p : (p - 1) / p);
    case metric::algbw:
      return algbw;
    default:
      return seconds * 1e6;
  }
}

const char* unit(metric m) { return m == metric::time_us ? "us" : "GB/s"; }
const char* name(metric m) {
  return m == metric::busbw ? "busbw" : m == metric::algbw ? "algbw" : "time";
}

std::string size_text(std::size_t bytes) {
  if (bytes >= (std::size_t{1} << 30)) return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (std::size_t{1} << 20)) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (std::size_t{1} << 10)) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

std::vector<cell> cells() {
  const std::string n1455 = "NVIDIA/nccl#1455", n212 = "NVIDIA/nccl-tests#212";
  const std::size_t gib2 = std::size_t{2} << 30;
  std::vector<cell> all;
  auto add = [&](cell c) { all.push_back(std::move(c)); };
  // Ring allreduce on H100s: 365-370 GB/s busbw at 2 to 4 GiB on 2 to 8 GPUs.
  add({"ring allreduce, 2 GPUs", n1455, "HGX H100", hgx(2), "allreduce", "ring", gib2,
       metric::busbw, 367.5, false, 316.3});
  add({"ring allreduce, 4 GPUs", n1455, "HGX H100", hgx(4), "allreduce", "ring", gib2,
       metric::busbw, 367.5, false, 349.2});
  add({"ring allreduce, 8 GPUs", n212 + ", " + n1455, "HGX H100", hgx(8), "allreduce", "ring", gib2,
       metric::busbw, 370, true, 359.7});
  // NVLink SHARP allreduce on H100s: algbw 258, 265, 270, 273 on 5 to 8 GPUs.
  add({"NVLS allreduce, 5 GPUs", n1455, "HGX H100", hgx(5), "allreduce", "in_switch", gib2,
       metric::algbw, 258, false, 254.3});
  add({"NVLS allreduce, 6 GPUs", n1455, "HGX H100", hgx(6), "allreduce", "in_switch", gib2,
       metric::algbw, 265, false, 261.5});
  add({"NVLS allreduce, 7 GPUs", n1455, "HGX H100", hgx(7), "allreduce", "in_switch", gib2,
       metric::algbw, 270, false, 267});
  add({"NVLS allreduce, 8 GPUs", n212 + ", " + n1455, "HGX H100", hgx(8), "allreduce", "in_switch",
       gib2, metric::algbw, 273, true, 271.2});
  // NVLink SHARP on H800s (8 NVLinks a GPU: 200 GB/s each way).
  add({"NVLS allreduce, 8 GPUs", "NVIDIA/nccl#1374", "HGX H800", hgx(8, 200), "allreduce",
       "in_switch", gib2, metric::busbw, 215, false, 211.3});
  // Ring reduce_scatter on 8 H100s, out of place, by size.
  const std::string n1047 = "NVIDIA/nccl#1047";
  add({"ring reduce_scatter, 8 GPUs", n1047, "HGX H100", hgx(8), "reduce_scatter", "ring",
       std::size_t{128} << 20, metric::busbw, 311.34, false, 348.1});
  add({"ring reduce_scatter, 8 GPUs", n1047, "HGX H100", hgx(8), "reduce_scatter", "ring",
       std::size_t{256} << 20, metric::busbw, 330.94, false, 358.2});
  add({"ring reduce_scatter, 8 GPUs", n1047, "HGX H100", hgx(8), "reduce_scatter", "ring",
       std::size_t{1} << 30, metric::busbw, 349.36, false, 366.2});
  add({"ring reduce_scatter, 8 GPUs", n1047, "HGX H100", hgx(8), "reduce_scatter", "ring",
       std::size_t{8} << 30, metric::busbw, 362.16, false, 368.7});
  // Ring allreduce of 8 bytes on A100s, one channel: the latency of 2 (p - 1) messages.
  const std::string n123 = "NVIDIA/nccl-tests#123";
  const double a100[] = {10, 13.76, 16.88, 20.8, 25.2, 29.5, 33.7};
  const double a100_pins[] = {9.96, 13.92, 17.88, 21.84, 25.8, 29.76, 33.72};
  for (int g = 2; g <= 8; ++g) {
    add({"ring allreduce, " + std::to_string(g) + " GPUs", n123, "DGX A100", dgx_a100(g),
         "allreduce", "ring", 8, metric::time_us, a100[g - 2], g == 2 || g == 8, a100_pins[g - 2]});
  }
  // Ring allreduce of 128 bytes on 8 H100s through torch.distributed.
  add({"ring allreduce, 8 GPUs", "ByteDance-Seed/Triton-distributed#57", "HGX H100", hgx(8),
       "allreduce", "ring", 128, metric::time_us, 19.19, true, 19.16});
  // NVLink SHARP + tree allreduce on 2 x 8 H20s, a 400 Gbit/s NIC a GPU.
  add({"NVLSTree allreduce, 2 x 8 GPUs", "NVIDIA/nccl#1244", "2 x HGX H20", two_hgx_400g(),
       "allreduce", "hierarchical(in_switch,ring)", 8, metric::time_us, 47.60, true, 46});
  add({"NVLSTree allreduce, 2 x 8 GPUs", "NVIDIA/nccl#1244", "2 x HGX H20", two_hgx_400g(),
       "allreduce", "hierarchical(in_switch,ring)", 512, metric::time_us, 46.58, true, 46});
  return all;
}

}  // namespace

int main() {
  int failures = 0;
  double log_sum = 0;
  int counted = 0;
  std::printf(
      "| measurement | machine | size | published | weft-sim | error | weft's algorithm | "
      "source |\n|---|---|---|---|---|---|---|---|\n");
  for (const auto& c : cells()) {
    const double predicted = figure(c, simulate(c));
    const double error = predicted / c.published - 1;
    log_sum += std::abs(std::log(predicted / c.published));
    ++counted;
    std::printf("| %s%s | %s | %s | %s %.4g %s | %.4g | %+.1f%% | %s | %s |\n", c.what.c_str(),
                c.fit ? " (fit)" : "", c.machine.c_str(), size_text(c.bytes).c_str(),
                name(c.measure), c.published, unit(c.measure), predicted, 100 * error,
                c.algorithm.c_str(), c.source.c_str());
    if (std::abs(error) > 0.25) {
      std::fprintf(stderr, "sim-validation: %s on %s: %+.1f%%, beyond 25%%\n", c.what.c_str(),
                   c.machine.c_str(), 100 * error);
      ++failures;
    }
    if (std::abs(predicted / c.pinned - 1) > 0.005) {
      std::fprintf(stderr,
                   "sim-validation: %s on %s, %s: weft-sim now predicts %.4g, pinned %.4g: the "
                   "model changed; update the pin and docs/simulator.md's table\n",
                   c.what.c_str(), c.machine.c_str(), size_text(c.bytes).c_str(), predicted,
                   c.pinned);
      ++failures;
    }
  }
  const double geomean = std::exp(log_sum / counted) - 1;
  std::printf("\nGeometric-mean error over the %d cells: %.1f%%\n", counted, 100 * geomean);
  if (geomean > 0.10) {
    std::fprintf(stderr, "sim-validation: geometric-mean error %.1f%%, beyond 10%%\n",
                 100 * geomean);
    ++failures;
  }
  return failures == 0 ? 0 : 1;
}
