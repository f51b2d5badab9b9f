// Calls that differ on one rank, without check mode: each case makes every rank fail with
// errc::mismatch (by the end of that call or at the next), and no later call succeeds. And a call
// that throws on one rank (its user reduction): the others fail with its exception's text. Shared
// by the inproc, tcp and shm tests.
#pragma once

#include "support.hpp"

#include <weft/weft.hpp>

#include <array>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace weft_test {

inline constexpr std::array<const char*, 15> disagreements = {"allreduce count",
                                                              "allreduce op",
                                                              "allreduce type",
                                                              "allreduce algorithm",
                                                              "broadcast root",
                                                              "broadcast, each rank its own root",
                                                              "reduce root",
                                                              "gather root",
                                                              "scatter root",
                                                              "allgather count",
                                                              "reduce_scatter count",
                                                              "alltoall count",
                                                              "allreduce against broadcast",
                                                              "a skipped broadcast",
                                                              "barrier against allreduce"};

// The ranks that differ in turn in disagreement `which` on p ranks: the first and the last (in
// the root cases, rank 0 names rank 1 as root, where both may only wait to receive, and the
// last rank names itself).
inline std::vector<int> differing_ranks(std::size_t which, int p) {
  if (which == 5) return {0};  // every rank names itself
  return {0, p - 1};
}

// Disagreement `which`: rank `odd` makes its call differently from the others.
template <class Comm>
void disagree(Comm& comm, std::size_t which, int odd) {
  const int p = comm.size();
  const int r = comm.rank();
  const bool me = r == odd;
  const auto n = static_cast<std::size_t>(p);
  std::vector<int> data(8, r + 1), all(8 * n, 0), more(9 * n, 0), all_out(8 * n), more_out(9 * n);
  std::vector<float> floats(8, 1.0f);
  const int other_root = odd == 0 ? 1 : odd;  // the root rank `odd` names instead of rank 0
  switch (which) {
    case 0: {
      std::vector<int> mine(me ? 9 : 8, 1);
      weft::allreduce(comm, std::span<int>(mine), weft::sum{});
      break;
    }
    case 1:
      if (me)
        weft::allreduce(comm, std::span<int>(data), weft::max{});
      else
        weft::allreduce(comm, std::span<int>(data), weft::sum{});
      break;
    case 2:
      if (me)
        weft::allreduce(comm, std::span<float>(floats), weft::sum{});
      else
        weft::allreduce(comm, std::span<int>(data), weft::sum{});
      break;
    case 3:
      if (me)
        weft::allreduce(comm, std::span<int>(data), weft::sum{}, weft::ring{});
      else
        weft::allreduce(comm, std::span<int>(data), weft::sum{}, weft::recursive_doubling{});
      break;
    case 4:
      weft::broadcast(comm, std::span<int>(data), me ? other_root : 0);
      break;
    case 5:
      weft::broadcast(comm, std::span<int>(data), r);
      break;
    case 6: {
      std::vector<int> out(8);
      weft::reduce(comm, std::span<const int>(data), std::span<int>(out), weft::sum{},
                   me ? other_root : 0);
      break;
    }
    case 7:
      weft::gather(comm, std::span<const int>(data), std::span<int>(all), me ? other_root : 0);
      break;
    case 8:
      weft::scatter(comm, std::span<const int>(all), std::span<int>(data), me ? other_root : 0);
      break;
    case 9:
      if (me)
        weft::allgather(comm, std::span<const int>(more_out.data(), 9), std::span<int>(more));
      else
        weft::allgather(comm, std::span<const int>(data), std::span<int>(all));
      break;
    case 10: {
      std::vector<int> mine(me ? 9 : 8);
      weft::reduce_scatter(comm, std::span<const int>(me ? more : all), std::span<int>(mine),
                           weft::sum{});
      break;
    }
    case 11:
      if (me)
        weft::alltoall(comm, std::span<const int>(more), std::span<int>(more_out));
      else
        weft::alltoall(comm, std::span<const int>(all), std::span<int>(all_out));
      break;
    case 12:
      if (me)
        weft::broadcast(comm, std::span<int>(data), 0);
      else
        weft::allreduce(comm, std::span<int>(data), weft::sum{});
      break;
    case 13:
      if (!me) weft::broadcast(comm, std::span<int>(data), 0);
      weft::allreduce(comm, std::span<int>(data), weft::max{});
      break;
    case 14:
      if (me)
        weft::barrier(comm);
      else
        weft::allreduce(comm, std::span<int>(data), weft::sum{});
      break;
    default:
      break;
  }
}

