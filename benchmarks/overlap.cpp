// overlap: every rank computes (a fixed arithmetic loop) while an allreduce of BYTES is in flight
// over the TCP transport, five ways, alternating round by round within one launch so that the
// machine's drift hits all alike:
//
//   communication     the blocking allreduce alone
//   computation       the loop alone (sized at start to take as long as the allreduce)
//   in flight, waited iallreduce, waited for at once (what a call in flight costs)
//   thread, waited    the same on the progress thread's communicator
//   no progress       iallreduce, the loop without a call into weft, wait
//   polling           iallreduce, the loop calling test() 64 times along the way, wait
//   progress thread   iallreduce on a communicator with options::progress_thread, the loop, wait
//
// and the same with the computation off the CPU (the rank sleeps as long as the loop takes, as a
// rank whose computation runs on an accelerator): off-CPU no progress, off-CPU progress thread.
// With fewer cores than ranks' threads the loop and the transport's copies take turns on the
// CPUs, and no way can overlap them; the off-CPU ways show what the progress thread does then.
//
//   weft-run -n 2 build/benchmarks/overlap 16M [ROUNDS]
//
// Per round: a barrier, the way, and the slowest rank's time. Rank 0 prints each way's median and,
// for the three overlapped ways, the ratio to max(communication, computation): 1.0 is a perfect
// overlap, 2.0 none. A result that is not the sum of the ranks' inputs is an error (exit status 1).
#include <weft/nonblocking.hpp>
#include <weft/transport/tcp.hpp>
#include <weft/weft.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace {

using comm_type = weft::communicator<weft::tcp::transport>;
using clock_type = std::chrono::steady_clock;

// A positive size in bytes, as the WEFT_ variables take them ("16M", "256KiB", "65536").
std::size_t parse_bytes(const char* text) {
  const auto value = weft::detail::env::parse_bytes(text, std::uint64_t{1} << 40);
  if (!value || *value == 0) {
    std::fprintf(stderr, "overlap: '%s' is not a positive size (such as 65536, 256K or 16M)\n",
                 text);
    std::exit(2);
  }
  return static_cast<std::size_t>(*value);
}

// The computation: `iterations` steps of a linear congruential generator, split in `pieces` with
// `between()` called after each (polling); returns the state so that nothing is optimised away.
template <class Between>
std::uint64_t compute(std::uint64_t iterations, int pieces, Between&& between) {
  std::uint64_t x = 88172645463325252ull;
  const std::uint64_t each = iterations / static_cast<std::uint64_t>(pieces);
  for (int piece = 0; piece < pieces; ++piece) {
    for (std::uint64_t i = 0; i < each; ++i)
      x = x * 6364136223846793005ull + 1442695040888963407ull;
    between();
  }
  return x;
}

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

