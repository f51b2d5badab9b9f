// The nccl-tests-style table every weft-bench-* program prints, written over any communicator.
//
// float32 data, sum for the reductions, root 0. Inputs are non-zero values whose exact result
// is known, so #wrong counts elements that differ from it. Time is the median over the
// iterations of the slowest rank. busbw follows nccl-tests: allreduce 2(n-1)/n * algbw;
// reduce_scatter, allgather, alltoall (n-1)/n; broadcast, reduce 1.
#pragma once

#include <weft/weft.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace weft_bench {

struct settings {
  int ranks = 4;
  std::string collective = "all";
  std::string algorithm = "automatic";
  std::size_t min_bytes = 8;
  std::size_t max_bytes = std::size_t{64} << 20;
  std::size_t factor = 4;
  int iterations = 20;
  int warmup = 5;
};

inline const char* program_name = "weft-bench";

[[noreturn]] inline void usage(const std::string& problem) {
  std::fprintf(stderr,
               "%s: %s\nusage: %s [--ranks N] [--collective "
               "allreduce|broadcast|reduce|allgather|reduce_scatter|alltoall|all] [--algorithm NAME] "
               "[-b MIN_BYTES] [-e MAX_BYTES] [-f FACTOR] [-n ITERS] [-w WARMUP]\n",
               program_name, problem.c_str(), program_name);
  std::exit(2);
}

inline std::size_t parse_size(const char* text) {
  char* end = nullptr;
  double value = std::strtod(text, &end);
  if (end == text) usage(std::string("not a size: ") + text);
  switch (*end) {
    case 'K': case 'k': value *= 1024; break;
    case 'M': case 'm': value *= 1024 * 1024; break;
    case 'G': case 'g': value *= 1024.0 * 1024 * 1024; break;
    case '\0': break;
    default: usage(std::string("not a size: ") + text);
  }
  return static_cast<std::size_t>(value);
}

inline settings parse(int argc, char** argv) {
  settings result;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage("missing value after " + flag);
      return argv[++i];
    };
    if (flag == "--ranks" || flag == "-g") result.ranks = std::atoi(value());
    else if (flag == "--collective") result.collective = value();
    else if (flag == "--algorithm") result.algorithm = value();
    else if (flag == "-b") result.min_bytes = parse_size(value());
    else if (flag == "-e") result.max_bytes = parse_size(value());
    else if (flag == "-f") result.factor = parse_size(value());
    else if (flag == "-n") result.iterations = std::atoi(value());
    else if (flag == "-w") result.warmup = std::atoi(value());
    else usage("unknown flag " + flag);
  }
  if (result.ranks < 1 || result.factor < 2 || result.iterations < 1 || result.min_bytes > result.max_bytes) {
    usage("bad value");
  }
  return result;
}

struct measurement {
  double seconds = 0;
  std::size_t wrong = 0;
};

// bytes: the nccl-tests "size" column; count: elements per rank's buffer as nccl-tests prints.
inline double bus_factor(const std::string& collective, int p) {
  if (collective == "allreduce") return 2.0 * (p - 1) / p;
  if (collective == "broadcast" || collective == "reduce") return 1.0;
  return static_cast<double>(p - 1) / p;
}

