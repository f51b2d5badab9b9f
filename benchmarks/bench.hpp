// weft-bench's measurement and table, written over any communicator (the transports are chosen
// in weft_bench.cpp).
//
// Conventions follow nccl-tests so its readers can read this table at a glance:
//   - "size" is the bytes of the largest buffer of the call (allreduce, reduce, broadcast and
//     sendrecv: the buffer; allgather and gather: the whole output; reduce_scatter: the whole
//     input; alltoall: one rank's input; scatter: the root's input), "count" its elements;
//   - algbw = size / time; busbw = algbw x factor: allreduce 2(n-1)/n; reduce_scatter,
//     allgather, alltoall, gather, scatter (n-1)/n; broadcast, reduce, sendrecv 1;
//   - one column group out of place, one in place; a form weft does not have (broadcast is
//     always in place; reduce_scatter, alltoall, gather, scatter and sendrecv never are) prints
//     n/a;
//   - "# Avg bus bandwidth" over every row (out of place, or in place where that is the only
//     form).
// Inputs are small non-zero integers whose exact result is known for every type and op, so
// #wrong counts elements that differ from it; the timed calls run on those same inputs. Each
// iteration starts after a barrier; its time is the slowest rank's; the table shows the median.
#pragma once

#include "bench_cli.hpp"
#include "bench_workload.hpp"

#include <weft/weft.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace weft_bench {

struct measurement {
  double seconds = 0;     // median over the iterations of the slowest rank
  std::size_t wrong = 0;  // this rank's wrong elements in the first timed iteration
  // With --trace: this rank's start and end of every timed call, steady-clock nanoseconds.
  std::vector<std::array<long long, 2>> calls;
};

// The timing every program here shares: warm-up calls, then per iteration a barrier, one timed
// call, and the slowest rank's time (slowest(seconds) returns the maximum over the ranks); the
// median of those. The result is checked after the first timed call; inputs a call overwrites
// are restored outside the timed region.
template <class Work, class Barrier, class Once, class Slowest>
measurement time_calls(const settings& options, Work& work, Barrier&& barrier, Once&& once,
                       Slowest&& slowest) {
  for (int i = 0; i < options.warmup; ++i) {
    once();
    if (work.overwrites_input()) work.fill();
  }
  measurement result;
  std::vector<double> times;
  for (int i = 0; i < options.iterations; ++i) {
    barrier();
    const auto start = std::chrono::steady_clock::now();
    once();
    const auto end = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(end - start).count();
    if (!options.trace.empty()) {
      auto nanoseconds = [](auto when) {
        return static_cast<long long>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch()).count());
      };
      result.calls.push_back({nanoseconds(start), nanoseconds(end)});
    }
    times.push_back(slowest(seconds));
    if (i == 0 && options.check) result.wrong = work.wrong();
    if (work.overwrites_input()) work.fill();
  }
  std::sort(times.begin(), times.end());
  result.seconds = times[times.size() / 2];
  return result;
}

// Thrown by a measure function when this collective cannot run here (every rank throws it).
struct skipped {
  std::string why;
};

// The weft call a workload describes, on every rank. Work: a workload, or anything with its
// element_type, op_type, collective, in_place, root, op, in, out and own_block() (the device
// mirror of one in weft_bench_cuda.cu).
template <class Comm, class Work>
void call_weft(Comm& comm, Work& work) {
  using T = typename Work::element_type;
  using Op = typename Work::op_type;
  const int p = comm.size();
  const int r = comm.rank();
  const int root = work.root;
  const bool in_place = work.in_place;
  const std::string& collective = work.collective;
  const Op op = work.op;
  const std::span<const T> input(work.in);
  const std::span<T> output(work.out);
  if (collective == "allreduce") {
    if (in_place)
      weft::allreduce(comm, std::span<T>(work.in), op);
    else
      weft::allreduce(comm, input, output, op);
  } else if (collective == "reduce") {
    if (in_place)
      weft::reduce(comm, std::span<T>(work.in), op, root);
    else
      weft::reduce(comm, input, output, op, root);
  } else if (collective == "reduce_scatter") {
    weft::reduce_scatter(comm, input, output, op);
  } else if (collective == "broadcast") {
    weft::broadcast(comm, std::span<T>(work.in), root);
  } else if (collective == "allgather") {
    weft::allgather(comm, in_place ? work.own_block() : input, output);
  } else if (collective == "gather") {
    weft::gather(comm, input, output, root);
  } else if (collective == "scatter") {
    weft::scatter(comm, input, output, root);
  } else if (collective == "alltoall") {
    weft::alltoall(comm, input, output);
  } else if (collective == "sendrecv") {
    weft::sendrecv(comm, input, (r + 1) % p, output, (r + p - 1) % p);
  }
}

