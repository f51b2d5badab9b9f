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

inline const std::vector<std::string>& collective_names() {
  static const std::vector<std::string> names = {"allreduce", "broadcast",      "reduce",
                                                 "allgather", "reduce_scatter", "alltoall",
                                                 "gather",    "scatter",        "sendrecv"};
  return names;
}
inline const std::vector<std::string>& algorithm_names() {
  static const std::vector<std::string> names = {
      "automatic",          "ring",              "binomial_tree", "double_binary_tree",
      "recursive_doubling", "recursive_halving", "bruck",         "pairwise",
      "dissemination",      "direct"};
  return names;
}
inline const std::vector<std::string>& type_names() {
  static const std::vector<std::string> names = {"int8",  "uint8",  "int32", "uint32",   "int64",
                                                 "uint64", "half",  "float", "double", "bfloat16"};
  return names;
}
inline const std::vector<std::string>& op_names() {
  static const std::vector<std::string> names = {"sum", "prod", "max", "min", "avg"};
  return names;
}

struct settings {
  std::string transport;  // empty: tcp when a launcher started this process, else inproc
  int ranks = 0;          // inproc only; 0: 4
  std::string collective = "all";
  std::string algorithm = "automatic";
  std::string type = "float";
  std::string op = "sum";
  int root = 0;
  std::size_t min_bytes = 8;
  std::size_t max_bytes = std::size_t{64} << 20;
  std::size_t factor = 4;
  int iterations = 20;
  int warmup = 5;
  bool check = true;
  std::string json;  // file to write the results to as JSON; "" for none
  // Each rank writes TRACE.<rank>: every timed call's start and end (steady clock, the same for
  // every process of a host); "" for none. benchmarks/compare/stagger.py reads them.
  std::string trace;
};

inline const char* program_name = "weft-bench";
// What --collective and --algorithm accept: weft's; the comparison programs set their library's.
inline std::vector<std::string> accepted_collectives = collective_names();
inline std::vector<std::string> accepted_algorithms = algorithm_names();

inline std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : "|") + name;
  return text;
}

[[noreturn]] inline void usage(const std::string& problem) {
  std::fprintf(stderr,
               "%s: %s\n"
               "usage: %s [--transport inproc|tcp|ofi|shm] [--ranks N (inproc)] [--collective NAME|all]\n"
               "         [--algorithm NAME] [-b MIN_BYTES] [-e MAX_BYTES] [-f FACTOR] [-n ITERS]\n"
               "         [-w WARMUP] [-c 0|1] [-d TYPE] [-o OP] [-r ROOT] [--json FILE] [--trace FILE]\n"
               "  collectives: %s\n  algorithms:  %s\n  types:       %s\n  ops:         %s\n"
               "  sizes take K, M and G suffixes (powers of 1024)\n",
               program_name, problem.c_str(), program_name, joined(accepted_collectives).c_str(),
               joined(accepted_algorithms).c_str(), joined(type_names()).c_str(),
               joined(op_names()).c_str());
  std::exit(2);
}

inline std::size_t parse_size(const std::string& flag, const char* text) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text, &end);
  double scale = 1;
  if (end != text) {
    switch (*end) {
      case 'K': case 'k': scale = 1024.0; ++end; break;
      case 'M': case 'm': scale = 1024.0 * 1024; ++end; break;
      case 'G': case 'g': scale = 1024.0 * 1024 * 1024; ++end; break;
      default: break;
    }
  }
  if (end == text || *end != '\0' || errno != 0 || !(value >= 0) || value * scale > 1e15) {
    usage(flag + " wants a size in bytes such as 8, 64K or 16M, not '" + text + "'");
  }
  return static_cast<std::size_t>(value * scale);
}

inline int parse_int(const std::string& flag, const char* text, int lowest) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || value < lowest || value > 1 << 30) {
    usage(flag + " wants a whole number >= " + std::to_string(lowest) + ", not '" + text + "'");
  }
  return static_cast<int>(value);
}

inline void require_one_of(const std::string& flag, const std::string& value,
                           const std::vector<std::string>& choices) {
  if (std::find(choices.begin(), choices.end(), value) == choices.end()) {
    usage(flag + " '" + value + "' is not one of " + joined(choices));
  }
}