enum class way {
  communication,
  computation,
  in_flight_waited,
  thread_waited,
  no_progress,
  polling,
  progress_thread,
  off_cpu_no_progress,
  off_cpu_progress_thread
};
constexpr int ways = 9;
constexpr std::array<const char*, ways> way_names{
    "communication",   "computation",         "in flight, waited",
    "thread, waited",  "no progress",         "polling",
    "progress thread", "off-CPU no progress", "off-CPU progress thread"};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: weft-run -n RANKS overlap BYTES [ROUNDS]\n");
    return 2;
  }
  const std::size_t bytes = parse_bytes(argv[1]);
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 10;
  try {
    auto job = weft::tcp::session::from_environment();
    comm_type& comm = job.comm();
    comm_type threaded = comm.dup();
    auto settings = threaded.settings();
    settings.progress_thread = true;
    threaded.set_settings(settings);
    const int p = comm.size();
    std::vector<float> data(bytes / sizeof(float));
    std::uint64_t sink = 0;
    bool wrong = false;
    auto fill = [&] { std::fill(data.begin(), data.end(), static_cast<float>(comm.rank() + 1)); };
    auto check = [&] {
      const float want = static_cast<float>(p * (p + 1) / 2);
      wrong = wrong || data.front() != want || data.back() != want || data[data.size() / 2] != want;
    };

    // Size the loop to take as long as the allreduce (the slowest rank's loop, on every rank).
    fill();
    weft::allreduce(comm, std::span<float>(data), weft::sum{});
    std::vector<double> alone;
    for (int i = 0; i < 3; ++i) {
      fill();
      weft::barrier(comm);
      const auto start = clock_type::now();
      weft::allreduce(comm, std::span<float>(data), weft::sum{});
      alone.push_back(seconds_since(start));
    }
    double communication = median(alone);
    weft::allreduce(comm, std::span(&communication, 1), weft::max{});
    const std::uint64_t probe = 20'000'000;
    auto start = clock_type::now();
    sink += compute(probe, 1, [] {});
    double per_iteration = seconds_since(start) / static_cast<double>(probe);
    weft::allreduce(comm, std::span(&per_iteration, 1), weft::max{});
    const auto iterations = static_cast<std::uint64_t>(communication / per_iteration);

    const auto off_cpu = std::chrono::duration_cast<clock_type::duration>(
        std::chrono::duration<double>(per_iteration * static_cast<double>(iterations)));
    std::array<std::vector<double>, ways> times;
    for (int round = 0; round < rounds; ++round) {
      for (int w = 0; w < ways; ++w) {
        const auto how = static_cast<way>(w);
        fill();
        weft::barrier(comm);
        start = clock_type::now();
        switch (how) {
          case way::communication:
            weft::allreduce(comm, std::span<float>(data), weft::sum{});
            break;
          case way::computation:
            sink += compute(iterations, 1, [] {});
            break;
          case way::in_flight_waited:
            weft::iallreduce(comm, std::span<float>(data), weft::sum{}).wait();
            break;
          case way::thread_waited:
            weft::iallreduce(threaded, std::span<float>(data), weft::sum{}).wait();
            break;
          case way::no_progress: {
            auto call = weft::iallreduce(comm, std::span<float>(data), weft::sum{});
            sink += compute(iterations, 1, [] {});
            call.wait();
            break;
          }
          case way::polling: {
            auto call = weft::iallreduce(comm, std::span<float>(data), weft::sum{});
            sink += compute(iterations, 64, [&] { call.test(); });
            call.wait();
            break;
          }
          case way::progress_thread: {
            auto call = weft::iallreduce(threaded, std::span<float>(data), weft::sum{});
            sink += compute(iterations, 1, [] {});
            call.wait();
            break;
          }
          case way::off_cpu_no_progress: {
            auto call = weft::iallreduce(comm, std::span<float>(data), weft::sum{});
            std::this_thread::sleep_until(start + off_cpu);
            call.wait();
            break;
          }
          case way::off_cpu_progress_thread: {
            auto call = weft::iallreduce(threaded, std::span<float>(data), weft::sum{});
            std::this_thread::sleep_until(start + off_cpu);
            call.wait();
            break;
          }
        }
        double slowest = seconds_since(start);
        if (how != way::computation) check();
        weft::allreduce(comm, std::span(&slowest, 1), weft::max{});
        times[static_cast<std::size_t>(w)].push_back(slowest);
      }
    }
    if (comm.rank() == 0) {
      const double alone_comm = median(times[0]);
      const double alone_compute = median(times[1]);
      const double bound = std::max(alone_comm, alone_compute);
      std::printf(
          "# overlap: %d ranks over tcp, allreduce of %zu bytes, %d rounds, medians (checksum "
          "%llu)\n",
          p, bytes, rounds, static_cast<unsigned long long>(sink % 1000));
      std::printf("%-24s %10s %22s\n", "way", "time (ms)", "/ max(comm, compute)");
      for (std::size_t w = 0; w < ways; ++w) {
        const double t = median(times[w]);
        if (w < 2) {
          std::printf("%-24s %10.2f\n", way_names[w], t * 1e3);
        } else {
          std::printf("%-24s %10.2f %22.2f\n", way_names[w], t * 1e3, t / bound);
        }
      }
    }
    int failed = wrong ? 1 : 0;
    weft::allreduce(comm, std::span(&failed, 1), weft::max{});
    if (failed != 0 && comm.rank() == 0) std::fprintf(stderr, "overlap: a result was wrong\n");
    return failed;
  } catch (const weft::error& failure) {
    std::fprintf(stderr, "overlap: %s\n", failure.what());
    return 1;
  }
}
