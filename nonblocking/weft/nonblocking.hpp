// weft/nonblocking.hpp — collectives that return at once and complete later (MPI_Iallreduce).
//
//   auto work = weft::iallreduce(comm, std::span<float>(grads), weft::sum{});  // starts it
//   compute();                                          // ... while it is in flight
//   weft::report done = work.wait();                    // or work.test(), work.wait(deadline)
//
// Every collective has an i-call taking the blocking call's arguments, and weft::start runs any
// blocking call (or several, one after another) as one call in flight. Several may be in flight on
// one communicator; every rank must issue them in the same order, and they complete in that order
// (a handle is done once its call and every earlier one are). A blocking call, split or dup on the
// communicator first completes the calls in flight. The buffers (and counts) must stay valid and
// untouched until the call is done.
//
// Progress: the calls move forward whenever the caller is inside test(), wait() or another call on
// the communicator; with options::progress_thread (WEFT_PROGRESS_THREAD=1) also by a thread of the
// communicator's own, for callers that compute without calling into weft. Which a transport needs
// is in docs/nonblocking.md. Errors and timeouts of a call in flight are thrown by its handle's
// test() or wait() with the same messages as the blocking call's; argument errors are thrown by the
// i-call itself, and nothing is put in flight.
//
// Needs Boost.Context (Meson: dependency('weft-nonblocking'); CMake: component nonblocking).
#pragma once

#include "weft/collectives.hpp"
#include "weft/communicator.hpp"
#include "weft/nonblocking/fusion.hpp"
#include "weft/nonblocking/lanes.hpp"
#include "weft/ops.hpp"
#include "weft/transport.hpp"

#include <chrono>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>

namespace weft {

// A call in flight. Dropping the handle leaves the call in flight: it still completes (in order)
// and its failure still fails the communicator.
template <transport Transport>
class request {
 public:
  using communicator_type = communicator<Transport>;

  request() = default;
  // The handle of a call the lanes have (weft::start and the i-calls make them).
  explicit request(std::shared_ptr<detail::call_outcome<communicator_type>> outcome)
      : outcome_(std::move(outcome)) {}

  bool valid() const { return outcome_ != nullptr; }

  // Moves the calls in flight forward without blocking; true once this call is done (and then
  // throws its failure, as wait() does).
  bool test() {
    refuse_if_empty();
    if (!outcome_->done.load(std::memory_order_acquire) && !outcome_->driver->test(*outcome_))
      return false;
    throw_failure();
    return true;
  }

  // Blocks until the call is done; returns its report or throws its failure.
  report wait() {
    while (!wait(deadline_clock::now() + std::chrono::hours(24))) {
    }
    return outcome_->result;
  }

  // Blocks until the call is done (true; throws its failure) or `deadline` passes (false: the
  // call stays in flight).
  bool wait(deadline_clock::time_point deadline) {
    refuse_if_empty();
    if (!outcome_->done.load(std::memory_order_acquire) &&
        !outcome_->driver->wait(*outcome_, deadline)) {
      return false;
    }
    throw_failure();
    return true;
  }

  template <class Rep, class Period>
  bool wait_for(std::chrono::duration<Rep, Period> time) {
    return wait(deadline_after(time));
  }

  // What the call did (once done). A call weft::group fused with others reports the fused call.
  const report& result() const { return outcome_->result; }
  // The call ran as part of a fused one (weft::group).
  bool fused() const { return outcome_->fused; }

 private:
  void refuse_if_empty() const {
    if (outcome_ == nullptr) {
      throw error(
          errc::invalid_argument,
          "an empty weft::request (default-constructed or moved from) was tested or waited for");
    }
  }

  void throw_failure() const {
    if (outcome_->failure) std::rethrow_exception(outcome_->failure);
  }

