// The collective cases of the matrix, written over any communicator so every transport's
// tests run the same checks: each case fills inputs whose exact results are known, runs one
// collective with one algorithm, and compares bit for bit with a serial reference.
#pragma once

#include "support.hpp"

#include <algorithm>
#include <cstdlib>
#include <numeric>

namespace weft_test {

// Results are there once the call returns, except on a stream-ordered communicator (weft/stream/):
// there, once its stream has run.
template <class Comm>
void settle(Comm& comm) {
  if constexpr (requires { Comm::transport_type::stream_ordered; }) {
    auto& endpoint = comm.underlying_transport();
    endpoint.shared().synchronize(endpoint.rank(), std::chrono::seconds(120));
  }
}

template <class T>
std::string label(std::string_view collective, std::string_view algorithm, int p, std::size_t count,
                  bool in_place, std::string_view op = "") {
  return std::string(collective) + " " + std::string(algorithm) + " p=" + std::to_string(p) +
         " count=" + std::to_string(count) + " " + std::string(weft::detail::type_name<T>()) +
         (op.empty() ? "" : " " + std::string(op)) + (in_place ? " in-place" : "");
}

template <class T>
std::vector<T> values(int rank, std::size_t count, std::size_t offset = 0) {
  std::vector<T> result(count);
  for (std::size_t i = 0; i < count; ++i) result[i] = from_int<T>(small_value(rank, offset + i));
  return result;
}

// Reference: op folded over ranks 0..p-1 in order, then finalize.
template <class T, class Op, class Generator>
std::vector<T> reference(int p, std::size_t count, Op op, Generator&& generate) {
  std::vector<T> result(count);
  for (std::size_t i = 0; i < count; ++i) {
    T value = generate(0, i);
    for (int q = 1; q < p; ++q) value = static_cast<T>(op(value, generate(q, i)));
    result[i] = weft::finalize(op, value, p);
  }
  return result;
}

// ---- reductions --------------------------------------------------------------------------------

template <class T, class Op, class Algorithm, class Comm>
void allreduce_case(Comm& comm, failures& sink, std::size_t count, bool in_place, Op op,
                    bool factors) {
  const int p = comm.size();
  auto generate = [&](int rank, std::size_t i) {
    return from_int<T>(factors ? factor_value(rank, i) : small_value(rank, i));
  };
  std::vector<T> in(count);
  for (std::size_t i = 0; i < count; ++i) in[i] = generate(comm.rank(), i);
  const auto want = reference<T>(p, count, op, generate);
  std::vector<T> out(count);
  if (in_place) {
    weft::allreduce(comm, std::span<T>(in), op, Algorithm{});
    settle(comm);
    out = in;
  } else {
    weft::allreduce(comm, std::span<const T>(in), std::span<T>(out), op, Algorithm{});
    settle(comm);
  }
  check_bits<T>(sink,
                label<T>("allreduce", Algorithm::name, p, count, in_place, weft::op_name<Op>()),
                comm.rank(), out, want);
}

template <class T, class Algorithm, class Comm>
void reduce_scatter_case(Comm& comm, failures& sink, std::size_t count) {
  const int p = comm.size();
  const std::size_t total = count * static_cast<std::size_t>(p);
  auto all = values<T>(comm.rank(), total);
  const auto full = reference<T>(p, total, weft::sum{}, [](int rank, std::size_t i) {
    return from_int<T>(small_value(rank, i));
  });
  std::vector<T> mine(count);
  weft::reduce_scatter(comm, std::span<const T>(all), std::span<T>(mine), weft::sum{}, Algorithm{});
  settle(comm);
  const auto begin =
      full.begin() + static_cast<std::ptrdiff_t>(count * static_cast<std::size_t>(comm.rank()));
  check_bits<T>(sink, label<T>("reduce_scatter", Algorithm::name, p, count, false), comm.rank(),
                mine, std::vector<T>(begin, begin + static_cast<std::ptrdiff_t>(count)));
}

template <class T, class Algorithm, class Comm>
void reduce_case(Comm& comm, failures& sink, std::size_t count, bool in_place, int root) {
  const int p = comm.size();
  auto in = values<T>(comm.rank(), count);
  const auto want = reference<T>(p, count, weft::max{}, [](int rank, std::size_t i) {
    return from_int<T>(small_value(rank, i));
  });
  std::vector<T> out(comm.rank() == root ? count : 0);
  if (in_place) {
    weft::reduce(comm, std::span<T>(in), weft::max{}, root, Algorithm{});
    settle(comm);
    if (comm.rank() == root) out = in;
  } else {
    weft::reduce(comm, std::span<const T>(in), std::span<T>(out), weft::max{}, root, Algorithm{});
    settle(comm);
  }
  if (comm.rank() == root) {
    check_bits<T>(
        sink,
        label<T>("reduce", Algorithm::name, p, count, in_place) + " root=" + std::to_string(root),
        comm.rank(), out, want);
  }
}

// ---- data movement -----------------------------------------------------------------------------

template <class T, class Algorithm, class Comm>
void broadcast_case(Comm& comm, failures& sink, std::size_t count, int root) {
  auto want = values<T>(root, count);
  auto data = comm.rank() == root ? want : std::vector<T>(count, from_int<T>(99));
  weft::broadcast(comm, std::span<T>(data), root, Algorithm{});
  settle(comm);
  check_bits<T>(sink,
                label<T>("broadcast", Algorithm::name, comm.size(), count, false) +
                    " root=" + std::to_string(root),
                comm.rank(), data, want);
}

template <class T, class Algorithm, class Comm>
void allgather_case(Comm& comm, failures& sink, std::size_t count, bool in_place) {
  const int p = comm.size();
  std::vector<T> want;
  for (int q = 0; q < p; ++q) {
    auto block = values<T>(q, count, 5);
    want.insert(want.end(), block.begin(), block.end());
  }
  const auto mine = values<T>(comm.rank(), count, 5);
  std::vector<T> all(count * static_cast<std::size_t>(p), from_int<T>(99));
  if (in_place) {
    std::copy(
        mine.begin(), mine.end(),
        all.begin() + static_cast<std::ptrdiff_t>(count * static_cast<std::size_t>(comm.rank())));
    const auto own =
        std::span<T>(all).subspan(count * static_cast<std::size_t>(comm.rank()), count);
    weft::allgather(comm, std::span<const T>(own), std::span<T>(all), Algorithm{});
    settle(comm);
  } else {
    weft::allgather(comm, std::span<const T>(mine), std::span<T>(all), Algorithm{});
    settle(comm);
  }
  check_bits<T>(sink, label<T>("allgather", Algorithm::name, p, count, in_place), comm.rank(), all,
                want);
}

template <class T, class Algorithm, class Comm>
void allgatherv_case(Comm& comm, failures& sink, std::size_t count) {
  const int p = comm.size();
  std::vector<std::size_t> counts(static_cast<std::size_t>(p));
  for (int q = 0; q < p; ++q)
    counts[static_cast<std::size_t>(q)] = count == 0 ? 0 : count + static_cast<std::size_t>(q % 3);
  std::vector<T> want;
  for (int q = 0; q < p; ++q) {
    auto block = values<T>(q, counts[static_cast<std::size_t>(q)], 1);
    want.insert(want.end(), block.begin(), block.end());
  }
  const auto mine = values<T>(comm.rank(), counts[static_cast<std::size_t>(comm.rank())], 1);
  std::vector<T> all(want.size(), from_int<T>(99));
  weft::allgatherv(comm, std::span<const T>(mine), std::span<T>(all),
                   std::span<const std::size_t>(counts), Algorithm{});
  settle(comm);
  check_bits<T>(sink, label<T>("allgatherv", Algorithm::name, p, count, false), comm.rank(), all,
                want);
}

// The element rank `from` sends to rank `to` at position i: unique per (from, to, i).
template <class T>
T exchange_value(int from, int to, std::size_t i) {
  return from_int<T>(
      static_cast<long>(
          (static_cast<std::size_t>(from) * 5 + static_cast<std::size_t>(to) * 3 + i) % 11) -
      5);
}

template <class T, class Algorithm, class Comm>
void alltoall_case(Comm& comm, failures& sink, std::size_t count) {
  const int p = comm.size();
  const int r = comm.rank();
  std::vector<T> in, want;
  for (int j = 0; j < p; ++j) {
    for (std::size_t i = 0; i < count; ++i) {
      in.push_back(exchange_value<T>(r, j, i));
      want.push_back(exchange_value<T>(j, r, i));
    }
  }
  std::vector<T> out(in.size(), from_int<T>(99));
  weft::alltoall(comm, std::span<const T>(in), std::span<T>(out), Algorithm{});
  settle(comm);
  check_bits<T>(sink, label<T>("alltoall", Algorithm::name, p, count, false), comm.rank(), out,
                want);
}

template <class T, class Algorithm, class Comm>
void alltoallv_case(Comm& comm, failures& sink, std::size_t count) {
  const int p = comm.size();
  const int r = comm.rank();
  auto amount = [&](int from, int to) {
    return count == 0 ? std::size_t{0}
                      : (count + static_cast<std::size_t>(from * 3 + to)) % (count + 2);
  };
  std::vector<T> in, want;
  std::vector<std::size_t> in_counts, out_counts;
  for (int j = 0; j < p; ++j) {
    in_counts.push_back(amount(r, j));
    out_counts.push_back(amount(j, r));
    for (std::size_t i = 0; i < amount(r, j); ++i) in.push_back(exchange_value<T>(r, j, i));
    for (std::size_t i = 0; i < amount(j, r); ++i) want.push_back(exchange_value<T>(j, r, i));
  }
  std::vector<T> out(want.size(), from_int<T>(99));
  weft::alltoallv(comm, std::span<const T>(in), std::span<const std::size_t>(in_counts),
                  std::span<T>(out), std::span<const std::size_t>(out_counts), Algorithm{});
  settle(comm);
  check_bits<T>(sink, label<T>("alltoallv", Algorithm::name, p, count, false), comm.rank(), out,
                want);
}

template <class T, class Algorithm, class Comm>
void gather_scatter_case(Comm& comm, failures& sink, std::size_t count, int root) {
  const int p = comm.size();
  std::vector<T> everything;
  for (int q = 0; q < p; ++q) {
    auto block = values<T>(q, count, 2);
    everything.insert(everything.end(), block.begin(), block.end());
  }
  const auto mine = values<T>(comm.rank(), count, 2);
  std::vector<T> all(comm.rank() == root ? everything.size() : 0, from_int<T>(99));
  weft::gather(comm, std::span<const T>(mine), std::span<T>(all), root, Algorithm{});
  settle(comm);
  if (comm.rank() == root) {
    check_bits<T>(
        sink,
        label<T>("gather", Algorithm::name, p, count, false) + " root=" + std::to_string(root),
        comm.rank(), all, everything);
  }
  std::vector<T> received(count, from_int<T>(99));
  const std::vector<T> source = comm.rank() == root ? everything : std::vector<T>{};
  weft::scatter(comm, std::span<const T>(source), std::span<T>(received), root, Algorithm{});
  settle(comm);
  check_bits<T>(
      sink, label<T>("scatter", Algorithm::name, p, count, false) + " root=" + std::to_string(root),
      comm.rank(), received, mine);
}

template <class... Algorithms, class Function>
void for_each_algorithm(Function&& fn) {
  (fn(std::type_identity<Algorithms>{}), ...);
}

// A representative slice of the matrix for transports that cross processes: every collective x
// every algorithm x int32 and float (and double for allreduce) x the given counts, in and out of
// place, roots 0 and p-1.
template <class Comm>
void collective_slice(Comm& comm, failures& sink, std::span<const std::size_t> counts) {
  const int p = comm.size();
  for (const std::size_t count : counts) {
    const int root = static_cast<int>(count % static_cast<std::size_t>(p));
    for_each_type<std::int32_t, float>([&](auto type) {
      using T = typename decltype(type)::type;
      for_each_algorithm<weft::ring, weft::double_binary_tree, weft::recursive_doubling,
                         weft::recursive_halving, weft::direct, weft::automatic>(
          [&](auto algorithm) {
            using A = typename decltype(algorithm)::type;
            allreduce_case<T, weft::sum, A>(comm, sink, count, false, weft::sum{}, false);
            allreduce_case<T, weft::sum, A>(comm, sink, count, true, weft::sum{}, false);
          });
      for_each_algorithm<weft::ring, weft::recursive_halving, weft::direct>([&](auto algorithm) {
        reduce_scatter_case<T, typename decltype(algorithm)::type>(comm, sink, count);
      });
      for_each_algorithm<weft::binomial_tree, weft::direct>([&](auto algorithm) {
        using A = typename decltype(algorithm)::type;
        reduce_case<T, A>(comm, sink, count, false, root);
        reduce_case<T, A>(comm, sink, count, true, p - 1);
        gather_scatter_case<T, A>(comm, sink, count, root);
      });
      for_each_algorithm<weft::binomial_tree, weft::ring, weft::direct>([&](auto algorithm) {
        broadcast_case<T, typename decltype(algorithm)::type>(comm, sink, count, root);
        broadcast_case<T, typename decltype(algorithm)::type>(comm, sink, count, p - 1);
      });
      for_each_algorithm<weft::ring, weft::recursive_doubling, weft::bruck, weft::direct>(
          [&](auto algorithm) {
            allgather_case<T, typename decltype(algorithm)::type>(comm, sink, count, false);
            allgather_case<T, typename decltype(algorithm)::type>(comm, sink, count, true);
          });
      for_each_algorithm<weft::ring, weft::recursive_doubling>([&](auto algorithm) {
        allgatherv_case<T, typename decltype(algorithm)::type>(comm, sink, count);
      });
      for_each_algorithm<weft::pairwise, weft::bruck, weft::direct>([&](auto algorithm) {
        alltoall_case<T, typename decltype(algorithm)::type>(comm, sink, count);
      });
      for_each_algorithm<weft::pairwise, weft::direct>([&](auto algorithm) {
        alltoallv_case<T, typename decltype(algorithm)::type>(comm, sink, count);
      });
      if constexpr (weft::collective_transport<typename Comm::transport_type>) {
        allreduce_case<T, weft::sum, weft::fused>(comm, sink, count, false, weft::sum{}, false);
        allreduce_case<T, weft::sum, weft::fused>(comm, sink, count, true, weft::sum{}, false);
        reduce_scatter_case<T, weft::fused>(comm, sink, count);
        allgather_case<T, weft::fused>(comm, sink, count, false);
        allgather_case<T, weft::fused>(comm, sink, count, true);
      }
    });
    allreduce_case<double, weft::max, weft::ring>(comm, sink, count, false, weft::max{}, false);
  }
  weft::barrier(comm, weft::dissemination{});
  weft::barrier(comm);
}

}  // namespace weft_test