// Runs one collective `iterations` times on every rank; returns the median of the slowest rank.
template <class Comm>
measurement run_one(Comm& comm, const std::string& collective, std::size_t count, bool in_place,
                    int iterations, int warmup, std::vector<double>& times, std::atomic<std::size_t>& wrong) {
  const int p = comm.size();
  const int r = comm.rank();
  std::vector<float> in, out;
  std::size_t local_wrong = 0;
  auto fill = [&] {
    // allreduce/reduce/reduce_scatter: rank r contributes (r + 1) * (i % 7 + 1); exact in float
    if (collective == "allgather") {
      in.assign(count / static_cast<std::size_t>(p), 0);
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(r + 1 + i % 5);
      out.assign(count, 0);
    } else if (collective == "reduce_scatter") {
      in.resize(count);
      for (std::size_t i = 0; i < count; ++i) in[i] = static_cast<float>((r + 1) * (i % 7 + 1));
      out.assign(count / static_cast<std::size_t>(p), 0);
    } else if (collective == "alltoall") {
      in.resize(count);
      const std::size_t block = count / static_cast<std::size_t>(p);
      for (std::size_t i = 0; i < count; ++i) in[i] = static_cast<float>(r * 1000 + (block ? i / block : 0));
      out.assign(count, 0);
    } else {
      in.resize(count);
      for (std::size_t i = 0; i < count; ++i) in[i] = static_cast<float>((r + 1) * (i % 7 + 1));
      if (collective == "broadcast") {
        for (std::size_t i = 0; i < count; ++i) in[i] = r == 0 ? static_cast<float>(i % 13 + 1) : 0.0f;
      }
      out.assign(count, 0);
    }
  };
  auto once = [&] {
    if (collective == "allreduce") {
      if (in_place) weft::allreduce(comm, std::span<float>(in));
      else weft::allreduce(comm, std::span<const float>(in), std::span<float>(out));
    } else if (collective == "broadcast") {
      weft::broadcast(comm, std::span<float>(in), 0);
    } else if (collective == "reduce") {
      if (in_place) weft::reduce(comm, std::span<float>(in), weft::sum{}, 0);
      else weft::reduce(comm, std::span<const float>(in), std::span<float>(out), weft::sum{}, 0);
    } else if (collective == "allgather") {
      if (in_place) {
        const std::size_t n = in.size();
        std::copy(in.begin(), in.end(), out.begin() + static_cast<std::ptrdiff_t>(n * static_cast<std::size_t>(r)));
        weft::allgather(comm, std::span<const float>(out).subspan(n * static_cast<std::size_t>(r), n), std::span<float>(out));
      } else {
        weft::allgather(comm, std::span<const float>(in), std::span<float>(out));
      }
    } else if (collective == "reduce_scatter") {
      weft::reduce_scatter(comm, std::span<const float>(in), std::span<float>(out));
    } else if (collective == "alltoall") {
      weft::alltoall(comm, std::span<const float>(in), std::span<float>(out));
    }
  };
  auto verify = [&] {
    const double sum_ranks = p * (p + 1) / 2.0;
    if (collective == "allreduce" || (collective == "reduce" && r == 0)) {
      const auto& result = in_place ? in : out;
      for (std::size_t i = 0; i < count; ++i) local_wrong += result[i] != static_cast<float>(sum_ranks * (i % 7 + 1));
    } else if (collective == "broadcast") {
      for (std::size_t i = 0; i < count; ++i) local_wrong += in[i] != static_cast<float>(i % 13 + 1);
    } else if (collective == "allgather") {
      const std::size_t n = count / static_cast<std::size_t>(p);
      for (std::size_t i = 0; i < out.size(); ++i) local_wrong += out[i] != static_cast<float>(i / n + 1 + (i % n) % 5);
    } else if (collective == "reduce_scatter") {
      const std::size_t n = out.size();
      for (std::size_t i = 0; i < n; ++i) local_wrong += out[i] != static_cast<float>(sum_ranks * ((static_cast<std::size_t>(r) * n + i) % 7 + 1));
    } else if (collective == "alltoall") {
      const std::size_t block = count / static_cast<std::size_t>(p);
      for (std::size_t i = 0; i < count; ++i) local_wrong += out[i] != static_cast<float>((block ? i / block : 0) * 1000 + static_cast<std::size_t>(r));
    }
  };
  fill();
  for (int i = 0; i < warmup; ++i) {
    once();
    fill();
  }
  for (int i = 0; i < iterations; ++i) {
    weft::barrier(comm);
    const auto start = std::chrono::steady_clock::now();
    once();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // slowest rank per iteration
    std::vector<double> all(static_cast<std::size_t>(p));
    weft::allgather(comm, std::span<const double>(&seconds, 1), std::span<double>(all));
    if (r == 0) times[static_cast<std::size_t>(i)] = *std::max_element(all.begin(), all.end());
    if (i == 0) verify();
    if (in_place) fill();
  }
  wrong += local_wrong;
  measurement result;
  if (r == 0) {
    std::vector<double> sorted(times.begin(), times.begin() + iterations);
    std::sort(sorted.begin(), sorted.end());
    result.seconds = sorted[sorted.size() / 2];
  }
  return result;
}


