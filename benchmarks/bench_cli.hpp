// weft-bench's command line (settings, parse, usage), the names it accepts, and what each
// collective is (rooted, blocked, in place or not, its busbw factor): shared by weft-bench and
// the comparison programs in compare/.
#pragma once

#include <weft/weft.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
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
      "automatic",
      "ring",
      "binomial_tree",
      "double_binary_tree",
      "recursive_doubling",
      "recursive_halving",
      "bruck",
      "pairwise",
      "dissemination",
      "direct",
      "fused"};  // fused: transports that run collectives whole (cuda)
  return names;
}
inline const std::vector<std::string>& type_names() {
  static const std::vector<std::string> names = {"int8",   "uint8", "int32", "uint32", "int64",
                                                 "uint64", "half",  "float", "double", "bfloat16"};
  return names;
}
inline const std::vector<std::string>& op_names() {
  static const std::vector<std::string> names = {"sum", "prod", "max", "min", "avg"};
  return names;
}

struct settings {
  std::string transport;  // empty: tcp when a launcher started this process, else inproc
  int ranks = 0;          // inproc and cuda; 0: 4
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

// The flags with their defaults: to stdout for --help (exit 0), to stderr after `problem` (exit 2).
[[noreturn]] inline void usage(const std::string& problem) {
  const settings d;
  std::FILE* out = problem.empty() ? stdout : stderr;
  if (!problem.empty()) std::fprintf(out, "%s: %s\n", program_name, problem.c_str());
  std::fprintf(
      out,
      "usage: %s [flags]   (times the collectives as an nccl-tests table; defaults in brackets)\n"
      "  --transport inproc|tcp|ofi|shm|cuda|cuda-ipc  [tcp under a launcher, else inproc]\n"
      "  --ranks N           ranks of inproc and cuda [4]\n"
      "  --collective NAME|all  [%s]   --algorithm NAME  [%s]\n"
      "  -b MIN_BYTES -e MAX_BYTES -f FACTOR  the sizes [%zu, %zu, %zu]\n"
      "  -n ITERS -w WARMUP  timed and untimed calls per size [%d, %d]\n"
      "  -c 0|1              check every result [%d]\n"
      "  -d TYPE -o OP -r ROOT  element type, reduction, root [%s, %s, %d]\n"
      "  --json FILE         the results as JSON [none]\n"
      "  --trace FILE        each rank's calls' start and end, to FILE.<rank> [none]\n"
      "  --help              this text\n"
      "  collectives: %s\n  algorithms:  %s\n  types:       %s\n  ops:         %s\n"
      "  sizes take K, M and G suffixes (powers of 1024)\n",
      program_name, d.collective.c_str(), d.algorithm.c_str(), d.min_bytes, d.max_bytes, d.factor,
      d.iterations, d.warmup, d.check ? 1 : 0, d.type.c_str(), d.op.c_str(), d.root,
      joined(accepted_collectives).c_str(), joined(accepted_algorithms).c_str(),
      joined(type_names()).c_str(), joined(op_names()).c_str());
  std::exit(problem.empty() ? 0 : 2);
}

// "8", "64K", "16M", "1G" (powers of 1024) as bytes; nothing for anything else.
inline std::optional<std::size_t> size_value(const char* text) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text, &end);
  double scale = 1;
  if (end != text) {
    switch (*end) {
      case 'K':
      case 'k':
        scale = 1024.0;
        ++end;
        break;
      case 'M':
      case 'm':
        scale = 1024.0 * 1024;
        ++end;
        break;
      case 'G':
      case 'g':
        scale = 1024.0 * 1024 * 1024;
        ++end;
        break;
      default:
        break;
    }
  }
  if (end == text || *end != '\0' || errno != 0 || !(value >= 0) || value * scale > 1e15)
    return std::nullopt;
  return static_cast<std::size_t>(value * scale);
}

// Text for a JSON string (without its quotes): quotes and backslashes escaped, control
// characters dropped.
inline std::string json_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

inline std::size_t parse_size(const std::string& flag, const char* text) {
  const auto bytes = size_value(text);
  if (!bytes) usage(flag + " wants a size in bytes such as 8, 64K or 16M, not '" + text + "'");
  return *bytes;
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
    if (flag == "-h" || flag == "--help")
      usage("");
    else if (flag == "--transport" || flag == "-t")
      result.transport = value();
    else if (flag == "--ranks" || flag == "-g")
      result.ranks = parse_int(flag, value(), 1);
    else if (flag == "--collective")
      result.collective = value();
    else if (flag == "--algorithm" || flag == "-a")
      result.algorithm = value();
    else if (flag == "-b" || flag == "--minbytes")
      result.min_bytes = parse_size(flag, value());
    else if (flag == "-e" || flag == "--maxbytes")
      result.max_bytes = parse_size(flag, value());
    else if (flag == "-f" || flag == "--stepfactor")
      result.factor = static_cast<std::size_t>(parse_int(flag, value(), 2));
    else if (flag == "-n" || flag == "--iters")
      result.iterations = parse_int(flag, value(), 1);
    else if (flag == "-w" || flag == "--warmup_iters")
      result.warmup = parse_int(flag, value(), 0);
    else if (flag == "-c" || flag == "--check")
      result.check = parse_int(flag, value(), 0) != 0;
    else if (flag == "-d" || flag == "--datatype")
      result.type = value();
    else if (flag == "-o" || flag == "--op")
      result.op = value();
    else if (flag == "-r" || flag == "--root")
      result.root = parse_int(flag, value(), 0);
    else if (flag == "--json" || flag == "-J")
      result.json = value();
    else if (flag == "--trace")
      result.trace = value();
    else
      usage("unknown flag '" + flag + "'");
  }
  if (result.collective != "all")
    require_one_of("--collective", result.collective, accepted_collectives);
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
  return collective == "allgather" || collective == "reduce_scatter" || collective == "alltoall" ||
         collective == "gather" || collective == "scatter";
}
// The elements of a call of `size_bytes` (its largest buffer): whole elements, and for a blocked
// collective a multiple of the ranks.
inline std::size_t element_count(const std::string& collective, std::size_t size_bytes,
                                 std::size_t element_size, int ranks) {
  std::size_t count = size_bytes / element_size;
  if (blocked(collective))
    count = count / static_cast<std::size_t>(ranks) * static_cast<std::size_t>(ranks);
  return count;
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

}  // namespace weft_bench