inline settings parse(int argc, char** argv) {
  settings result;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage("missing value after " + flag);
      return argv[++i];
    };
    if (flag == "-h" || flag == "--help") usage("the collectives as an nccl-tests table");
    else if (flag == "--transport" || flag == "-t") result.transport = value();
    else if (flag == "--ranks" || flag == "-g") result.ranks = parse_int(flag, value(), 1);
    else if (flag == "--collective") result.collective = value();
    else if (flag == "--algorithm" || flag == "-a") result.algorithm = value();
    else if (flag == "-b" || flag == "--minbytes") result.min_bytes = parse_size(flag, value());
    else if (flag == "-e" || flag == "--maxbytes") result.max_bytes = parse_size(flag, value());
    else if (flag == "-f" || flag == "--stepfactor") result.factor = static_cast<std::size_t>(parse_int(flag, value(), 2));
    else if (flag == "-n" || flag == "--iters") result.iterations = parse_int(flag, value(), 1);
    else if (flag == "-w" || flag == "--warmup_iters") result.warmup = parse_int(flag, value(), 0);
    else if (flag == "-c" || flag == "--check") result.check = parse_int(flag, value(), 0) != 0;
    else if (flag == "-d" || flag == "--datatype") result.type = value();
    else if (flag == "-o" || flag == "--op") result.op = value();
    else if (flag == "-r" || flag == "--root") result.root = parse_int(flag, value(), 0);
    else if (flag == "--json" || flag == "-J") result.json = value();
    else if (flag == "--trace") result.trace = value();
    else usage("unknown flag '" + flag + "'");
  }
  if (result.collective != "all") require_one_of("--collective", result.collective, accepted_collectives);
  require_one_of("--algorithm", result.algorithm, accepted_algorithms);
  require_one_of("-d", result.type, type_names());
  require_one_of("-o", result.op, op_names());
  if (result.min_bytes > result.max_bytes) usage("-b is larger than -e");
  return result;
}

inline bool reduces(const std::string& collective) {
  return collective == "allreduce" || collective == "reduce" || collective == "reduce_scatter";
}
inline bool rooted(const std::string& collective) {
  return collective == "broadcast" || collective == "reduce" || collective == "gather" ||
         collective == "scatter";
}
// Collectives whose buffers hold one block per rank: their element count is a multiple of p.
inline bool blocked(const std::string& collective) {
  return collective == "allgather" || collective == "reduce_scatter" ||
         collective == "alltoall" || collective == "gather" || collective == "scatter";
}
inline bool has_out_of_place(const std::string& collective) { return collective != "broadcast"; }
inline bool has_in_place(const std::string& collective) {
  return collective == "allreduce" || collective == "reduce" || collective == "allgather" ||
         collective == "broadcast";
}

inline double bus_factor(const std::string& collective, int p) {
  if (collective == "allreduce") return 2.0 * (p - 1) / p;
  if (collective == "broadcast" || collective == "reduce" || collective == "sendrecv") return 1.0;
  return static_cast<double>(p - 1) / p;
}

// Sets WEFT_ALGO so the collectives measured use `algorithm` (nothing for automatic). The
// timing's own reductions name their algorithm explicitly, so WEFT_ALGO does not reach them.
inline void force_algorithm(const settings& options) {
  if (options.algorithm == "automatic") return;
  std::string spec;
  for (const auto& name : collective_names()) {
    if (name == "sendrecv") continue;
    if (options.collective != "all" && options.collective != name) continue;
    spec += (spec.empty() ? "" : ",") + name + "=" + options.algorithm;
  }
  setenv("WEFT_ALGO", spec.c_str(), 1);
}

// ---- inputs whose results are known exactly ------------------------------------------------------

template <class T>
T value(int v) {
  if constexpr (weft::is_narrow_float_v<T>) return T(static_cast<float>(v));
  else return static_cast<T>(v);
}