  std::shared_ptr<detail::call_outcome<communicator_type>> outcome_;
};

namespace detail {
template <transport Transport>
lanes<communicator<Transport>>& lanes_of(communicator<Transport>& comm) {
  using engine = lanes<communicator<Transport>>;
  if (comm.calls_in_flight() == nullptr) {
    comm.keep_calls_in_flight(std::make_unique<engine>(comm.settings().progress_thread));
  }
  return static_cast<engine&>(*comm.calls_in_flight());
}
}  // namespace detail

// Puts `work(lane)` in flight: `work` makes blocking calls on `lane`, a communicator of the same
// ranks that runs them while the caller goes on; `name` names the call in errors. Returns once the
// call is posted (it has given way at its first wait, or is done).
template <transport Transport, class Work>
request<Transport> start(communicator<Transport>& comm, std::string_view name, Work work) {
  static_assert(
      std::is_invocable_r_v<report, Work&, communicator<Transport>&>,
      "weft::start: work must be callable as work(communicator&) and return a weft::report");
  return request<Transport>(detail::lanes_of(comm).issue(comm, name, std::move(work)));
}

// ---- the i-calls: each takes its blocking call's arguments ------------------------------------

template <transport Transport, element T, class Op = sum, class Algorithm = automatic>
request<Transport> iallreduce(communicator<Transport>& comm,
                              std::type_identity_t<std::span<const T>> in, std::span<T> out,
                              Op op = {}, Algorithm algorithm = {}) {
  return start(comm, "allreduce", [=](communicator<Transport>& lane) {
    return allreduce<Transport, T, Op, Algorithm>(lane, in, out, op, algorithm);
  });
}

// In place; inside a weft::group, fused with others of its element type, op and algorithm.
template <transport Transport, element T, class Op = sum, class Algorithm = automatic>
request<Transport> iallreduce(communicator<Transport>& comm, std::span<T> data, Op op = {},
                              Algorithm algorithm = {}) {
  auto work = [=](communicator<Transport>& lane) {
    return allreduce<Transport, T, Op, Algorithm>(lane, std::span<const T>(data), data, op,
                                                  algorithm);
  };
  auto& lanes = detail::lanes_of(comm);
  auto offer =
      lanes.recording() ? detail::offer_fusion<Transport, T, Op, Algorithm>(data) : nullptr;
  return request<Transport>(lanes.issue(comm, "allreduce", std::move(work), std::move(offer)));
}

template <transport Transport, element T, class Op = sum, class Algorithm = automatic>
request<Transport> ireduce_scatter(communicator<Transport>& comm,
                                   std::type_identity_t<std::span<const T>> all, std::span<T> mine,
                                   Op op = {}, Algorithm algorithm = {}) {
  return start(comm, "reduce_scatter", [=](communicator<Transport>& lane) {
    return reduce_scatter<Transport, T, Op, Algorithm>(lane, all, mine, op, algorithm);
  });
}

template <transport Transport, element T, class Op = sum, class Algorithm = automatic>
request<Transport> ireduce(communicator<Transport>& comm,
                           std::type_identity_t<std::span<const T>> in, std::span<T> out, Op op,
                           int root, Algorithm algorithm = {}) {
  return start(comm, "reduce", [=](communicator<Transport>& lane) {
    return reduce<Transport, T, Op, Algorithm>(lane, in, out, op, root, algorithm);
  });
}

template <transport Transport, element T, class Op = sum, class Algorithm = automatic>
request<Transport> ireduce(communicator<Transport>& comm, std::span<T> data, Op op, int root,
                           Algorithm algorithm = {}) {
  return ireduce<Transport, T, Op, Algorithm>(comm, std::span<const T>(data), data, op, root,
                                              algorithm);
}

template <transport Transport, element T, class Algorithm = automatic>
request<Transport> ibroadcast(communicator<Transport>& comm, std::span<T> data, int root,
                              Algorithm algorithm = {}) {
  return start(comm, "broadcast", [=](communicator<Transport>& lane) {
    return broadcast<Transport, T, Algorithm>(lane, data, root, algorithm);
  });
}

template <transport Transport, element T, class Algorithm = automatic>
request<Transport> iallgather(communicator<Transport>& comm,
                              std::type_identity_t<std::span<const T>> mine, std::span<T> all,
                              Algorithm algorithm = {}) {
  return start(comm, "allgather", [=](communicator<Transport>& lane) {
    return allgather<Transport, T, Algorithm>(lane, mine, all, algorithm);
  });
}

template <transport Transport, element T, class Algorithm = automatic>
request<Transport> iallgatherv(communicator<Transport>& comm,
                               std::type_identity_t<std::span<const T>> mine, std::span<T> all,
                               std::span<const std::size_t> counts, Algorithm algorithm = {}) {
  return start(comm, "allgatherv", [=](communicator<Transport>& lane) {
    return allgatherv<Transport, T, Algorithm>(lane, mine, all, counts, algorithm);
  });
}

template <transport Transport, element T, class Algorithm = automatic>
request<Transport> ialltoall(communicator<Transport>& comm,
                             std::type_identity_t<std::span<const T>> in, std::span<T> out,
                             Algorithm algorithm = {}) {
  return start(comm, "alltoall", [=](communicator<Transport>& lane) {
    return alltoall<Transport, T, Algorithm>(lane, in, out, algorithm);
  });
}

template <transport Transport, element T, class Algorithm = automatic>
request<Transport> ialltoallv(communicator<Transport>& comm,
                              std::type_identity_t<std::span<const T>> in,
                              std::span<const std::size_t> in_counts, std::span<T> out,
                              std::span<const std::size_t> out_counts, Algorithm algorithm = {}) {
  return start(comm, "alltoallv", [=](communicator<Transport>& lane) {
    return alltoallv<Transport, T, Algorithm>(lane, in, in_counts, out, out_counts, algorithm);
  });
}

template <transport Transport, element T, class Algorithm = automatic>
request<Transport> igather(communicator<Transport>& comm,
                           std::type_identity_t<std::span<const T>> mine, std::span<T> all,
                           int root, Algorithm algorithm = {}) {
  return start(comm, "gather", [=](communicator<Transport>& lane) {
    return gather<Transport, T, Algorithm>(lane, mine, all, root, algorithm);
  });
}

template <transport Transport, element T, class Algorithm = automatic>
request<Transport> iscatter(communicator<Transport>& comm,
                            std::type_identity_t<std::span<const T>> all, std::span<T> mine,
                            int root, Algorithm algorithm = {}) {
  return start(comm, "scatter", [=](communicator<Transport>& lane) {
    return scatter<Transport, T, Algorithm>(lane, all, mine, root, algorithm);
  });
}

template <transport Transport, class Algorithm = automatic>
request<Transport> ibarrier(communicator<Transport>& comm, Algorithm algorithm = {}) {
  return start(comm, "barrier", [=](communicator<Transport>& lane) {
    return barrier<Transport, Algorithm>(lane, algorithm);
  });
}

// Point-to-point in flight: matches blocking send and recv with the same tag.
template <transport Transport, class T>
requires element<std::remove_const_t<T>> request<Transport> isend(communicator<Transport>& comm,
                                                                  std::span<T> data, int peer,
                                                                  int tag = 0) {
  return start(comm, "send", [=](communicator<Transport>& lane) {
    return send<Transport, T>(lane, data, peer, tag);
  });
}

template <transport Transport, element T>
request<Transport> irecv(communicator<Transport>& comm, std::span<T> data, int peer, int tag = 0) {
  return start(comm, "recv", [=](communicator<Transport>& lane) {
    return recv<Transport, T>(lane, data, peer, tag);
  });
}

}  // namespace weft