template <class Storage, class Memory>
Storage storage_for(Memory& memory) {
  if constexpr (std::is_same_v<Storage, weft::allocator<typename Storage::value_type, Memory>>) {
    return Storage(memory);
  } else {
    return Storage();
  }
}

// One weft call, one size, one form, on every rank.
template <class T, class Op, class Comm>
measurement measure(Comm& comm, const std::string& collective, std::size_t count, bool in_place,
                    const settings& options, Op op) {
  // Buffers from the transport's memory space where the CPU may fill them (the shm transport
  // lends sends from its pool), as a user who allocates through comm.memory() has them.
  using memory_type = typename Comm::memory_type;
  using storage = std::conditional_t<std::is_base_of_v<weft::host_memory, memory_type>,
                                     weft::allocator<T, memory_type>, std::allocator<T>>;
  workload<T, Op, storage> work(collective, count, in_place, comm.size(), comm.rank(), options.root,
                                op, storage_for<storage>(comm.memory()));
  auto once = [&] { call_weft(comm, work); };
  auto slowest = [&](double seconds) {
    double result = 0;
    weft::allreduce(comm, std::span<const double>(&seconds, 1), std::span<double>(&result, 1),
                    weft::max{}, weft::recursive_doubling{});
    return result;
  };
  try {
    return time_calls(
        options, work, [&] { weft::barrier(comm); }, once, slowest);
  } catch (const weft::error& failure) {
    // WEFT_ALGO refused the algorithm for this collective on every rank before anything was
    // sent; with --collective all the others still run.
    if (failure.code() != weft::errc::invalid_argument || options.collective != "all" ||
        options.algorithm == "automatic") {
      throw;
    }
    throw skipped{options.algorithm + " does not implement " + collective};
  }
}

// ---- the table ---------------------------------------------------------------------------------

struct form_result {
  double time_us = 0;
  double algbw = 0;
  double busbw = 0;
  long long wrong = -1;  // -1: not checked
};
struct row {
  std::string collective;
  std::size_t bytes = 0;
  std::size_t count = 0;
  int root = -1;
  std::optional<form_result> out_of_place, in_place;
};
struct summary {
  std::vector<row> rows;
  std::vector<std::string> skipped;  // "collective: why"
  std::size_t wrong = 0;
};

// Progress on stderr while a sweep runs: a line rewritten in place on a terminal; elsewhere a
// line whenever 10 s have passed since the last.
class progress {
 public:
  explicit progress(std::size_t total) : total_(total), terminal_(isatty(STDERR_FILENO) != 0) {}
  void point(const std::string& collective, std::size_t bytes) {
    ++done_;
    const auto now = std::chrono::steady_clock::now();
    if (terminal_) {
      std::fprintf(stderr, "\r%s: [%zu/%zu] %s %zu B ...        ", program_name, done_, total_,
                   collective.c_str(), bytes);
    } else if (now - last_ >= std::chrono::seconds(10)) {
      std::fprintf(stderr, "%s: [%zu/%zu] %s %zu B, %.0f s so far\n", program_name, done_, total_,
                   collective.c_str(), bytes, std::chrono::duration<double>(now - begun_).count());
      last_ = now;
    }
    std::fflush(stderr);
  }
  ~progress() {
    if (terminal_ && done_ > 0) std::fprintf(stderr, "\r%80s\r", "");
  }

 private:
  std::size_t total_, done_ = 0;
  bool terminal_;
  std::chrono::steady_clock::time_point begun_ = std::chrono::steady_clock::now(), last_ = begun_;
};

inline std::vector<std::string> collectives_of(const settings& options) {
  if (options.collective != "all") return {options.collective};
  return accepted_collectives;
}

