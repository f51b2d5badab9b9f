// weft/dispatch/calls.hpp — one description per collective call, type-erased to bytes, that the
// public calls (weft/collectives.hpp) hand to the algorithm asked for or to weft::automatic.
//
// A description carries what the facade checked (buffers as bytes, counts, root, the reducer)
// and knows two things: `supported<Algorithm, Comm>`, whether an algorithm implements this
// collective (a call to one that does not fails to compile with a sentence saying so), and
// `run`, which calls it. The three reductions share one shape (reduction_call), the
// data-movement collectives another (movement_call_base). Check mode describes each call
// (call_signature) so that ranks can compare them.
#pragma once

#include "weft/algorithms/binomial_tree.hpp"
#include "weft/algorithms/bruck.hpp"
#include "weft/algorithms/direct.hpp"
#include "weft/algorithms/dissemination.hpp"
#include "weft/algorithms/double_binary_tree.hpp"
#include "weft/algorithms/fused.hpp"
#include "weft/algorithms/hierarchical.hpp"
#include "weft/algorithms/in_switch.hpp"
#include "weft/algorithms/pairwise.hpp"
#include "weft/algorithms/recursive_doubling.hpp"
#include "weft/algorithms/recursive_halving.hpp"
#include "weft/algorithms/ring.hpp"
#include "weft/communicator.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/dispatch/check_mode.hpp"
#include "weft/dispatch/selection.hpp"
#include "weft/ops.hpp"
#include "weft/transport.hpp"
#include "weft/types.hpp"

#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

namespace weft::detail {

using builtin_algorithms =
    algorithm_list<ring, double_binary_tree, recursive_doubling, recursive_halving, binomial_tree,
                   bruck, pairwise, dissemination, direct, fused, in_switch,
                   hierarchical<ring, ring>, hierarchical<binomial_tree, binomial_tree>,
                   hierarchical<in_switch, ring>>;

template <class T>
constexpr std::string_view type_name() {
  if constexpr (std::is_same_v<T, std::int8_t>)
    return "int8";
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return "uint8";
  else if constexpr (std::is_same_v<T, std::int16_t>)
    return "int16";
  else if constexpr (std::is_same_v<T, std::uint16_t>)
    return "uint16";
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return "int32";
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return "uint32";
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return "int64";
  else if constexpr (std::is_same_v<T, std::uint64_t>)
    return "uint64";
  else if constexpr (std::is_same_v<T, float>)
    return "float32";
  else if constexpr (std::is_same_v<T, double>)
    return "float64";
  else if constexpr (std::is_same_v<T, bfloat16>)
    return "bfloat16";
  else if constexpr (std::is_same_v<T, half>)
    return "half";
  else if constexpr (std::is_integral_v<T>)
    return "integer";
  else if constexpr (std::is_floating_point_v<T>)
    return "floating";
  else
    return "user type";
}

// Describes a call for check mode (op is empty for the data-movement collectives).
inline call_signature describe_call(collective kind, std::size_t element_size,
                                    std::string_view type, std::string_view op, std::size_t count,
                                    int root, std::string_view algorithm) {
  call_signature result;
  result.kind = kind;
  result.element_size = static_cast<std::uint32_t>(element_size);
  result.count = count;
  result.root = root;
  call_signature::assign(result.type, type);
  call_signature::assign(result.op, op);
  call_signature::assign(result.algorithm, algorithm);
  return result;
}

template <class T>
call_signature signature(collective kind, std::string_view op, std::size_t count, int root,
                         std::string_view algorithm) {
  return describe_call(kind, sizeof(T), type_name<T>(), op, count, root, algorithm);
}

// One call description per collective: what the facade checked, type-erased to bytes.
// `supported` tells whether an algorithm implements it; `run` calls the algorithm.

// The three reductions share one shape: bytes in, bytes out, the reducer, and reduce's root.
template <collective Kind, bool Commutative>
struct reduction_call {
  static_assert(Kind == collective::allreduce || Kind == collective::reduce_scatter ||
                Kind == collective::reduce);
  static constexpr collective kind = Kind;
  static constexpr bool commutative = Commutative;
  const_bytes in;
  bytes out;
  const reducer* combine;
  int root;  // reduce's; -1 for the others
  call_signature (*describe)(std::size_t, std::string_view, int);