// What rank 0 saw over the whole table.
struct summary {
  std::size_t wrong = 0;
  double busbw_sum = 0;
  int busbw_points = 0;
};

// Sets WEFT_ALGO so every collective uses `algorithm` (unless automatic).
inline void force_algorithm(const std::string& algorithm) {
  if (algorithm == "automatic") return;
  std::string spec;
  for (const char* name : {"allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "alltoall"}) {
    spec += std::string(spec.empty() ? "" : ",") + name + "=" + algorithm;
  }
  setenv("WEFT_ALGO", spec.c_str(), 1);
}

inline std::vector<std::string> collectives_of(const settings& options) {
  if (options.collective == "all") return {"allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "alltoall"};
  return {options.collective};
}

// Runs the table on one rank; every rank calls it, rank 0 prints and fills `totals`.
template <class Comm>
void run_table(Comm& comm, const settings& options, summary& totals_out) {
  const auto collectives = collectives_of(options);
  std::vector<double> times(static_cast<std::size_t>(options.iterations));
  for (const auto& collective : collectives) {
    if (comm.rank() == 0) {
      std::printf("#\n# collective: %s\n#%10s %12s %8s %6s %6s   %9s %8s %8s %6s   %9s %8s %8s %6s\n",
                  collective.c_str(), "size", "count", "type", "redop", "root", "time", "algbw",
                  "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
      std::printf("#%10s %12s %8s %6s %6s   %9s %8s %8s %6s   %9s %8s %8s %6s\n", "(B)", "(elements)", "", "",
                  "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    }
    for (std::size_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= options.factor) {
      const std::size_t p = static_cast<std::size_t>(comm.size());
      std::size_t count = bytes / sizeof(float);
      if (collective == "allgather" || collective == "reduce_scatter" || collective == "alltoall") count = count / p * p;
      if (count == 0) continue;
      const int iterations = bytes >= (std::size_t{16} << 20) ? std::max(3, options.iterations / 4) : options.iterations;
      std::atomic<std::size_t> wrong_out{0}, wrong_in{0};
      const auto out_of_place = run_one(comm, collective, count, false, iterations, options.warmup, times, wrong_out);
      const bool has_in_place = collective != "reduce_scatter" && collective != "alltoall";
      const auto in_place = has_in_place
                                ? run_one(comm, collective, count, true, iterations, options.warmup, times, wrong_in)
                                : out_of_place;
      std::size_t counts[2] = {wrong_out.load(), wrong_in.load()};
      std::size_t totals[2] = {0, 0};
      weft::allreduce(comm, std::span<const std::size_t>(counts, 2), std::span<std::size_t>(totals, 2));
      if (comm.rank() == 0) {
        const double size = static_cast<double>(count * sizeof(float));
        const double factor = bus_factor(collective, comm.size());
        const double algbw_out = size / out_of_place.seconds / 1e9;
        const double algbw_in = size / in_place.seconds / 1e9;
        std::printf(" %10zu %12zu %8s %6s %6d   %9.1f %8.2f %8.2f %6zu", count * sizeof(float), count,
                    "float",
                    collective == "allreduce" || collective == "reduce" || collective == "reduce_scatter" ? "sum" : "none",
                    collective == "broadcast" || collective == "reduce" ? 0 : -1, out_of_place.seconds * 1e6,
                    algbw_out, algbw_out * factor, totals[0]);
        if (has_in_place) {
          std::printf("   %9.1f %8.2f %8.2f %6zu\n", in_place.seconds * 1e6, algbw_in, algbw_in * factor, totals[1]);
        } else {
          std::printf("   %9s %8s %8s %6s\n", "n/a", "n/a", "n/a", "n/a");  // no in-place form
        }
        std::fflush(stdout);
        totals_out.wrong += totals[0] + totals[1];
        totals_out.busbw_sum += algbw_out * factor;
        ++totals_out.busbw_points;
      }
    }
  }
}

inline int print_footer(const summary& totals) {
  std::printf("# Out of bounds values : %zu %s\n", totals.wrong, totals.wrong == 0 ? "OK" : "FAILED");
  std::printf("# Avg bus bandwidth    : %g\n", totals.busbw_points ? totals.busbw_sum / totals.busbw_points : 0.0);
  return totals.wrong == 0 ? 0 : 1;
}

}  // namespace weft_bench