// Runs disagreement `which`, then two allreduces, and records in `sink` whatever falls short:
// every rank must fail with errc::mismatch, by the end of the differing call or of one of the
// two after it (a rank whose calls agree with its peers' can finish the next call before the
// message that shows the difference reaches the rank it was sent to), and a barrier after the
// failure must be refused.
template <class Comm>
void disagreement_case(Comm& comm, failures& sink, std::size_t which, int odd) {
  const std::string name =
      std::string(disagreements[which]) + ", rank " + std::to_string(comm.rank());
  try {
    disagree(comm, which, odd);
    std::vector<int> after(4, 1);
    weft::allreduce(comm, std::span<int>(after), weft::sum{});
    weft::allreduce(comm, std::span<int>(after), weft::sum{});
    sink.add(name + ": no call failed");
    return;
  } catch (const weft::error& failure) {
    const std::string what = failure.what();
    if (failure.code() != weft::errc::mismatch || what.find("calls differ") == std::string::npos) {
      sink.add(name + ": " + what);
    }
  }
  try {
    weft::barrier(comm);
    sink.add(name + ": a later barrier succeeded");
  } catch (const weft::error&) {
  }
}

// A user reduction that throws where it is told to (on one rank).
struct throwing_sum {
  static constexpr bool commutative = true;
  bool throws = false;
  int operator()(int a, int b) const {
    if (throws) throw std::runtime_error("throwing_sum refuses to add here");
    return a + b;
  }
};

// Rank `thrower`'s reduction throws inside an allreduce: that rank gets its own exception; every
// other rank fails with peer_lost quoting the thrower's text and naming it (not "lost", "closed"
// or "timed out": it is alive), in that call, or in the next where the call needed nothing more
// from the thrower (a direct allreduce's others have all its data before it reduces); every rank
// refuses the call after.
template <class Comm, class Algorithm = weft::ring>
void thrown_case(Comm& comm, failures& sink, int thrower, Algorithm algorithm = {}) {
  const std::string name = "rank " + std::to_string(comm.rank());
  const bool throws = comm.rank() == thrower;
  std::vector<int> data(4096, 1);
  const auto check = [&](const weft::error& failure) {
    const std::string what = failure.what();
    if (throws || failure.code() != weft::errc::peer_lost ||
        what.find("a call threw on rank " + std::to_string(thrower) + ": ") == std::string::npos ||
        what.find("throwing_sum refuses to add here") == std::string::npos ||
        what.find(" is lost") != std::string::npos ||
        what.find("closed its transport") != std::string::npos ||
        what.find("timed out") != std::string::npos) {
      sink.add(name + ": " + what);
    }
  };
  bool failed = false;
  try {
    weft::allreduce(comm, std::span<int>(data), throwing_sum{throws}, algorithm);
    if (throws) sink.add(name + ": the allreduce succeeded where the reduction threw");
  } catch (const weft::error& failure) {
    check(failure);
    failed = true;
  } catch (const std::runtime_error& failure) {
    if (!throws) sink.add(name + " threw the thrower's exception: " + failure.what());
    failed = true;
  }
  try {
    weft::barrier(comm);
    sink.add(name + ": a later barrier succeeded");
  } catch (const weft::error& failure) {
    if (!failed) check(failure);
  }
  try {
    weft::barrier(comm);
    sink.add(name + ": a second barrier succeeded");
  } catch (const weft::error&) {
  }
}

// An alltoallv whose counts disagree between two ranks: rank 0 sends rank 1 one element more
// than rank 1 expects from it. Every rank fails with mismatch saying calls differ (in that call
// or the barrier after it), none with a timeout or as lost, and a later barrier is refused.
template <class Comm>
void splits_case(Comm& comm, failures& sink) {
  const int p = comm.size();
  const int r = comm.rank();
  const std::string name = "rank " + std::to_string(r);
  std::vector<std::size_t> in_counts(static_cast<std::size_t>(p), 2),
      out_counts(static_cast<std::size_t>(p), 2);
  if (r == 0) in_counts[1] = 3;
  if (r == 1) out_counts[0] = 2;  // (as every other rank: it expects 2 from rank 0)
  std::vector<int> in(std::accumulate(in_counts.begin(), in_counts.end(), std::size_t{0}), r);
  std::vector<int> out(std::accumulate(out_counts.begin(), out_counts.end(), std::size_t{0}), -1);
  try {
    weft::alltoallv(comm, std::span<const int>(in), std::span<const std::size_t>(in_counts),
                    std::span<int>(out), std::span<const std::size_t>(out_counts));
    weft::barrier(comm);
    sink.add(name + ": no call failed");
    return;
  } catch (const weft::error& failure) {
    const std::string what = failure.what();
    if (failure.code() != weft::errc::mismatch || what.find("calls differ") == std::string::npos ||
        what.find("slower") != std::string::npos || what.find(" is lost") != std::string::npos) {
      sink.add(name + ": " + what);
    }
  }
  try {
    weft::barrier(comm);
    sink.add(name + ": a later barrier succeeded");
  } catch (const weft::error&) {
  }
}

}  // namespace weft_test