// What rank r contributes at element i of a reduction. Sums stay below 8 per rank (exact in
// every type for up to 32 ranks, wrapping defined for the integers beyond); for prod one rank
// contributes 1..3 at each element and the others 1.
template <class Op>
int contribution(int r, int p, std::size_t i) {
  if constexpr (std::is_same_v<Op, weft::prod>) {
    return (i + static_cast<std::size_t>(r)) % static_cast<std::size_t>(p) == 0 ? static_cast<int>(i % 3) + 1 : 1;
  } else {
    return static_cast<int>((static_cast<std::size_t>(r) * 3 + i) % 7) + 1;
  }
}
template <class T, class Op>
T reduced(int p, std::size_t i, Op op) {
  T acc = value<T>(contribution<Op>(0, p, i));
  for (int r = 1; r < p; ++r) acc = op(acc, value<T>(contribution<Op>(r, p, i)));
  return weft::finalize(op, acc, p);
}
// Rank r's block in gather, allgather, scatter and sendrecv.
inline int block_value(int r, std::size_t i) { return static_cast<int>((static_cast<std::size_t>(r) * 5 + i) % 11) + 1; }
// Element i of the block rank `from` sends to rank `to` in alltoall.
inline int exchange_value(int from, int to, std::size_t i) {
  return static_cast<int>((static_cast<std::size_t>(from) * 7 + static_cast<std::size_t>(to) * 3 + i) % 13) + 1;
}
inline int broadcast_value(int root, std::size_t i) { return static_cast<int>((static_cast<std::size_t>(root) + i) % 13) + 1; }

// ---- one measurement -------------------------------------------------------------------------

// The buffers of one call with inputs whose results are known; any library's call can run on
// them (weft-bench and the comparison programs in compare/ share it).
template <class T, class Op, class Allocator = std::allocator<T>>
struct workload {
  using vector = std::vector<T, Allocator>;
  std::string collective;
  std::size_t count = 0;  // the table's count column
  bool in_place = false;
  int p = 1, r = 0, root = -1;
  Op op{};
  std::size_t block = 0;  // elements per rank's block (blocked collectives), else count
  vector in, out;

  workload(std::string name, std::size_t elements, bool same_buffer, int ranks, int rank, int at, Op reduction = {},
           const Allocator& storage = Allocator())
      : collective(std::move(name)), count(elements), in_place(same_buffer), p(ranks), r(rank),
        root(rooted(collective) ? at : -1), op(reduction),
        block(blocked(collective) ? elements / static_cast<std::size_t>(ranks) : elements), in(storage), out(storage) {
    fill();
  }

  // Whether the call overwrites its input (so the inputs are restored between iterations).
  bool overwrites_input() const { return in_place || collective == "broadcast"; }
  // In place, the buffer the call works on: `in` (allreduce, reduce, broadcast) or `out`
  // (allgather, whose input is this rank's block of it).
  std::span<const T> own_block() const {
    return std::span<const T>(out).subspan(block * static_cast<std::size_t>(r), block);
  }

  // The buffer the call leaves its result in on this rank.
  vector& result() { return (in_place && collective != "allgather") || collective == "broadcast" ? in : out; }

  void fill() {
    if (collective == "allreduce" || collective == "reduce") {
      in.resize(count);
      for (std::size_t i = 0; i < count; ++i) in[i] = value<T>(contribution<Op>(r, p, i));
      out.assign(in_place ? 0 : count, value<T>(0));
    } else if (collective == "reduce_scatter") {
      in.resize(count);
      for (std::size_t i = 0; i < count; ++i) in[i] = value<T>(contribution<Op>(r, p, i));
      out.assign(block, value<T>(0));
    } else if (collective == "broadcast") {
      in.resize(count);
      for (std::size_t i = 0; i < count; ++i) in[i] = value<T>(r == root ? broadcast_value(root, i) : 0);
    } else if (collective == "allgather" || collective == "gather" || collective == "sendrecv") {
      in.resize(block);
      for (std::size_t i = 0; i < block; ++i) in[i] = value<T>(block_value(r, i));
      const bool receives_all = collective == "allgather" || r == root;
      out.assign(collective == "sendrecv" ? block : (receives_all ? count : 0), value<T>(0));
      if (in_place) std::copy(in.begin(), in.end(), out.begin() + static_cast<std::ptrdiff_t>(block * static_cast<std::size_t>(r)));
    } else if (collective == "scatter") {
      in.assign(r == root ? count : 0, value<T>(0));
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = value<T>(block_value(static_cast<int>(i / block), i % block));
      out.assign(block, value<T>(0));
    } else if (collective == "alltoall") {
      in.resize(count);
      for (std::size_t i = 0; i < count; ++i) in[i] = value<T>(exchange_value(r, static_cast<int>(i / block), i % block));
      out.assign(count, value<T>(0));
    }
  }

