// weft/communicator/rank_threads.hpp — running a function as every rank of a group of threads:
// one thread per rank, each calling it with a communicator over the rank's transport (or with
// the transport itself), the first exception rethrown once every thread has ended. What
// weft::inproc::run and weft::sim::run are made of; each says what its ranks share.
#pragma once

#include "weft/communicator/declaration.hpp"
#include "weft/error.hpp"
#include "weft/options.hpp"

#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace weft::detail {

// Calls fn with a communicator over `endpoint` when it takes one, else with the transport.
template <class Transport, class Function>
void call_as_rank(Function& fn, Transport& endpoint, const options& settings) {
  if constexpr (std::is_invocable_v<Function&, communicator<Transport>&>) {
    communicator<Transport> comm(endpoint, settings);
    fn(comm);
  } else {
    fn(endpoint);
  }
}

// Runs body(rank) for ranks 0..size-1, each on a thread of its own, then ended(rank, failure)
// on that thread, `failure` naming what body threw (null when it returned): what the ranks share
// is told, so the others stop waiting for a rank that failed. Returns once every thread has
// ended; rethrows the first exception a body threw. A thread that cannot be started (the
// process may have no more) is a failure of that rank and of every rank after it
// (ended(rank, &why) for each), and throws errc::transport "<who> could not start the thread of
// rank R of N: why" once the started ones have ended (a std::thread left running would end the
// process).
template <class Body, class Ended>
void run_rank_threads(int size, const char* who, Body&& body, Ended&& ended) {
  std::exception_ptr first;
  std::mutex first_mutex;
  auto run_rank = [&](int rank) {
    std::string failure;
    bool failed = false;
    try {
      body(rank);
    } catch (const std::exception& e) {
      failed = true;
      failure = e.what();
      std::lock_guard lock(first_mutex);
      if (!first) first = std::current_exception();
    } catch (...) {
      failed = true;
      failure = "unknown exception";
      std::lock_guard lock(first_mutex);
      if (!first) first = std::current_exception();
    }
    ended(rank, failed ? &failure : nullptr);
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(size));
  auto not_started = [&](int rank, const std::string& why) {
    const std::string reason = std::string(who) + " could not start the thread of rank " +
                               std::to_string(rank) + " of " + std::to_string(size) + ": " + why;
    for (int later = rank; later < size; ++later) ended(later, &reason);
    for (auto& thread : threads) thread.join();
    throw error(errc::transport, reason);
  };
  for (int rank = 0; rank < size; ++rank) {
    try {
      threads.emplace_back(run_rank, rank);
    } catch (const std::system_error& e) {
      not_started(rank, e.what());
    } catch (const std::bad_alloc&) {
      not_started(rank, "out of memory");
    }
  }
  for (auto& thread : threads) thread.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace weft::detail
