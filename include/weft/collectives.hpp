// weft/collectives.hpp — the public collective calls.
//
//   weft::allreduce(comm, std::span<float>(v), weft::sum{});     // automatic algorithm
//   weft::allreduce(comm, in, out, weft::max{}, weft::ring{});   // chosen at compile time
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
#include "weft/algorithms/fused.hpp"
#include "weft/algorithms/hierarchical.hpp"
#include "weft/algorithms/pairwise.hpp"
#include "weft/algorithms/recursive_doubling.hpp"
#include "weft/algorithms/recursive_halving.hpp"
#include "weft/algorithms/ring.hpp"
#include "weft/communicator.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/dispatch/argument_checks.hpp"
#include "weft/dispatch/calls.hpp"
#include "weft/dispatch/selection.hpp"
#include "weft/error.hpp"
#include "weft/ops.hpp"
#include "weft/transport.hpp"
#include "weft/types.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace weft {

#define WEFT_REDUCTION_CHECKS(collective_name)                                                  \
  static_assert(reduction<Op, T>,                                                               \
                "weft::" collective_name                                                        \
                ": this op cannot reduce this element type: band, bor and "                     \
                "bxor need integer elements, and a user op must be callable as op(T, T) -> T"); \
  static_assert(memory_space_for<memory_space_of<Transport>, T, Op>,                            \
                "weft::" collective_name                                                        \
                ": the transport's memory space cannot combine this "                           \
                "element type with this op");                                                   \
  static_assert(detail::order_ok_v<Algorithm, Op>,                                              \
                "weft::" collective_name                                                        \
                ": this algorithm reduces out of rank order and needs a "                       \
                "commutative op; if the op is commutative, declare `static constexpr bool "     \
                "commutative = true;` in it, otherwise use an algorithm that keeps rank order " \
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
                "weft::direct or weft::automatic (weft::fused needs a transport that runs "
                "collectives whole, weft::cuda::communicators)");
  detail::check_extent(comm, collective::allreduce, "the input", in);
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
                "weft::ring, weft::recursive_halving, weft::direct or weft::automatic (weft::fused "
                "needs a transport that runs collectives whole, weft::cuda::communicators)");
  detail::check_extent(comm, collective::reduce_scatter, "the input", all);
  detail::check_size(comm, collective::reduce_scatter, "the input", all.size(),
                     detail::product(comm, collective::reduce_scatter, "the output times the ranks",
                                     mine.size(), static_cast<std::size_t>(comm.size())));
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
  detail::check_extent(comm, collective::reduce, "the input", in);
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
  detail::check_extent(comm, collective::broadcast, "the data", data);
  detail::broadcast_call description{
      {sizeof(T), detail::type_name<T>()}, std::as_writable_bytes(data), root};
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
  detail::check_extent(comm, collective::allgather, "the output", all);
  detail::check_size(
      comm, collective::allgather, "the output", all.size(),
      detail::product(comm, collective::allgather, "the input times the ranks", p, mine.size()));
  const auto own_block = std::span<const T>(all).subspan(
      std::min(all.size(), static_cast<std::size_t>(comm.rank()) * mine.size()),
      std::min(mine.size(), all.size()));
  detail::check_overlap(comm, collective::allgather, std::as_bytes(mine), std::as_bytes(all),
                        std::as_bytes(own_block));
  detail::allgather_call description{
      {sizeof(T), detail::type_name<T>()}, std::as_bytes(mine), std::as_writable_bytes(all)};
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
  detail::check_extent(comm, collective::allgatherv, "the output", all);
  detail::check_size(comm, collective::allgatherv, "the output", all.size(),
                     detail::total(comm, collective::allgatherv, "counts", counts));
  auto displs = comm.indices(4, p + 1);
  detail::count_displacements(displs, counts, sizeof(T));
  const detail::layout blocks{displs};
  const auto own = std::as_bytes(all).subspan(blocks.offset(comm.rank()), blocks.size(comm.rank()));
  detail::check_overlap(comm, collective::allgatherv, std::as_bytes(mine), std::as_bytes(all), own);
  detail::allgatherv_call description{{sizeof(T), detail::type_name<T>()},
                                      std::as_bytes(mine),
                                      std::as_writable_bytes(all),
                                      blocks,
                                      counts};
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
  detail::check_extent(comm, collective::alltoall, "the input", in);
  if (in.size() % p != 0) {
    detail::invalid(comm.rank(), collective::alltoall,
                    "the input has " + std::to_string(in.size()) +
                        " elements, which is not a multiple of the " + std::to_string(p) +
                        " ranks");
  }
  detail::check_size(comm, collective::alltoall, "the output", out.size(), in.size());
  detail::check_overlap(comm, collective::alltoall, std::as_bytes(in), std::as_bytes(out));
  detail::alltoall_call description{
      {sizeof(T), detail::type_name<T>()}, std::as_bytes(in), std::as_writable_bytes(out)};
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
  detail::check_extent(comm, collective::alltoallv, "the input", in);
  detail::check_extent(comm, collective::alltoallv, "the output", out);
  detail::check_size(comm, collective::alltoallv, "the input", in.size(),
                     detail::total(comm, collective::alltoallv, "in_counts", in_counts));
  detail::check_size(comm, collective::alltoallv, "the output", out.size(),
                     detail::total(comm, collective::alltoallv, "out_counts", out_counts));
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
  detail::check_extent(comm, collective::gather, "the input", mine);
  if (comm.rank() == root) {
    detail::check_extent(comm, collective::gather, "the root's output", all);
    detail::check_size(comm, collective::gather, "the root's output", all.size(),
                       detail::product(comm, collective::gather, "the input times the ranks",
                                       static_cast<std::size_t>(comm.size()), mine.size()));
    detail::check_overlap(comm, collective::gather, std::as_bytes(mine), std::as_bytes(all));
  }
  detail::gather_call description{
      {sizeof(T), detail::type_name<T>()}, std::as_bytes(mine), std::as_writable_bytes(all), root};
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
  detail::check_extent(comm, collective::scatter, "the output", mine);
  if (comm.rank() == root) {
    detail::check_extent(comm, collective::scatter, "the root's input", all);
    detail::check_size(comm, collective::scatter, "the root's input", all.size(),
                       detail::product(comm, collective::scatter, "the output times the ranks",
                                       static_cast<std::size_t>(comm.size()), mine.size()));
    detail::check_overlap(comm, collective::scatter, std::as_bytes(all), std::as_bytes(mine));
  }
  detail::scatter_call description{
      {sizeof(T), detail::type_name<T>()}, std::as_bytes(all), std::as_writable_bytes(mine), root};
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
requires element<std::remove_const_t<T>> report send(communicator<Transport>& comm,
                                                     std::span<T> data, int peer, int tag = 0) {
  detail::check_peer(comm, collective::send, "peer", peer, tag);
  detail::check_not_self(comm, collective::send, peer);
  detail::check_extent(comm, collective::send, "the data", data);
  const auto scope = comm.begin(collective::send, "direct");
  comm.next_step();
  auto operation = comm.send_user(peer, std::as_bytes(data), tag);
  comm.wait(operation);
  return comm.finish();
}