  // Elements of this rank's result that differ from the known answer.
  std::size_t wrong() const {
    std::size_t bad = 0;
    if (collective == "allreduce" || (collective == "reduce" && r == root)) {
      const auto& data = in_place ? in : out;
      bad = wrong_reduction(std::span<const T>(data.data(), count), 0);
    } else if (collective == "reduce_scatter") {
      bad = wrong_reduction(std::span<const T>(out.data(), block), static_cast<std::size_t>(r) * block);
    } else if (collective == "broadcast") {
      for (std::size_t i = 0; i < count; ++i) bad += !(in[i] == value<T>(broadcast_value(root, i)));
    } else if (collective == "allgather" || (collective == "gather" && r == root)) {
      for (std::size_t i = 0; i < count; ++i) bad += !(out[i] == value<T>(block_value(static_cast<int>(i / block), i % block)));
    } else if (collective == "scatter") {
      for (std::size_t i = 0; i < block; ++i) bad += !(out[i] == value<T>(block_value(r, i)));
    } else if (collective == "alltoall") {
      for (std::size_t i = 0; i < count; ++i) bad += !(out[i] == value<T>(exchange_value(static_cast<int>(i / block), r, i % block)));
    } else if (collective == "sendrecv") {
      for (std::size_t i = 0; i < block; ++i) bad += !(out[i] == value<T>(block_value((r + p - 1) % p, i)));
    }
    return bad;
  }

  // Wrong elements of a reduced result whose first element is element `first` of the reduction.
  // The contributions repeat every 7 elements (every 3p for prod), so one period of the answer
  // is folded over the ranks once and the result compared against it.
  std::size_t wrong_reduction(std::span<const T> data, std::size_t first) const {
    const std::size_t period = std::is_same_v<Op, weft::prod> ? 3 * static_cast<std::size_t>(p) : 7;
    std::vector<T> answer(period);
    for (std::size_t k = 0; k < period; ++k) answer[k] = reduced<T>(p, first + k, op);
    std::size_t bad = 0;
    for (std::size_t i = 0, k = 0; i < data.size(); ++i, k = (k + 1 == period ? 0 : k + 1)) {
      bad += !(data[i] == answer[k]);
    }
    return bad;
  }
};

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
measurement time_calls(const settings& options, Work& work, Barrier&& barrier, Once&& once, Slowest&& slowest) {
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
        return static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch()).count());
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

