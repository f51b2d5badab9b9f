// weft/collectives.hpp — the public collective calls.
//
//   weft::allreduce(comm, std::span<float>(v), weft::sum{});               // automatic algorithm
//   weft::allreduce(comm, in, out, weft::max{}, weft::ring{});             // chosen at compile time
//
// Every call
//   - checks its local arguments first and throws errc::invalid_argument before sending anything;
//   - in check mode (WEFT_CHECK=1 or options::check) compares the call across ranks and throws
//     errc::mismatch on every rank when they differ;
//   - runs exactly the algorithm asked for (weft::automatic picks one per call; WEFT_ALGO
//     overrides), and returns a report of what ran: algorithm, steps, bytes sent.
// An algorithm that does not implement the collective, or that reorders a non-commutative op,
// fails to compile with a sentence saying so.
#pragma once

#include "weft/algorithms/binomial_tree.hpp"
#include "weft/algorithms/bruck.hpp"
#include "weft/algorithms/direct.hpp"
#include "weft/algorithms/dissemination.hpp"
#include "weft/algorithms/double_binary_tree.hpp"
#include "weft/algorithms/pairwise.hpp"
#include "weft/algorithms/recursive_doubling.hpp"
#include "weft/algorithms/recursive_halving.hpp"
#include "weft/algorithms/ring.hpp"
#include "weft/communicator.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/error.hpp"
#include "weft/ops.hpp"
#include "weft/transport.hpp"
#include "weft/tuning/selection.hpp"
#include "weft/types.hpp"

#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace weft {