  template <class A, class Comm>
  static constexpr bool supported = (Kind == collective::allreduce &&
                                     requires(Comm & c, const_bytes i, bytes o, const reducer& f) {
                                       A::allreduce(c, i, o, f);
                                     }) ||
                                    (Kind == collective::reduce_scatter &&
                                     requires(Comm & c, const_bytes i, bytes o, const reducer& f) {
                                       A::reduce_scatter(c, i, o, f);
                                     }) ||
                                    (Kind == collective::reduce &&
                                     requires(Comm & c, const_bytes i, bytes o, const reducer& f,
                                              int r) { A::reduce(c, i, o, f, r); });
  template <class A, class Comm>
  void run(Comm& comm) const {
    if constexpr (Kind == collective::allreduce)
      A::allreduce(comm, in, out, *combine);
    else if constexpr (Kind == collective::reduce_scatter)
      A::reduce_scatter(comm, in, out, *combine);
    else
      A::reduce(comm, in, out, *combine, root);
  }
  // reduce's output is the root's alone, so its size is its input's; the others' is the output.
  std::size_t message_bytes() const { return Kind == collective::reduce ? in.size() : out.size(); }
  call_signature signature(std::string_view algorithm) const {
    return describe(message_bytes() / combine->element_size(), algorithm, root);
  }
  template <class Comm>
  void check(Comm& comm, std::string_view algorithm) const {
    check_call(comm, signature(algorithm));
  }
};

template <class T, class Op, collective Kind>
call_signature describe_reduction(std::size_t count, std::string_view algorithm, int root) {
  return signature<T>(Kind, op_name<Op>(), count, root, algorithm);
}

// The data-movement collectives share one shape: bytes in, bytes out, maybe a root.
struct movement_call_base {
  static constexpr bool commutative = true;
  std::size_t element_size;
  std::string_view type;
  call_signature describe(collective kind, std::size_t count, int root,
                          std::string_view algorithm) const {
    return describe_call(kind, element_size, type, "", count, root, algorithm);
  }
};

struct broadcast_call : movement_call_base {
  static constexpr collective kind = collective::broadcast;
  bytes data;
  int root;
  template <class A, class Comm>
  static constexpr bool supported = requires(Comm& c, bytes d, int root) {
    A::broadcast(c, d, root);
  };
  template <class A, class Comm>
  void run(Comm& comm) const {
    A::broadcast(comm, data, root);
  }
  std::size_t message_bytes() const { return data.size(); }
  call_signature signature(std::string_view algorithm) const {
    return describe(kind, data.size() / element_size, root, algorithm);
  }
  template <class Comm>
  void check(Comm& comm, std::string_view algorithm) const {
    check_call(comm, signature(algorithm));
  }
};

struct allgather_call : movement_call_base {
  static constexpr collective kind = collective::allgather;
  const_bytes in;
  bytes out;
  template <class A, class Comm>
  static constexpr bool supported = requires(Comm& c, const_bytes i, bytes o) {
    A::allgather(c, i, o);
  };
  template <class A, class Comm>
  void run(Comm& comm) const {
    A::allgather(comm, in, out);
  }
  std::size_t message_bytes() const { return in.size(); }
  call_signature signature(std::string_view algorithm) const {
    return describe(kind, in.size() / element_size, -1, algorithm);
  }
  template <class Comm>
  void check(Comm& comm, std::string_view algorithm) const {
    check_call(comm, signature(algorithm));
  }
};

struct allgatherv_call : movement_call_base {
  static constexpr collective kind = collective::allgatherv;
  const_bytes in;
  bytes out;
  layout blocks;
  std::span<const std::size_t> counts;
  template <class A, class Comm>
  static constexpr bool supported = requires(Comm& c, const_bytes i, bytes o, layout b) {
    A::allgatherv(c, i, o, b);
  };
  template <class A, class Comm>
  void run(Comm& comm) const {
    A::allgatherv(comm, in, out, blocks);
  }
  // the same on every rank: the total, spread over the ranks
  std::size_t message_bytes() const { return out.size() / (counts.empty() ? 1 : counts.size()); }
  call_signature signature(std::string_view algorithm) const {
    return describe(kind, out.size() / element_size, -1, algorithm);
  }
  template <class Comm>
  void check(Comm& comm, std::string_view algorithm) const {
    // rank i sends counts_i[i] elements to everyone; rank j expects counts_j[i] from rank i
    // (a vector of its own: index slots 4 and 5 hold this call's displacements)
    std::vector<std::size_t> expected(counts.size(), counts[static_cast<std::size_t>(comm.rank())]);
    check_call(comm, signature(algorithm), std::span<const std::size_t>(expected), counts);
  }
};

struct alltoall_call : movement_call_base {
  static constexpr collective kind = collective::alltoall;
  const_bytes in;
  bytes out;
  template <class A, class Comm>
  static constexpr bool supported = requires(Comm& c, const_bytes i, bytes o) {
    A::alltoall(c, i, o);
  };
  template <class A, class Comm>
  void run(Comm& comm) const {
    A::alltoall(comm, in, out);
  }
  std::size_t message_bytes() const { return in.size(); }
  call_signature signature(std::string_view algorithm) const {
    return describe(kind, in.size() / element_size, -1, algorithm);
  }
  template <class Comm>
  void check(Comm& comm, std::string_view algorithm) const {
    check_call(comm, signature(algorithm));
  }
};

struct alltoallv_call : movement_call_base {
  static constexpr collective kind = collective::alltoallv;
  const_bytes in;
  layout in_blocks;
  bytes out;
  layout out_blocks;
  std::span<const std::size_t> in_counts;
  std::span<const std::size_t> out_counts;
  template <class A, class Comm>
  static constexpr bool supported = requires(Comm& c, const_bytes i, bytes o, layout b) {
    A::alltoallv(c, i, b, o, b);
  };
  template <class A, class Comm>
  void run(Comm& comm) const {
    A::alltoallv(comm, in, in_blocks, out, out_blocks);
  }
  // per-rank counts differ, so the choice must not depend on them
  std::size_t message_bytes() const { return 0; }
  call_signature signature(std::string_view algorithm) const {
    return describe(kind, 0, -1, algorithm);
  }
  template <class Comm>
  void check(Comm& comm, std::string_view algorithm) const {
    check_call(comm, signature(algorithm), in_counts, out_counts);
  }
};

struct gather_call : movement_call_base {
  static constexpr collective kind = collective::gather;
  const_bytes in;
  bytes out;
  int root;
  template <class A, class Comm>
  static constexpr bool supported = requires(Comm& c, const_bytes i, bytes o, int root) {
    A::gather(c, i, o, root);
  };
  template <class A, class Comm>
  void run(Comm& comm) const {
    A::gather(comm, in, out, root);
  }
  std::size_t message_bytes() const { return in.size(); }
  call_signature signature(std::string_view algorithm) const {
    return describe(kind, in.size() / element_size, root, algorithm);
  }
  template <class Comm>
  void check(Comm& comm, std::string_view algorithm) const {
    check_call(comm, signature(algorithm));
  }
};

struct scatter_call : movement_call_base {
  static constexpr collective kind = collective::scatter;
  const_bytes in;
  bytes out;
  int root;
  template <class A, class Comm>
  static constexpr bool supported = requires(Comm& c, const_bytes i, bytes o, int root) {
    A::scatter(c, i, o, root);
  };
  template <class A, class Comm>
  void run(Comm& comm) const {
    A::scatter(comm, in, out, root);
  }
  std::size_t message_bytes() const { return out.size(); }
  call_signature signature(std::string_view algorithm) const {
    return describe(kind, out.size() / element_size, root, algorithm);
  }
  template <class Comm>
  void check(Comm& comm, std::string_view algorithm) const {
    check_call(comm, signature(algorithm));
  }
};

struct barrier_call : movement_call_base {
  static constexpr collective kind = collective::barrier;
  template <class A, class Comm>
  static constexpr bool supported = requires(Comm& c) {
    A::barrier(c);
  };
  template <class A, class Comm>
  void run(Comm& comm) const {
    A::barrier(comm);
  }
  std::size_t message_bytes() const { return 0; }
  call_signature signature(std::string_view algorithm) const {
    return describe(kind, 0, -1, algorithm);
  }
  template <class Comm>
  void check(Comm& comm, std::string_view algorithm) const {
    check_call(comm, signature(algorithm));
  }
};

template <class Algorithm, class Comm, class Call>
report execute(Comm& comm, const Call& call) {
  if constexpr (std::is_same_v<Algorithm, automatic>) {
    return run_automatic(comm, call, builtin_algorithms{});
  } else {
    return run_with<Algorithm>(comm, call);
  }
}

template <class Algorithm, class Call, class Comm>
inline constexpr bool implements_v =
    std::is_same_v<Algorithm, automatic> || Call::template supported<Algorithm, Comm>;

template <class Algorithm, class Op>
inline constexpr bool order_ok_v = [] {
  if constexpr (std::is_same_v<Algorithm, automatic> || is_commutative_v<Op>)
    return true;
  else
    return bool(Algorithm::keeps_rank_order);
}();

}  // namespace weft::detail
