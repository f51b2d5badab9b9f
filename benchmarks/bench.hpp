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
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
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
};

inline const char* program_name = "weft-bench";

inline std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : "|") + name;
  return text;
}

[[noreturn]] inline void usage(const std::string& problem) {
  std::fprintf(stderr,
               "%s: %s\n"
               "usage: %s [--transport inproc|tcp|ofi] [--ranks N (inproc)] [--collective NAME|all]\n"
               "         [--algorithm NAME] [-b MIN_BYTES] [-e MAX_BYTES] [-f FACTOR] [-n ITERS]\n"
               "         [-w WARMUP] [-c 0|1] [-d TYPE] [-o OP] [-r ROOT] [--json FILE]\n"
               "  collectives: %s\n  algorithms:  %s\n  types:       %s\n  ops:         %s\n"
               "  sizes take K, M and G suffixes (powers of 1024)\n",
               program_name, problem.c_str(), program_name, joined(collective_names()).c_str(),
               joined(algorithm_names()).c_str(), joined(type_names()).c_str(),
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
    else usage("unknown flag '" + flag + "'");
  }
  if (result.collective != "all") require_one_of("--collective", result.collective, collective_names());
  require_one_of("--algorithm", result.algorithm, algorithm_names());
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

struct measurement {
  double seconds = 0;     // median over the iterations of the slowest rank (rank 0 only)
  std::size_t wrong = 0;  // this rank's wrong elements in the first timed iteration
};

// One collective, one size, one form, on every rank. `count` is the table's count column.
template <class T, class Op, class Comm>
measurement measure(Comm& comm, const std::string& collective, std::size_t count, bool in_place,
                    const settings& options, Op op) {
  const int p = comm.size();
  const int r = comm.rank();
  const auto ranks = static_cast<std::size_t>(p);
  const int root = rooted(collective) ? options.root : -1;
  const std::size_t block = blocked(collective) ? count / ranks : count;
  std::vector<T> in, out;
  auto fill = [&] {
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
  };
  auto once = [&] {
    const std::span<const T> input(in);
    if (collective == "allreduce") {
      if (in_place) weft::allreduce(comm, std::span<T>(in), op);
      else weft::allreduce(comm, input, std::span<T>(out), op);
    } else if (collective == "reduce") {
      if (in_place) weft::reduce(comm, std::span<T>(in), op, root);
      else weft::reduce(comm, input, std::span<T>(out), op, root);
    } else if (collective == "reduce_scatter") {
      weft::reduce_scatter(comm, input, std::span<T>(out), op);
    } else if (collective == "broadcast") {
      weft::broadcast(comm, std::span<T>(in), root);
    } else if (collective == "allgather") {
      const auto own = std::span<const T>(out).subspan(block * static_cast<std::size_t>(r), block);
      weft::allgather(comm, in_place ? own : input, std::span<T>(out));
    } else if (collective == "gather") {
      weft::gather(comm, input, std::span<T>(out), root);
    } else if (collective == "scatter") {
      weft::scatter(comm, input, std::span<T>(out), root);
    } else if (collective == "alltoall") {
      weft::alltoall(comm, input, std::span<T>(out));
    } else if (collective == "sendrecv") {
      weft::sendrecv(comm, input, (r + 1) % p, std::span<T>(out), (r + p - 1) % p);
    }
  };
  auto wrong = [&]() -> std::size_t {
    std::size_t bad = 0;
    const std::vector<T>& result = in_place || collective == "broadcast" ? in : out;
    if (collective == "allreduce" || (collective == "reduce" && r == root)) {
      const auto& data = in_place ? in : out;
      for (std::size_t i = 0; i < count; ++i) bad += !(data[i] == reduced<T>(p, i, op));
    } else if (collective == "reduce_scatter") {
      for (std::size_t i = 0; i < block; ++i) bad += !(out[i] == reduced<T>(p, static_cast<std::size_t>(r) * block + i, op));
    } else if (collective == "broadcast") {
      for (std::size_t i = 0; i < count; ++i) bad += !(result[i] == value<T>(broadcast_value(root, i)));
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
  };
  const bool refill = in_place || collective == "broadcast";  // the call overwrites its input
  fill();
  for (int i = 0; i < options.warmup; ++i) {
    once();
    if (refill) fill();
  }
  measurement result;
  std::vector<double> times;
  std::vector<double> slowest(1);
  for (int i = 0; i < options.iterations; ++i) {
    weft::barrier(comm);
    const auto start = std::chrono::steady_clock::now();
    once();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    weft::allreduce(comm, std::span<const double>(&seconds, 1), std::span<double>(slowest), weft::max{},
                    weft::recursive_doubling{});
    times.push_back(slowest[0]);
    if (i == 0 && options.check) result.wrong = wrong();
    if (refill) fill();
  }
  std::sort(times.begin(), times.end());
  result.seconds = times[times.size() / 2];
  return result;
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
  return collective_names();
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

// Every rank calls it; rank 0 prints and fills `totals`.
template <class T, class Op, class Comm>
void run_typed(Comm& comm, const settings& options, Op op, summary& totals) {
  const int p = comm.size();
  const auto collectives = collectives_of(options);
  const auto sizes = sizes_of(options);
  std::optional<progress> shown;
  if (comm.rank() == 0) shown.emplace(collectives.size() * sizes.size());
  for (const auto& collective : collectives) {
    if (rooted(collective) && options.root >= p) {
      throw weft::error(weft::errc::invalid_argument, std::string(program_name) + ": root " +
                                                          std::to_string(options.root) + " is not a rank of " +
                                                          std::to_string(p));
    }
    if (comm.rank() == 0) print_columns(collective);
    for (const std::size_t bytes : sizes) {
      if (shown) shown->point(collective, bytes);
      std::size_t count = bytes / sizeof(T);
      if (blocked(collective)) count = count / static_cast<std::size_t>(p) * static_cast<std::size_t>(p);
      if (count == 0) continue;
      row line{collective, count * sizeof(T), count, rooted(collective) ? options.root : -1, {}, {}};
      std::array<std::size_t, 2> wrong{0, 0};
      std::optional<measurement> forms[2];
      try {
        if (has_out_of_place(collective)) forms[0] = measure<T>(comm, collective, count, false, options, op);
        if (has_in_place(collective)) forms[1] = measure<T>(comm, collective, count, true, options, op);
      } catch (const weft::error& failure) {
        // WEFT_ALGO refused the algorithm for this collective on every rank before anything was
        // sent; with --collective all the others still run.
        if (failure.code() != weft::errc::invalid_argument || options.collective != "all" ||
            options.algorithm == "automatic") {
          throw;
        }
        if (comm.rank() == 0) {
          std::printf("#   skipped: %s does not implement %s\n", options.algorithm.c_str(), collective.c_str());
          totals.skipped.push_back(collective + ": " + options.algorithm + " does not implement it");
        }
        break;
      }
      for (int form = 0; form < 2; ++form) wrong[static_cast<std::size_t>(form)] = forms[form] ? forms[form]->wrong : 0;
      std::array<std::size_t, 2> all_wrong{0, 0};
      weft::allreduce(comm, std::span<const std::size_t>(wrong), std::span<std::size_t>(all_wrong), weft::sum{},
                      weft::recursive_doubling{});
      if (comm.rank() != 0) continue;
      const double size = static_cast<double>(line.bytes);
      for (int form = 0; form < 2; ++form) {
        if (!forms[form]) continue;
        form_result result;
        result.time_us = forms[form]->seconds * 1e6;
        result.algbw = size / forms[form]->seconds / 1e9;
        result.busbw = result.algbw * bus_factor(collective, p);
        result.wrong = options.check ? static_cast<long long>(all_wrong[static_cast<std::size_t>(form)]) : -1;
        totals.wrong += all_wrong[static_cast<std::size_t>(form)];
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

inline void write_json(const settings& options, const std::string& transport, const std::string& description,
                       int ranks, const summary& totals) {
  std::FILE* file = std::fopen(options.json.c_str(), "w");
  if (file == nullptr) {
    std::fprintf(stderr, "%s: cannot write %s: %s\n", program_name, options.json.c_str(), std::strerror(errno));
    std::exit(1);
  }
  std::fprintf(file,
               "{\n  \"program\": \"weft-bench\",\n  \"system\": \"weft\",\n  \"transport\": \"%s\",\n"
               "  \"description\": \"%s\",\n  \"ranks\": %d,\n  \"type\": \"%s\",\n  \"op\": \"%s\",\n"
               "  \"algorithm\": \"%s\",\n  \"iterations\": %d,\n  \"warmup\": %d,\n  \"results\": [",
               transport.c_str(), json_escape(description).c_str(), ranks, options.type.c_str(),
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