namespace detail {

using builtin_algorithms =
    algorithm_list<ring, double_binary_tree, recursive_doubling, recursive_halving, binomial_tree,
                   bruck, pairwise, dissemination, direct>;

template <class T>
constexpr std::string_view type_name() {
  if constexpr (std::is_same_v<T, std::int8_t>) return "int8";
  else if constexpr (std::is_same_v<T, std::uint8_t>) return "uint8";
  else if constexpr (std::is_same_v<T, std::int16_t>) return "int16";
  else if constexpr (std::is_same_v<T, std::uint16_t>) return "uint16";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
  else if constexpr (std::is_same_v<T, std::uint32_t>) return "uint32";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  else if constexpr (std::is_same_v<T, std::uint64_t>) return "uint64";
  else if constexpr (std::is_same_v<T, float>) return "float32";
  else if constexpr (std::is_same_v<T, double>) return "float64";
  else if constexpr (std::is_same_v<T, bfloat16>) return "bfloat16";
  else if constexpr (std::is_same_v<T, half>) return "half";
  else if constexpr (std::is_integral_v<T>) return "integer";
  else if constexpr (std::is_floating_point_v<T>) return "floating";
  else return "user type";
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
  static constexpr bool supported =
      (Kind == collective::allreduce &&
       requires(Comm& c, const_bytes i, bytes o, const reducer& f) { A::allreduce(c, i, o, f); }) ||
      (Kind == collective::reduce_scatter &&
       requires(Comm& c, const_bytes i, bytes o, const reducer& f) {
         A::reduce_scatter(c, i, o, f);
       }) ||
      (Kind == collective::reduce &&
       requires(Comm& c, const_bytes i, bytes o, const reducer& f, int r) {
         A::reduce(c, i, o, f, r);
       });
  template <class A, class Comm>
  void run(Comm& comm) const {
    if constexpr (Kind == collective::allreduce) A::allreduce(comm, in, out, *combine);
    else if constexpr (Kind == collective::reduce_scatter) A::reduce_scatter(comm, in, out, *combine);
    else A::reduce(comm, in, out, *combine, root);
  }
  // reduce's output is the root's alone, so its size is its input's; the others' is the output.
  std::size_t message_bytes() const { return Kind == collective::reduce ? in.size() : out.size(); }
  template <class Comm>
  void check(Comm& comm, std::string_view algorithm) const {
    comm.check_call(describe(message_bytes() / combine->element_size(), algorithm, root));
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
  static constexpr bool supported = requires(Comm& c, bytes d, int root) { A::broadcast(c, d, root); };
  template <class A, class Comm>
  void run(Comm& comm) const { A::broadcast(comm, data, root); }
  std::size_t message_bytes() const { return data.size(); }
  template <class Comm>
  void check(Comm& comm, std::string_view algorithm) const {
    comm.check_call(describe(kind, data.size() / element_size, root, algorithm));
  }
};

struct allgather_call : movement_call_base {
  static constexpr collective kind = collective::allgather;
  const_bytes in;
  bytes out;
  template <class A, class Comm>
  static constexpr bool supported = requires(Comm& c, const_bytes i, bytes o) { A::allgather(c, i, o); };
  template <class A, class Comm>
  void run(Comm& comm) const { A::allgather(comm, in, out); }
  std::size_t message_bytes() const { return in.size(); }
  template <class Comm>
  void check(Comm& comm, std::string_view algorithm) const {
    comm.check_call(describe(kind, in.size() / element_size, -1, algorithm));
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
  void run(Comm& comm) const { A::allgatherv(comm, in, out, blocks); }
  // the same on every rank: the total, spread over the ranks
  std::size_t message_bytes() const { return out.size() / (counts.empty() ? 1 : counts.size()); }
  template <class Comm>
  void check(Comm& comm, std::string_view algorithm) const {
    // rank i sends counts_i[i] elements to everyone; rank j expects counts_j[i] from rank i
    // (a vector of its own: index slots 4 and 5 hold this call's displacements)
    std::vector<std::size_t> expected(counts.size(), counts[static_cast<std::size_t>(comm.rank())]);
    comm.check_call(describe(kind, out.size() / element_size, -1, algorithm),
                    std::span<const std::size_t>(expected), counts);
  }
};

struct alltoall_call : movement_call_base {
  static constexpr collective kind = collective::alltoall;
  const_bytes in;
  bytes out;
  template <class A, class Comm>
  static constexpr bool supported = requires(Comm& c, const_bytes i, bytes o) { A::alltoall(c, i, o); };
  template <class A, class Comm>
  void run(Comm& comm) const { A::alltoall(comm, in, out); }
  std::size_t message_bytes() const { return in.size(); }
  template <class Comm>
  void check(Comm& comm, std::string_view algorithm) const {
    comm.check_call(describe(kind, in.size() / element_size, -1, algorithm));
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
  void run(Comm& comm) const { A::alltoallv(comm, in, in_blocks, out, out_blocks); }
  // per-rank counts differ, so the choice must not depend on them
  std::size_t message_bytes() const { return 0; }
  template <class Comm>
  void check(Comm& comm, std::string_view algorithm) const {
    comm.check_call(describe(kind, 0, -1, algorithm), in_counts, out_counts);
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
  void run(Comm& comm) const { A::gather(comm, in, out, root); }
  std::size_t message_bytes() const { return in.size(); }
  template <class Comm>
  void check(Comm& comm, std::string_view algorithm) const {
    comm.check_call(describe(kind, in.size() / element_size, root, algorithm));
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
  void run(Comm& comm) const { A::scatter(comm, in, out, root); }
  std::size_t message_bytes() const { return out.size(); }
  template <class Comm>
  void check(Comm& comm, std::string_view algorithm) const {
    comm.check_call(describe(kind, out.size() / element_size, root, algorithm));
  }
};

struct barrier_call : movement_call_base {
  static constexpr collective kind = collective::barrier;
  template <class A, class Comm>
  static constexpr bool supported = requires(Comm& c) { A::barrier(c); };
  template <class A, class Comm>
  void run(Comm& comm) const { A::barrier(comm); }
  std::size_t message_bytes() const { return 0; }
  template <class Comm>
  void check(Comm& comm, std::string_view algorithm) const {
    comm.check_call(describe(kind, 0, -1, algorithm));
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
  if constexpr (std::is_same_v<Algorithm, automatic> || is_commutative_v<Op>) return true;
  else return bool(Algorithm::keeps_rank_order);
}();

// ---- argument checks (local, before anything is sent) ----------------------------------------

[[noreturn]] inline void invalid(int rank, collective kind, const std::string& what) {
  throw error(errc::invalid_argument, "rank " + std::to_string(rank) + ": " +
                                          std::string(to_string(kind)) + ": " + what +
                                          "; nothing was sent");
}

template <class Comm>
void check_root(const Comm& comm, collective kind, int root) {
  if (root < 0 || root >= comm.size()) {
    invalid(comm.rank(), kind,
            "root " + std::to_string(root) + " is not a rank of this communicator (size " +
                std::to_string(comm.size()) + ")");
  }
}

// Point-to-point: `role` names the peer ("peer", "destination", "source") in the message.
template <class Comm>
void check_peer(const Comm& comm, collective kind, const char* role, int peer, int tag) {
  if (peer < 0 || peer >= comm.size()) {
    invalid(comm.rank(), kind,
            std::string(role) + " " + std::to_string(peer) +
                " is not a rank of this communicator (size " + std::to_string(comm.size()) + ")");
  }
  if (tag < 0) invalid(comm.rank(), kind, "tag " + std::to_string(tag) + " is negative");
}

inline bool overlaps(const_bytes a, const_bytes b) {
  if (a.empty() || b.empty()) return false;
  const auto* a_begin = a.data();
  const auto* b_begin = b.data();
  return std::less<>{}(a_begin, b_begin + b.size()) && std::less<>{}(b_begin, a_begin + a.size());
}

// `in` and `out` must be disjoint, or (where allowed) `in` must be exactly `allowed`.
template <class Comm>
void check_overlap(const Comm& comm, collective kind, const_bytes in, const_bytes out,
                   const_bytes allowed = {}) {
  if (!overlaps(in, out)) return;
  if (!allowed.empty() && in.data() == allowed.data() && in.size() == allowed.size()) return;
  invalid(comm.rank(), kind,
          allowed.empty() ? "input and output buffers overlap; use separate buffers"
                          : "input and output buffers overlap other than in place (in place means "
                            "the input is exactly this rank's part of the output)");
}

template <class Comm>
void check_size(const Comm& comm, collective kind, std::string_view what, std::size_t actual,
                std::size_t expected) {
  if (actual != expected) {
    invalid(comm.rank(), kind,
            std::string(what) + " has " + std::to_string(actual) + " elements but must have " +
                std::to_string(expected));
  }
}

template <class T, class Op, class Comm>
void finalize_result(Comm& comm, const Op& op, std::span<T> result) {
  if constexpr (has_finalize_v<Op, T>) comm.memory().finalize(result, op, comm.size());
}

}  // namespace detail

#define WEFT_REDUCTION_CHECKS(collective_name)                                                      \
  static_assert(reduction<Op, T>,                                                                   \
                "weft::" collective_name ": this op cannot reduce this element type: band, bor and " \
                "bxor need integer elements, and a user op must be callable as op(T, T) -> T");     \
  static_assert(memory_space_for<memory_space_of<Transport>, T, Op>,                                \
                "weft::" collective_name ": the transport's memory space cannot combine this "      \
                "element type with this op");                                                       \
  static_assert(detail::order_ok_v<Algorithm, Op>,                                                  \
                "weft::" collective_name ": this algorithm reduces out of rank order and needs a "  \
                "commutative op; if the op is commutative, declare `static constexpr bool "         \
                "commutative = true;` in it, otherwise use an algorithm that keeps rank order "     \
                "(recursive_doubling, binomial_tree, direct) or weft::automatic")

// ---- allreduce ----------------------------------------------------------------------------------

template <transport Transport, element T, class Op = sum, class Algorithm = automatic>
report allreduce(communicator<Transport>& comm, std::type_identity_t<std::span<const T>> in,
                 std::span<T> out, Op op = {}, Algorithm = {}) {
  WEFT_REDUCTION_CHECKS("allreduce");
  using call = detail::reduction_call<collective::allreduce, is_commutative_v<Op>>;
  static_assert(detail::implements_v<Algorithm, call, communicator<Transport>>,
                "weft::allreduce: this algorithm does not implement allreduce; use weft::ring, "
                "weft::double_binary_tree, weft::recursive_doubling, weft::recursive_halving, "
                "weft::direct or weft::automatic");
  detail::check_size(comm, collective::allreduce, "the output", out.size(), in.size());
  detail::check_overlap(comm, collective::allreduce, std::as_bytes(in), std::as_bytes(out),
                        std::as_bytes(std::span<const T>(out)));
  const detail::reducer combine(comm.memory(), op, std::type_identity<T>{});
  const call description{std::as_bytes(in), std::as_writable_bytes(out), &combine, -1,
                         &detail::describe_reduction<T, Op, collective::allreduce>};
  const report result = detail::execute<Algorithm>(comm, description);
  detail::finalize_result(comm, op, out);
  return result;
}

template <transport Transport, element T, class Op = sum, class Algorithm = automatic>
report allreduce(communicator<Transport>& comm, std::span<T> data, Op op = {},
                 Algorithm algorithm = {}) {
  return allreduce<Transport, T, Op, Algorithm>(comm, std::span<const T>(data), data, op,
                                                algorithm);
}

// ---- reduce_scatter -----------------------------------------------------------------------------

template <transport Transport, element T, class Op = sum, class Algorithm = automatic>
report reduce_scatter(communicator<Transport>& comm, std::type_identity_t<std::span<const T>> all,
                      std::span<T> mine, Op op = {}, Algorithm = {}) {
  WEFT_REDUCTION_CHECKS("reduce_scatter");
  using call = detail::reduction_call<collective::reduce_scatter, is_commutative_v<Op>>;
  static_assert(detail::implements_v<Algorithm, call, communicator<Transport>>,
                "weft::reduce_scatter: this algorithm does not implement reduce_scatter; use "
                "weft::ring, weft::recursive_halving, weft::direct or weft::automatic");
  detail::check_size(comm, collective::reduce_scatter, "the input", all.size(),
                     mine.size() * static_cast<std::size_t>(comm.size()));
  detail::check_overlap(comm, collective::reduce_scatter, std::as_bytes(all), std::as_bytes(mine));
  const detail::reducer combine(comm.memory(), op, std::type_identity<T>{});
  const call description{std::as_bytes(all), std::as_writable_bytes(mine), &combine, -1,
                         &detail::describe_reduction<T, Op, collective::reduce_scatter>};
  const report result = detail::execute<Algorithm>(comm, description);
  detail::finalize_result(comm, op, mine);
  return result;
}

// ---- reduce -------------------------------------------------------------------------------------

// `out` is used at the root only (elsewhere it may be empty).
template <transport Transport, element T, class Op = sum, class Algorithm = automatic>
report reduce(communicator<Transport>& comm, std::type_identity_t<std::span<const T>> in,
              std::span<T> out, Op op, int root, Algorithm = {}) {
  WEFT_REDUCTION_CHECKS("reduce");
  using call = detail::reduction_call<collective::reduce, is_commutative_v<Op>>;
  static_assert(detail::implements_v<Algorithm, call, communicator<Transport>>,
                "weft::reduce: this algorithm does not implement reduce; use weft::binomial_tree, "
                "weft::direct or weft::automatic");
  detail::check_root(comm, collective::reduce, root);
  if (comm.rank() == root) {
    detail::check_size(comm, collective::reduce, "the root's output", out.size(), in.size());
    detail::check_overlap(comm, collective::reduce, std::as_bytes(in), std::as_bytes(out),
                          std::as_bytes(std::span<const T>(out)));
  }
  const detail::reducer combine(comm.memory(), op, std::type_identity<T>{});
  const call description{std::as_bytes(in), std::as_writable_bytes(out), &combine, root,
                         &detail::describe_reduction<T, Op, collective::reduce>};
  const report result = detail::execute<Algorithm>(comm, description);
  if (comm.rank() == root) detail::finalize_result(comm, op, out);
  return result;
}

template <transport Transport, element T, class Op = sum, class Algorithm = automatic>
report reduce(communicator<Transport>& comm, std::span<T> data, Op op, int root,
              Algorithm algorithm = {}) {
  return reduce<Transport, T, Op, Algorithm>(comm, std::span<const T>(data), data, op, root,
                                             algorithm);
}

// ---- broadcast ----------------------------------------------------------------------------------

template <transport Transport, element T, class Algorithm = automatic>
report broadcast(communicator<Transport>& comm, std::span<T> data, int root, Algorithm = {}) {
  static_assert(detail::implements_v<Algorithm, detail::broadcast_call, communicator<Transport>>,
                "weft::broadcast: this algorithm does not implement broadcast; use "
                "weft::binomial_tree, weft::ring, weft::direct or weft::automatic");
  detail::check_root(comm, collective::broadcast, root);
  detail::broadcast_call description{{sizeof(T), detail::type_name<T>()}, std::as_writable_bytes(data), root};
  return detail::execute<Algorithm>(comm, description);
}

// ---- allgather, allgatherv ----------------------------------------------------------------------

// all.size() == comm.size() * mine.size(); rank i's block lands at all[i * mine.size()].
// In place: `mine` is exactly this rank's block of `all`.
template <transport Transport, element T, class Algorithm = automatic>
report allgather(communicator<Transport>& comm, std::type_identity_t<std::span<const T>> mine,
                 std::span<T> all, Algorithm = {}) {
  static_assert(detail::implements_v<Algorithm, detail::allgather_call, communicator<Transport>>,
                "weft::allgather: this algorithm does not implement allgather; use weft::ring, "
                "weft::recursive_doubling, weft::bruck, weft::direct or weft::automatic");
  const auto p = static_cast<std::size_t>(comm.size());
  detail::check_size(comm, collective::allgather, "the output", all.size(), p * mine.size());
  const auto own_block = std::span<const T>(all).subspan(
      std::min(all.size(), static_cast<std::size_t>(comm.rank()) * mine.size()),
      std::min(mine.size(), all.size()));
  detail::check_overlap(comm, collective::allgather, std::as_bytes(mine), std::as_bytes(all),
                        std::as_bytes(own_block));
  detail::allgather_call description{{sizeof(T), detail::type_name<T>()}, std::as_bytes(mine),
                                     std::as_writable_bytes(all)};
  return detail::execute<Algorithm>(comm, description);
}

// counts[i] elements from rank i, placed one after another in rank order in `all`.
template <transport Transport, element T, class Algorithm = automatic>
report allgatherv(communicator<Transport>& comm, std::type_identity_t<std::span<const T>> mine,
                  std::span<T> all, std::span<const std::size_t> counts, Algorithm = {}) {
  static_assert(detail::implements_v<Algorithm, detail::allgatherv_call, communicator<Transport>>,
                "weft::allgatherv: this algorithm does not implement allgatherv; use weft::ring, "
                "weft::recursive_doubling, weft::direct or weft::automatic");
  const auto p = static_cast<std::size_t>(comm.size());
  detail::check_size(comm, collective::allgatherv, "counts", counts.size(), p);
  detail::check_size(comm, collective::allgatherv, "this rank's input", mine.size(),
                     counts[static_cast<std::size_t>(comm.rank())]);
  detail::check_size(comm, collective::allgatherv, "the output", all.size(),
                     std::accumulate(counts.begin(), counts.end(), std::size_t{0}));
  auto displs = comm.indices(4, p + 1);
  detail::count_displacements(displs, counts, sizeof(T));
  const detail::layout blocks{displs};
  const auto own = std::as_bytes(all).subspan(blocks.offset(comm.rank()), blocks.size(comm.rank()));
  detail::check_overlap(comm, collective::allgatherv, std::as_bytes(mine), std::as_bytes(all), own);
  detail::allgatherv_call description{{sizeof(T), detail::type_name<T>()}, std::as_bytes(mine),
                                      std::as_writable_bytes(all), blocks, counts};
  return detail::execute<Algorithm>(comm, description);
}

// ---- alltoall, alltoallv ------------------------------------------------------------------------

// in and out hold comm.size() equal blocks; block j of `in` goes to rank j, block i of `out`
// comes from rank i.
template <transport Transport, element T, class Algorithm = automatic>
report alltoall(communicator<Transport>& comm, std::type_identity_t<std::span<const T>> in,
                std::span<T> out, Algorithm = {}) {
  static_assert(detail::implements_v<Algorithm, detail::alltoall_call, communicator<Transport>>,
                "weft::alltoall: this algorithm does not implement alltoall; use weft::pairwise, "
                "weft::bruck, weft::direct or weft::automatic");
  const auto p = static_cast<std::size_t>(comm.size());
  if (in.size() % p != 0) {
    detail::invalid(comm.rank(), collective::alltoall,
                    "the input has " + std::to_string(in.size()) +
                        " elements, which is not a multiple of the " + std::to_string(p) + " ranks");
  }
  detail::check_size(comm, collective::alltoall, "the output", out.size(), in.size());
  detail::check_overlap(comm, collective::alltoall, std::as_bytes(in), std::as_bytes(out));
  detail::alltoall_call description{{sizeof(T), detail::type_name<T>()}, std::as_bytes(in),
                                    std::as_writable_bytes(out)};
  return detail::execute<Algorithm>(comm, description);
}

// in_counts[j] elements go to rank j (packed in rank order in `in`); out_counts[i] elements
// come from rank i (packed in rank order in `out`).
template <transport Transport, element T, class Algorithm = automatic>
report alltoallv(communicator<Transport>& comm, std::type_identity_t<std::span<const T>> in,
                 std::span<const std::size_t> in_counts, std::span<T> out,
                 std::span<const std::size_t> out_counts, Algorithm = {}) {
  static_assert(detail::implements_v<Algorithm, detail::alltoallv_call, communicator<Transport>>,
                "weft::alltoallv: this algorithm does not implement alltoallv; use "
                "weft::pairwise, weft::direct or weft::automatic");
  const auto p = static_cast<std::size_t>(comm.size());
  detail::check_size(comm, collective::alltoallv, "in_counts", in_counts.size(), p);
  detail::check_size(comm, collective::alltoallv, "out_counts", out_counts.size(), p);
  detail::check_size(comm, collective::alltoallv, "the input", in.size(),
                     std::accumulate(in_counts.begin(), in_counts.end(), std::size_t{0}));
  detail::check_size(comm, collective::alltoallv, "the output", out.size(),
                     std::accumulate(out_counts.begin(), out_counts.end(), std::size_t{0}));
  detail::check_overlap(comm, collective::alltoallv, std::as_bytes(in), std::as_bytes(out));
  auto in_displs = comm.indices(4, p + 1);
  auto out_displs = comm.indices(5, p + 1);
  detail::count_displacements(in_displs, in_counts, sizeof(T));
  detail::count_displacements(out_displs, out_counts, sizeof(T));
  detail::alltoallv_call description{{sizeof(T), detail::type_name<T>()},
                                     std::as_bytes(in),
                                     detail::layout{in_displs},
                                     std::as_writable_bytes(out),
                                     detail::layout{out_displs},
                                     in_counts,
                                     out_counts};
  return detail::execute<Algorithm>(comm, description);
}

// ---- gather, scatter ----------------------------------------------------------------------------

// At the root, all.size() == comm.size() * mine.size(); elsewhere `all` is unused.
template <transport Transport, element T, class Algorithm = automatic>
report gather(communicator<Transport>& comm, std::type_identity_t<std::span<const T>> mine,
              std::span<T> all, int root, Algorithm = {}) {
  static_assert(detail::implements_v<Algorithm, detail::gather_call, communicator<Transport>>,
                "weft::gather: this algorithm does not implement gather; use "
                "weft::binomial_tree, weft::direct or weft::automatic");
  detail::check_root(comm, collective::gather, root);
  if (comm.rank() == root) {
    detail::check_size(comm, collective::gather, "the root's output", all.size(),
                       static_cast<std::size_t>(comm.size()) * mine.size());
    detail::check_overlap(comm, collective::gather, std::as_bytes(mine), std::as_bytes(all));
  }
  detail::gather_call description{{sizeof(T), detail::type_name<T>()}, std::as_bytes(mine),
                                  std::as_writable_bytes(all), root};
  return detail::execute<Algorithm>(comm, description);
}

// At the root, all.size() == comm.size() * mine.size(); elsewhere `all` is unused.
template <transport Transport, element T, class Algorithm = automatic>
report scatter(communicator<Transport>& comm, std::type_identity_t<std::span<const T>> all,
               std::span<T> mine, int root, Algorithm = {}) {
  static_assert(detail::implements_v<Algorithm, detail::scatter_call, communicator<Transport>>,
                "weft::scatter: this algorithm does not implement scatter; use "
                "weft::binomial_tree, weft::direct or weft::automatic");
  detail::check_root(comm, collective::scatter, root);
  if (comm.rank() == root) {
    detail::check_size(comm, collective::scatter, "the root's input", all.size(),
                       static_cast<std::size_t>(comm.size()) * mine.size());
    detail::check_overlap(comm, collective::scatter, std::as_bytes(all), std::as_bytes(mine));
  }
  detail::scatter_call description{{sizeof(T), detail::type_name<T>()}, std::as_bytes(all),
                                   std::as_writable_bytes(mine), root};
  return detail::execute<Algorithm>(comm, description);
}

// ---- barrier ------------------------------------------------------------------------------------

template <transport Transport, class Algorithm = automatic>
report barrier(communicator<Transport>& comm, Algorithm = {}) {
  static_assert(detail::implements_v<Algorithm, detail::barrier_call, communicator<Transport>>,
                "weft::barrier: this algorithm does not implement barrier; use "
                "weft::dissemination or weft::automatic");
  detail::barrier_call description{{1, "none"}};
  return detail::execute<Algorithm>(comm, description);
}

// ---- send, recv ---------------------------------------------------------------------------------

// Blocking point-to-point with a user tag (0 <= tag < 2^31), bounded by the timeout.
template <transport Transport, class T>
  requires element<std::remove_const_t<T>>
report send(communicator<Transport>& comm, std::span<T> data, int peer, int tag = 0) {
  detail::check_peer(comm, collective::send, "peer", peer, tag);
  comm.begin(collective::send, "direct");
  comm.next_step();
  auto operation = comm.send_user(peer, std::as_bytes(data), tag);
  comm.wait(operation);
  return comm.finish();
}

template <transport Transport, element T>
report recv(communicator<Transport>& comm, std::span<T> data, int peer, int tag = 0) {
  detail::check_peer(comm, collective::recv, "peer", peer, tag);
  comm.begin(collective::recv, "direct");
  comm.next_step();
  auto operation = comm.recv_user(peer, std::as_writable_bytes(data), tag);
  comm.wait(operation);
  return comm.finish();
}

// Sends `out` to `dest` and receives `in` from `source` in one call, both posted before either
// is waited on (MPI_Sendrecv): every rank can shift to its neighbour at once without deadlock.
template <transport Transport, class T, element U>
  requires element<std::remove_const_t<T>>
report sendrecv(communicator<Transport>& comm, std::span<T> out, int dest, std::span<U> in,
                int source, int tag = 0) {
  detail::check_peer(comm, collective::sendrecv, "destination", dest, tag);
  detail::check_peer(comm, collective::sendrecv, "source", source, tag);
  detail::check_overlap(comm, collective::sendrecv, std::as_bytes(out), std::as_bytes(in));
  comm.begin(collective::sendrecv, "direct");
  comm.next_step();
  auto receiving = comm.recv_user(source, std::as_writable_bytes(in), tag);
  auto sending = comm.send_user(dest, std::as_bytes(out), tag);
  comm.wait(receiving);
  comm.wait(sending);
  return comm.finish();
}

#undef WEFT_REDUCTION_CHECKS

}  // namespace weft
