// gloo-bench: the same table as weft-bench, measured on Gloo's collectives over its TCP
// transport, so the two can be read side by side (compare.py runs both in one alternating sweep).
//
//   WEFT_STORE_PATH=$(mktemp -d) weft-run -n 4 gloo-bench
//       --algorithm ring|ring_chunked|halving_doubling|bcube
//       [--collective allreduce|allgather|broadcast]
//
// Ranks come from the launcher's variables (weft-run, mpirun, srun, torchrun); Gloo meets its
// peers through its FileStore in WEFT_STORE_PATH (a fresh directory per run) and listens on
// GLOO_BENCH_HOST (default 127.0.0.1). Same inputs, checks, timing (barrier, one timed call,
// slowest rank, median) and busbw factors as weft-bench (../bench.hpp); float32 sum.
//   allreduce ring, bcube:                gloo::allreduce with that algorithm (out of place)
//   allreduce ring_chunked, halving_doubling: gloo::AllreduceRingChunked /
//       gloo::AllreduceHalvingDoubling (in place, as Gloo has them)
//   allgather: gloo::allgather (out of place); broadcast: gloo::broadcast (in place)
#include "../bench.hpp"

#include <weft/bootstrap/environment.hpp>

#include <gloo/algorithm.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <memory>

namespace {

using weft_bench::measurement;
using weft_bench::settings;

bool legacy(const std::string& algorithm) {
  return algorithm == "ring_chunked" || algorithm == "halving_doubling";
}

measurement measure(const std::shared_ptr<gloo::Context>& context, const settings& options,
                    const std::string& collective, std::size_t count, bool in_place) {
  const int p = context->size;
  const int r = context->rank;
  weft_bench::workload<float, weft::sum> work(collective, count, in_place, p, r, options.root);
  const std::string& algorithm = options.algorithm;
  std::unique_ptr<gloo::Algorithm> classic;  // the in-place allreduce classes, made once
  if (collective == "allreduce" && legacy(algorithm)) {
    const std::vector<float*> buffers{work.in.data()};
    if (algorithm == "ring_chunked") {
      classic = std::make_unique<gloo::AllreduceRingChunked<float>>(context, buffers,
                                                                    static_cast<int>(count));
    } else {
      classic = std::make_unique<gloo::AllreduceHalvingDoubling<float>>(context, buffers,
                                                                        static_cast<int>(count));
    }
  }
  auto once = [&] {
    if (classic) {
      classic->run();
    } else if (collective == "allreduce") {
      gloo::AllreduceOptions call(context);
      call.setInput(work.in.data(), count);
      call.setOutput(work.out.data(), count);
      call.setAlgorithm(algorithm == "bcube" ? gloo::AllreduceOptions::Algorithm::BCUBE
                                             : gloo::AllreduceOptions::Algorithm::RING);
      call.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      gloo::allreduce(call);
    } else if (collective == "allgather") {
      gloo::AllgatherOptions call(context);
      call.setInput(work.in.data(), work.block);
      call.setOutput(work.out.data(), count);
      gloo::allgather(call);
    } else if (collective == "broadcast") {
      gloo::BroadcastOptions call(context);
      call.setOutput(work.in.data(), count);
      call.setRoot(work.root);
      gloo::broadcast(call);
    }
  };
  auto slowest = [&](double seconds) {
    double result = 0;
    gloo::AllreduceOptions call(context);
    call.setInput(&seconds, 1);
    call.setOutput(&result, 1);
    call.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<double>));
    gloo::allreduce(call);
    return result;
  };
  auto barrier = [&] {
    gloo::BarrierOptions call(context);
    gloo::barrier(call);
  };
  return weft_bench::time_calls(options, work, barrier, once, slowest);
}

}  // namespace

int main(int argc, char** argv) {
  weft_bench::program_name = "gloo-bench";
  weft_bench::accepted_collectives = {"allreduce", "allgather", "broadcast"};
  weft_bench::accepted_algorithms = {"ring", "ring_chunked", "halving_doubling", "bcube",
                                     "automatic"};
  settings options = weft_bench::parse(argc, argv);
  if (options.type != "float" || options.op != "sum")
    weft_bench::usage("gloo-bench measures float sum only");
  if (options.algorithm == "automatic") options.algorithm = "ring";
  try {
    const weft::bootstrap::launch launch = weft::bootstrap::from_environment();
    const char* store_path = std::getenv("WEFT_STORE_PATH");
    if (store_path == nullptr || *store_path == '\0') {
      throw std::invalid_argument(
          "set WEFT_STORE_PATH to a fresh shared directory for Gloo's FileStore");
    }
    const char* host = std::getenv("GLOO_BENCH_HOST");
    gloo::transport::tcp::attr address(host != nullptr && *host != '\0' ? host : "127.0.0.1");
    auto device = gloo::transport::tcp::CreateDevice(address);
    gloo::rendezvous::FileStore store(store_path);
    auto context = std::make_shared<gloo::rendezvous::Context>(launch.rank, launch.size);
    context->setTimeout(std::chrono::seconds(120));
    context->connectFullMesh(store, device);
    const int p = context->size;
    const int r = context->rank;
    const std::string where =
        "Gloo TCP (" + device->str() + "), allreduce algorithm " + options.algorithm;
    if (r == 0) {
      std::printf(
          "# gloo-bench: %s, %d ranks\n# type float, op sum, root %d, iterations %d (median), "
          "warm-up %d, "
          "check %d\n",
          where.c_str(), p, options.root, options.iterations, options.warmup,
          options.check ? 1 : 0);
    }
    weft_bench::summary totals;
    weft_bench::sweep(
        options, sizeof(float), p, r, weft_bench::collectives_of(options),
        [&](const std::string& collective, std::size_t count, bool in_place, const settings& how) {
          return measure(context, how, collective, count, in_place);
        },
        [&](const std::string& collective, bool in_place) {
          const bool gloo_in_place =
              collective == "broadcast" || (collective == "allreduce" && legacy(options.algorithm));
          return in_place == gloo_in_place;
        },
        [&](std::array<std::size_t, 2> wrong) {
          std::array<std::uint64_t, 2> mine{wrong[0], wrong[1]}, total{};
          gloo::AllreduceOptions call(context);
          call.setInput(mine.data(), 2);
          call.setOutput(total.data(), 2);
          call.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(
              &gloo::sum<std::uint64_t>));
          gloo::allreduce(call);
          return std::array<std::size_t, 2>{total[0], total[1]};
        },
        totals);
    if (r != 0) return 0;
    if (!options.json.empty()) weft_bench::write_json(options, "gloo", "tcp", where, p, totals);
    return weft_bench::print_footer(totals);
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "gloo-bench: %s\n", failure.what());
    return 1;
  }
}