// The weft call a workload describes, on every rank.
template <class Comm, class T, class Op, class Allocator>
void call_weft(Comm& comm, workload<T, Op, Allocator>& work) {
  const int p = comm.size();
  const int r = comm.rank();
  const int root = work.root;
  const bool in_place = work.in_place;
  const std::string& collective = work.collective;
  const Op op = work.op;
  const std::span<const T> input(work.in);
  const std::span<T> output(work.out);
  if (collective == "allreduce") {
    if (in_place) weft::allreduce(comm, std::span<T>(work.in), op);
    else weft::allreduce(comm, input, output, op);
  } else if (collective == "reduce") {
    if (in_place) weft::reduce(comm, std::span<T>(work.in), op, root);
    else weft::reduce(comm, input, output, op, root);
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
  workload<T, Op, storage> work(collective, count, in_place, comm.size(), comm.rank(), options.root, op,
                                storage_for<storage>(comm.memory()));
  auto once = [&] { call_weft(comm, work); };
  auto slowest = [&](double seconds) {
    double result = 0;
    weft::allreduce(comm, std::span<const double>(&seconds, 1), std::span<double>(&result, 1), weft::max{},
                    weft::recursive_doubling{});
    return result;
  };
  try {
    return time_calls(options, work, [&] { weft::barrier(comm); }, once, slowest);
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
              collective.c_str(), "size", "count", "type", "redop", "root", "time", "algbw", "busbw",
              "#wrong", "time", "algbw", "busbw", "#wrong");
  std::printf("#%10s %12s %8s %6s %6s   %9s %8s %8s %6s   %9s %8s %8s %6s\n", "(B)", "(elements)", "",
              "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

inline void print_form(const std::optional<form_result>& form) {
  if (!form) {
    std::printf("   %9s %8s %8s %6s", "n/a", "n/a", "n/a", "n/a");
    return;
  }
  std::printf("   %9.1f %8.2f %8.2f", form->time_us, form->algbw, form->busbw);
  if (form->wrong < 0) std::printf(" %6s", "N/A");
  else std::printf(" %6lld", form->wrong);
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
void sweep(const settings& options, std::size_t element_size, int p, int rank, const std::vector<std::string>& collectives,
           Measure&& measure_form, HasForm&& has_form, SumAcross&& sum_across, summary& totals) {
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
                                  (trace ? "" : " (rank " + std::to_string(rank) + ": " + path + ": " + std::strerror(errno) + ")"));
    }
    std::fprintf(trace.get(), "# collective bytes form iteration start_ns end_ns (rank %d of %d)\n", rank, p);
  }
  std::optional<progress> shown;
  if (rank == 0) shown.emplace(collectives.size() * sizes.size());
  for (const auto& collective : collectives) {
    if (rooted(collective) && options.root >= p) {
      throw std::invalid_argument(std::string(program_name) + ": root " + std::to_string(options.root) +
                                  " is not a rank of " + std::to_string(p));
    }
    if (rank == 0) print_columns(collective);
    auto count_of = [&](std::size_t bytes) {
      std::size_t count = bytes / element_size;
      if (blocked(collective)) count = count / static_cast<std::size_t>(p) * static_cast<std::size_t>(p);
      return count;
    };
    settings warm_up = options;
    warm_up.iterations = 1;
    warm_up.check = false;
    const bool first_form_in_place = !has_form(collective, false);
    try {
      for (const std::size_t bytes : {sizes.back(), sizes.front()}) {
        if (options.warmup > 0 && count_of(bytes) > 0) measure_form(collective, count_of(bytes), first_form_in_place, warm_up);
      }
      // Then the smallest size again until warm_up_time has passed on the ranks (on average,
      // so that every rank takes the same decision): right after start-up, ranks a launcher
      // did not bind to cores share one core for some tens of milliseconds, and a
      // small-message latency measured then is several times the steady one.
      const std::size_t smallest = count_of(sizes.front());
      const auto started = std::chrono::steady_clock::now();
      while (options.warmup > 0 && smallest > 0) {
        const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started);
        const auto average = sum_across(std::array<std::size_t, 2>{static_cast<std::size_t>(waited.count()), 0})[0] /
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
      row line{collective, count * element_size, count, rooted(collective) ? options.root : -1, {}, {}};
      std::optional<measurement> forms[2];
      try {
        for (int form = 0; form < 2; ++form) {
          if (has_form(collective, form == 1)) forms[form] = measure_form(collective, count, form == 1, options);
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
          std::fprintf(trace.get(), "%s %zu %s %zu %lld %lld\n", collective.c_str(), count * element_size,
                       form == 1 ? "in" : "out", i, calls[i][0], calls[i][1]);
        }
      }
      std::array<std::size_t, 2> wrong{forms[0] ? forms[0]->wrong : 0, forms[1] ? forms[1]->wrong : 0};
      wrong = sum_across(wrong);
      if (rank != 0) continue;
      const double size = static_cast<double>(line.bytes);
      for (int form = 0; form < 2; ++form) {
        if (!forms[form]) continue;
        form_result result;
        result.time_us = forms[form]->seconds * 1e6;
        result.algbw = size / forms[form]->seconds / 1e9;
        result.busbw = result.algbw * bus_factor(collective, p);
        result.wrong = options.check ? static_cast<long long>(wrong[static_cast<std::size_t>(form)]) : -1;
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
        weft::allreduce(comm, std::span<const std::size_t>(wrong), std::span<std::size_t>(total), weft::sum{},
                        weft::recursive_doubling{});
        return total;
      },
      totals);
}

// Calls fn(std::type_identity<T>{}, op) for the type and op the settings name.
template <class Function>
void with_type_and_op(const settings& options, Function&& fn) {
  auto with_op = [&](auto type) {
    const std::string& op = options.op;
    if (op == "sum") fn(type, weft::sum{});
    else if (op == "prod") fn(type, weft::prod{});
    else if (op == "max") fn(type, weft::max{});
    else if (op == "min") fn(type, weft::min{});
    else fn(type, weft::avg{});
  };
  const std::string& type = options.type;
  if (type == "int8") with_op(std::type_identity<std::int8_t>{});
  else if (type == "uint8") with_op(std::type_identity<std::uint8_t>{});
  else if (type == "int32") with_op(std::type_identity<std::int32_t>{});
  else if (type == "uint32") with_op(std::type_identity<std::uint32_t>{});
  else if (type == "int64") with_op(std::type_identity<std::int64_t>{});
  else if (type == "uint64") with_op(std::type_identity<std::uint64_t>{});
  else if (type == "half") with_op(std::type_identity<weft::half>{});
  else if (type == "double") with_op(std::type_identity<double>{});
  else if (type == "bfloat16") with_op(std::type_identity<weft::bfloat16>{});
  else with_op(std::type_identity<float>{});
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

inline std::string json_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

inline void write_json(const settings& options, const std::string& system, const std::string& transport, const std::string& description,
                       int ranks, const summary& totals) {
  std::FILE* file = std::fopen(options.json.c_str(), "w");
  if (file == nullptr) {
    std::fprintf(stderr, "%s: cannot write %s: %s\n", program_name, options.json.c_str(), std::strerror(errno));
    std::exit(1);
  }
  std::fprintf(file,
               "{\n  \"program\": \"%s\",\n  \"system\": \"%s\",\n  \"transport\": \"%s\",\n"
               "  \"description\": \"%s\",\n  \"ranks\": %d,\n  \"type\": \"%s\",\n  \"op\": \"%s\",\n"
               "  \"algorithm\": \"%s\",\n  \"iterations\": %d,\n  \"warmup\": %d,\n  \"results\": [",
               program_name, system.c_str(), transport.c_str(), json_escape(description).c_str(), ranks, options.type.c_str(),
               options.op.c_str(), options.algorithm.c_str(), options.iterations, options.warmup);
  auto form = [&](const char* name, const std::optional<form_result>& result) {
    if (!result) {
      std::fprintf(file, "\"%s\": null", name);
      return;
    }
    std::fprintf(file, "\"%s\": {\"time_us\": %.3f, \"algbw\": %.6f, \"busbw\": %.6f, \"wrong\": ", name,
                 result->time_us, result->algbw, result->busbw);
    if (result->wrong < 0) std::fprintf(file, "null}");
    else std::fprintf(file, "%lld}", result->wrong);
  };
  for (std::size_t i = 0; i < totals.rows.size(); ++i) {
    const auto& line = totals.rows[i];
    std::fprintf(file, "%s\n    {\"collective\": \"%s\", \"bytes\": %zu, \"count\": %zu, \"root\": %d, ",
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
  std::fprintf(file, "],\n  \"wrong\": %zu,\n  \"avg_busbw\": %.6f\n}\n", totals.wrong, average_busbw(totals));
  std::fclose(file);
}

inline int print_footer(const summary& totals) {
  std::printf("# Out of bounds values : %zu %s\n", totals.wrong, totals.wrong == 0 ? "OK" : "FAILED");
  std::printf("# Avg bus bandwidth    : %g\n", average_busbw(totals));
  std::printf("#\n");
  return totals.wrong == 0 ? 0 : 1;
}

}  // namespace weft_bench