template <transport Transport, element T>
report recv(communicator<Transport>& comm, std::span<T> data, int peer, int tag = 0) {
  detail::check_peer(comm, collective::recv, "peer", peer, tag);
  detail::check_not_self(comm, collective::recv, peer);
  detail::check_extent(comm, collective::recv, "the data", data);
  const auto scope = comm.begin(collective::recv, "direct");
  comm.next_step();
  auto operation = comm.recv_user(peer, std::as_writable_bytes(data), tag);
  comm.wait(operation);
  return comm.finish();
}

// Sends `out` to `dest` and receives `in` from `source` in one call, both posted before either
// is waited on (MPI_Sendrecv): every rank can shift to its neighbour at once without deadlock.
template <transport Transport, class T, element U>
requires element<std::remove_const_t<T>> report sendrecv(communicator<Transport>& comm,
                                                         std::span<T> out, int dest,
                                                         std::span<U> in, int source, int tag = 0) {
  detail::check_peer(comm, collective::sendrecv, "destination", dest, tag);
  detail::check_peer(comm, collective::sendrecv, "source", source, tag);
  detail::check_extent(comm, collective::sendrecv, "the data sent", out);
  detail::check_extent(comm, collective::sendrecv, "the data received", in);
  detail::check_overlap(comm, collective::sendrecv, std::as_bytes(out), std::as_bytes(in));
  const auto scope = comm.begin(collective::sendrecv, "direct");
  comm.next_step();
  auto receiving = comm.recv_user(source, std::as_writable_bytes(in), tag);
  auto sending = comm.send_user(dest, std::as_bytes(out), tag);
  comm.wait(receiving);
  comm.wait(sending);
  return comm.finish();
}

#undef WEFT_REDUCTION_CHECKS

}  // namespace weft