inline std::vector<std::size_t> sizes_of(const settings& options) {
  std::vector<std::size_t> sizes;
  for (std::size_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= options.factor) {
    sizes.push_back(bytes);
    if (bytes == 0) break;
  }
  return sizes;
}

inline void print_columns(const std::string& collective) {
  std::printf("#\n# collective: %s\n#%10s %12s %8s %6s %6s   %9s %8s %8s %6s   %9s %8s %8s %6s\n",
              collective.c_str(), "size", "count", "type", "redop", "root", "time", "algbw",
              "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::printf("#%10s %12s %8s %6s %6s   %9s %8s %8s %6s   %9s %8s %8s %6s\n", "(B)", "(elements)",
              "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

inline void print_form(const std::optional<form_result>& form) {
  if (!form) {
    std::printf("   %9s %8s %8s %6s", "n/a", "n/a", "n/a", "n/a");
    return;
  }
  std::printf("   %9.1f %8.2f %8.2f", form->time_us, form->algbw, form->busbw);
  if (form->wrong < 0)
    std::printf(" %6s", "N/A");
  else
    std::printf(" %6lld", form->wrong);
}

// The sweep every program here shares: for each collective and size, measure(collective, count,
// in_place, settings) on every rank for the forms has_form(collective, in_place) allows, then
// sum_across(wrong counts) on every rank; rank 0 prints the rows and fills `totals`. As in
// nccl-tests, each collective is first warmed up at the largest and the smallest size (-w calls
// each, untimed), and at the smallest size for warm_up_time more: connections, socket buffers,
// caches and the placement of the ranks on the cores reach their steady state before the
// first timed row, whichever library is measured.
inline constexpr std::chrono::milliseconds warm_up_time{200};
template <class Measure, class HasForm, class SumAcross>
void sweep(const settings& options, std::size_t element_size, int p, int rank,
           const std::vector<std::string>& collectives, Measure&& measure_form, HasForm&& has_form,
           SumAcross&& sum_across, summary& totals) {
  const auto sizes = sizes_of(options);
  // --trace: every rank opens its file first, and all give up together if one cannot.
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> trace(nullptr, &std::fclose);
  if (!options.trace.empty()) {
    const std::string path = options.trace + "." + std::to_string(rank);
    trace.reset(std::fopen(path.c_str(), "w"));
    const auto unwritable = sum_across(std::array<std::size_t, 2>{trace ? 0u : 1u, 0});
    if (unwritable[0] > 0) {
      throw std::invalid_argument("--trace: " + std::to_string(unwritable[0]) +
                                  " rank(s) cannot write " + options.trace + ".<rank>" +
                                  (trace ? ""
                                         : " (rank " + std::to_string(rank) + ": " + path + ": " +
                                               std::strerror(errno) + ")"));
    }
    std::fprintf(trace.get(), "# collective bytes form iteration start_ns end_ns (rank %d of %d)\n",
                 rank, p);
  }
  std::optional<progress> shown;
  if (rank == 0) shown.emplace(collectives.size() * sizes.size());
  for (const auto& collective : collectives) {
    if (rooted(collective) && options.root >= p) {
      throw std::invalid_argument(std::string(program_name) + ": root " +
                                  std::to_string(options.root) + " is not a rank of " +
                                  std::to_string(p));
    }
    if (rank == 0) print_columns(collective);
    auto count_of = [&](std::size_t bytes) {
      return element_count(collective, bytes, element_size, p);
    };
    settings warm_up = options;
    warm_up.iterations = 1;
    warm_up.check = false;
    const bool first_form_in_place = !has_form(collective, false);
    try {
      for (const std::size_t bytes : {sizes.back(), sizes.front()}) {
        if (options.warmup > 0 && count_of(bytes) > 0)
          measure_form(collective, count_of(bytes), first_form_in_place, warm_up);
      }
      // Then the smallest size again until warm_up_time has passed on the ranks (on average,
      // so that every rank takes the same decision): right after start-up, ranks a launcher
      // did not bind to cores share one core for some tens of milliseconds, and a
      // small-message latency measured then is several times the steady one.
      const std::size_t smallest = count_of(sizes.front());
      const auto started = std::chrono::steady_clock::now();
      while (options.warmup > 0 && smallest > 0) {
        const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(
            std::chrono::steady_clock::now() - started);
        const auto average =
            sum_across(std::array<std::size_t, 2>{static_cast<std::size_t>(waited.count()), 0})[0] /
            static_cast<std::size_t>(p);
        if (std::chrono::microseconds(average) >= warm_up_time) break;
        measure_form(collective, smallest, first_form_in_place, warm_up);
      }
    } catch (const skipped& reason) {
      if (rank == 0) {
        std::printf("#   skipped: %s\n", reason.why.c_str());
        totals.skipped.push_back(collective + ": " + reason.why);
      }
      continue;
    }
    for (const std::size_t bytes : sizes) {
      if (shown) shown->point(collective, bytes);
      const std::size_t count = count_of(bytes);
      if (count == 0) continue;
      row line{collective, count * element_size, count, rooted(collective) ? options.root : -1, {},
               {}};
      std::optional<measurement> forms[2];
      try {
        for (int form = 0; form < 2; ++form) {
          if (has_form(collective, form == 1))
            forms[form] = measure_form(collective, count, form == 1, options);
        }
      } catch (const skipped& reason) {
        if (rank == 0) {
          std::printf("#   skipped: %s\n", reason.why.c_str());
          totals.skipped.push_back(collective + ": " + reason.why);
        }
        break;
      }
      for (int form = 0; trace && form < 2; ++form) {
        if (!forms[form]) continue;
        const auto& calls = forms[form]->calls;
        for (std::size_t i = 0; i < calls.size(); ++i) {
          std::fprintf(trace.get(), "%s %zu %s %zu %lld %lld\n", collective.c_str(),
                       count * element_size, form == 1 ? "in" : "out", i, calls[i][0], calls[i][1]);
        }
      }
      std::array<std::size_t, 2> wrong{forms[0] ? forms[0]->wrong : 0,
                                       forms[1] ? forms[1]->wrong : 0};
      wrong = sum_across(wrong);
      if (rank != 0) continue;
      const double size = static_cast<double>(line.bytes);
      for (int form = 0; form < 2; ++form) {
        if (!forms[form]) continue;
        form_result result;
        result.time_us = forms[form]->seconds * 1e6;
        result.algbw = size / forms[form]->seconds / 1e9;
        result.busbw = result.algbw * bus_factor(collective, p);
        result.wrong =
            options.check ? static_cast<long long>(wrong[static_cast<std::size_t>(form)]) : -1;
        totals.wrong += wrong[static_cast<std::size_t>(form)];
        (form == 0 ? line.out_of_place : line.in_place) = result;
      }
      std::printf(" %10zu %12zu %8s %6s %6d", line.bytes, count, options.type.c_str(),
                  reduces(collective) ? options.op.c_str() : "none", line.root);
      print_form(line.out_of_place);
      print_form(line.in_place);
      std::printf("\n");
      std::fflush(stdout);
      totals.rows.push_back(line);
    }
  }
}

// weft's sweep over one communicator, for the settings' type and op.
template <class T, class Op, class Comm>
void run_typed(Comm& comm, const settings& options, Op op, summary& totals) {
  sweep(
      options, sizeof(T), comm.size(), comm.rank(), collectives_of(options),
      [&](const std::string& collective, std::size_t count, bool in_place, const settings& how) {
        return measure<T>(comm, collective, count, in_place, how, op);
      },
      [](const std::string& collective, bool in_place) {
        return in_place ? has_in_place(collective) : has_out_of_place(collective);
      },
      [&](std::array<std::size_t, 2> wrong) {
        std::array<std::size_t, 2> total{};
        weft::allreduce(comm, std::span<const std::size_t>(wrong), std::span<std::size_t>(total),
                        weft::sum{}, weft::recursive_doubling{});
        return total;
      },
      totals);
}

// Calls fn(std::type_identity<T>{}, op) for the type and op the settings name.
template <class Function>
void with_type_and_op(const settings& options, Function&& fn) {
  auto with_op = [&](auto type) {
    const std::string& op = options.op;
    if (op == "sum")
      fn(type, weft::sum{});
    else if (op == "prod")
      fn(type, weft::prod{});
    else if (op == "max")
      fn(type, weft::max{});
    else if (op == "min")
      fn(type, weft::min{});
    else
      fn(type, weft::avg{});
  };
  const std::string& type = options.type;
  if (type == "int8")
    with_op(std::type_identity<std::int8_t>{});
  else if (type == "uint8")
    with_op(std::type_identity<std::uint8_t>{});
  else if (type == "int32")
    with_op(std::type_identity<std::int32_t>{});
  else if (type == "uint32")
    with_op(std::type_identity<std::uint32_t>{});
  else if (type == "int64")
    with_op(std::type_identity<std::int64_t>{});
  else if (type == "uint64")
    with_op(std::type_identity<std::uint64_t>{});
  else if (type == "half")
    with_op(std::type_identity<weft::half>{});
  else if (type == "double")
    with_op(std::type_identity<double>{});
  else if (type == "bfloat16")
    with_op(std::type_identity<weft::bfloat16>{});
  else
    with_op(std::type_identity<float>{});
}

template <class Comm>
void run_table(Comm& comm, const settings& options, summary& totals) {
  with_type_and_op(options, [&]<class T, class Op>(std::type_identity<T>, Op op) {
    run_typed<T>(comm, options, op, totals);
  });
}

inline double average_busbw(const summary& totals) {
  double sum = 0;
  int points = 0;
  for (const auto& line : totals.rows) {
    const auto& form = line.out_of_place ? line.out_of_place : line.in_place;
    if (form) {
      sum += form->busbw;
      ++points;
    }
  }
  return points ? sum / points : 0.0;
}

inline void write_json(const settings& options, const std::string& system,
                       const std::string& transport, const std::string& description, int ranks,
                       const summary& totals) {
  std::FILE* file = std::fopen(options.json.c_str(), "w");
  if (file == nullptr) {
    std::fprintf(stderr, "%s: cannot write %s: %s\n", program_name, options.json.c_str(),
                 std::strerror(errno));
    std::exit(1);
  }
  std::fprintf(
      file,
      "{\n  \"program\": \"%s\",\n  \"system\": \"%s\",\n  \"transport\": \"%s\",\n"
      "  \"description\": \"%s\",\n  \"ranks\": %d,\n  \"type\": \"%s\",\n  \"op\": \"%s\",\n"
      "  \"algorithm\": \"%s\",\n  \"iterations\": %d,\n  \"warmup\": %d,\n  \"results\": [",
      program_name, system.c_str(), transport.c_str(), json_escape(description).c_str(), ranks,
      options.type.c_str(), options.op.c_str(), options.algorithm.c_str(), options.iterations,
      options.warmup);
  auto form = [&](const char* name, const std::optional<form_result>& result) {
    if (!result) {
      std::fprintf(file, "\"%s\": null", name);
      return;
    }
    std::fprintf(file,
                 "\"%s\": {\"time_us\": %.3f, \"algbw\": %.6f, \"busbw\": %.6f, \"wrong\": ", name,
                 result->time_us, result->algbw, result->busbw);
    if (result->wrong < 0)
      std::fprintf(file, "null}");
    else
      std::fprintf(file, "%lld}", result->wrong);
  };
  for (std::size_t i = 0; i < totals.rows.size(); ++i) {
    const auto& line = totals.rows[i];
    std::fprintf(file,
                 "%s\n    {\"collective\": \"%s\", \"bytes\": %zu, \"count\": %zu, \"root\": %d, ",
                 i ? "," : "", line.collective.c_str(), line.bytes, line.count, line.root);
    form("out_of_place", line.out_of_place);
    std::fprintf(file, ", ");
    form("in_place", line.in_place);
    std::fprintf(file, "}");
  }
  std::fprintf(file, "\n  ],\n  \"skipped\": [");
  for (std::size_t i = 0; i < totals.skipped.size(); ++i) {
    std::fprintf(file, "%s\"%s\"", i ? ", " : "", json_escape(totals.skipped[i]).c_str());
  }
  std::fprintf(file, "],\n  \"wrong\": %zu,\n  \"avg_busbw\": %.6f\n}\n", totals.wrong,
               average_busbw(totals));
  std::fclose(file);
}

inline int print_footer(const summary& totals) {
  std::printf("# Out of bounds values : %zu %s\n", totals.wrong,
              totals.wrong == 0 ? "OK" : "FAILED");
  std::printf("# Avg bus bandwidth    : %g\n", average_busbw(totals));
  std::printf("#\n");
  return totals.wrong == 0 ? 0 : 1;
}

}  // namespace weft_bench
