// parallelism — what data, tensor, pipeline and expert parallelism and a hybrid of them put on
// a machine's links, measured on weft's own collectives.
//
//   parallelism [nodes (default 2)]
//
// First every strategy runs with real data on the in-process transport (small shapes) and
// checks its results. Then the same code runs on the simulator with a model's shapes (phantom
// buffers, compute as virtual time at one GPU speed on both machines, so only the fabric
// differs): on `nodes` HGX H200 nodes of 8 GPUs (NVLink inside, a 400 Gbit/s NIC a GPU through
// two tiers of Clos), and on as many GPUs of one NVL72 rack (all of them in one NVLink domain).
// Each line: the predicted step time and the bytes that stayed in a scale-up domain and that
// crossed the scale-out network. Exit 0 when every real run was right.
#include "data_parallel.hpp"
#include "expert_parallel.hpp"
#include "hybrid.hpp"
#include "pipeline_parallel.hpp"
#include "tensor_parallel.hpp"

#include <weft/transport/inproc.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace {

using sim_comm = weft::communicator<weft::sim::transport>;
using real_comm = weft::communicator<weft::inproc::transport>;

// Runs `step` on `ranks` thread ranks with real data; true when every rank's check held.
template <class Step>
bool real_run(int ranks, Step step) {
  std::atomic<bool> right = true;
  weft::inproc::run(ranks, [&](real_comm& comm) {
    if (!step(comm)) right = false;
  });
  return right;
}

struct machine {
  std::string name;
  weft::sim::fabric fabric;
};

}  // namespace

int main(int argc, char** argv) {
  const int nodes = argc > 1 ? std::atoi(argv[1]) : 2;
  if (nodes < 1) {
    std::fprintf(stderr, "usage: parallelism [nodes >= 1]\n");
    return 2;
  }
  const int gpus = 8 * nodes;
  using namespace parallelism;

  // ---- real data, in-process ----------------------------------------------------------------
  shape small;
  small.tokens = 8;
  small.hidden = 16;
  small.layers = 2;
  small.micro_batches = 4;
  small.parameters = 10000;
  small.bucket = 4096;
  bool right = true;
  auto say = [&](const char* what, int ranks, bool ok) {
    std::printf("in-process, real data: %-30s %2d ranks  %s\n", what, ranks,
                ok ? "right" : "WRONG");
    right = right && ok;
  };
  say("data parallel", 4,
      real_run(4, [&](real_comm& c) { return data_parallel_step<float>(c, small); }));
  say("tensor parallel", 4,
      real_run(4, [&](real_comm& c) { return tensor_parallel_step<float>(c, small); }));
  say("pipeline parallel", 4,
      real_run(4, [&](real_comm& c) { return pipeline_parallel_step<float>(c, small); }));
  say("expert parallel", 4,
      real_run(4, [&](real_comm& c) { return expert_parallel_step<float>(c, small); }));
  say("hybrid TP4 x PP2 x DP2", 16,
      real_run(16, [&](real_comm& c) { return hybrid_step<float>(c, small); }));

  // ---- a model's shapes, simulated ----------------------------------------------------------
  shape model;  // 8192 wide, 4096-token micro-batches, bf16; 500 TFLOP/s a GPU on both machines
  auto rack_domain = weft::sim::nvl72();
  rack_domain.gpus = gpus;
  rack_domain.memory_gbyte_per_s = weft::sim::hgx_h200().memory_gbyte_per_s;
  std::vector<machine> machines;
  machines.push_back(
      {std::to_string(nodes) + " HGX nodes",
       weft::sim::cluster(nodes, weft::sim::hgx_h200(), weft::sim::ethernet(400).with_tiers(2))});
  machines.push_back({std::to_string(gpus) + " GPUs of an NVL72",
                      weft::sim::cluster(1, rack_domain, weft::sim::ethernet(400))});

  struct strategy {
    std::string name;
    std::function<std::string(sim_comm&)> step;  // returns a note (rank 0's), or ""
  };
  std::vector<strategy> strategies;
  strategies.push_back({"data parallel (1B params)", [&](sim_comm& c) {
                          data_parallel_step<weft::bfloat16>(c, model);
                          return std::string();
                        }});
  strategies.push_back({"tensor parallel 8", [&](sim_comm& c) {
                          auto group = c.split(c.rank() / 8, c.rank());
                          tensor_parallel_step<weft::bfloat16>(group, model);
                          return std::string();
                        }});
  if (gpus > 8) {
    strategies.push_back({"tensor parallel " + std::to_string(gpus), [&](sim_comm& c) {
                            tensor_parallel_step<weft::bfloat16>(c, model);
                            return std::string();
                          }});
  }
  strategies.push_back({"pipeline parallel " + std::to_string(gpus), [&](sim_comm& c) {
                          shape deep = model;
                          deep.layers = 2 * gpus;  // two layers a stage
                          pipeline_times times;
                          pipeline_parallel_step<weft::bfloat16>(c, deep, &times);
                          char note[96];
                          std::snprintf(note, sizeof(note), "bubble %.0f%% (ideal %.0f%%)",
                                        100 * (1 - times.busy / times.step),
                                        100.0 * (gpus - 1) / (deep.micro_batches + gpus - 1));
                          return std::string(note);
                        }});
  strategies.push_back({"expert parallel " + std::to_string(gpus), [&](sim_comm& c) {
                          expert_load load;
                          expert_parallel_step<weft::bfloat16>(c, model, &load);
                          char note[96];
                          std::snprintf(note, sizeof(note), "busiest rank %.1fx the mean tokens",
                                        static_cast<double>(load.most) / load.mean);
                          return std::string(note);
                        }});
  strategies.push_back({"hybrid TP4 x PP2 x DP" + std::to_string(nodes), [&](sim_comm& c) {
                          hybrid_step<weft::bfloat16>(c, model);
                          return std::string();
                        }});

  std::printf(
      "\nsimulated, a model 8192 wide, 4096-token micro-batches, bf16, 500 TFLOP/s a GPU\n");
  std::printf("%-30s %-22s %12s %14s %14s  %s\n", "strategy", "machine", "step (ms)",
              "scale-up GiB", "scale-out GiB", "");
  for (const auto& s : strategies) {
    for (const auto& m : machines) {
      std::string note;
      const auto measured = weft::sim::run(
          m.fabric,
          [&](sim_comm& comm) {
            const std::string said = s.step(comm);
            if (comm.rank() == 0) note = said;
          },
          weft::sim::payload::phantom);
      std::printf("%-30s %-22s %12.2f %14.2f %14.2f  %s\n", s.name.c_str(), m.name.c_str(),
                  measured.seconds * 1e3, measured.scale_up_bytes / (1 << 30),
                  measured.scale_out_bytes / (1 << 30), note.c_str());
      std::fflush(stdout);
    }
  }
  return right ? 0 : 1;
}
