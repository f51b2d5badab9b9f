// weft/dispatch/selection.hpp — how weft::automatic picks an algorithm for one call.
//
//   1. If WEFT_ALGO names an algorithm for this collective ("allreduce=ring,broadcast=
//      binomial_tree"), that one runs — or the call fails with errc::invalid_argument if it
//      cannot run this collective with this op. No silent substitution.
//   2. Otherwise every algorithm that implements the collective (and keeps rank order, for a
//      non-commutative op) is costed with the cost model, using the transport's constants
//      (its row of tuning/cost_model.hpp, or what it gives at run time: cost_constants()),
//      and the cheapest runs. The inputs (rank count, message size) are the same on every
//      rank, so every rank picks the same algorithm.
#pragma once

#include "weft/communicator.hpp"
#include "weft/communicator/in_flight.hpp"
#include "weft/detail/env.hpp"
#include "weft/detail/lists.hpp"
#include "weft/error.hpp"
#include "weft/tuning/cost_model.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace weft {

// Pass as the algorithm to let weft choose per call (the default).
struct automatic {
  static constexpr std::string_view name = "automatic";
};

namespace tuning {

// The algorithm WEFT_ALGO names for `kind`, or empty.
inline std::string_view algorithm_override(collective kind) {
  const auto value = detail::env::text("WEFT_ALGO");
  if (!value) return {};
  std::string_view spec = *value;
  std::string_view chosen;
  while (!spec.empty()) {
    const std::string_view item = detail::next_item(spec);
    if (item.empty()) continue;
    const auto equals = item.find('=');
    const std::string_view name = item.substr(0, std::min(equals, item.size()));
    const std::string_view algorithm =
        equals == std::string_view::npos ? "" : item.substr(equals + 1);
    bool known = false;
    for (int k = 0; k <= static_cast<int>(collective::barrier); ++k) {
      known = known || name == to_string(static_cast<collective>(k));
    }
    // Every item is read, so that a misspelt one is refused rather than silently ignored.
    if (!known || algorithm.empty() || algorithm.find_first_of(" \t=") != std::string_view::npos) {
      detail::env::refuse("WEFT_ALGO", *value,
                          "a comma-separated list of collective=algorithm (e.g. allreduce=ring,"
                          "broadcast=binomial_tree): '" +
                              std::string(item) + "' is not one");
    }
    if (name == to_string(kind)) chosen = algorithm;
  }
  return chosen;
}

}  // namespace tuning

namespace detail {

template <class... Algorithms>
struct algorithm_list {};

// An algorithm can run a call when it implements the collective and, for a reduction with a
// non-commutative op, keeps rank order.
template <class Algorithm, class Call, class Comm>
concept runs = Call::template supported<Algorithm, Comm> &&
               (Call::commutative || Algorithm::keeps_rank_order);

template <class Algorithm, class Comm, class Call>
report run_with(Comm& comm, const Call& call) {
  // (the description's digest goes into the call's tags: weft/communicator/consistency.hpp)
  const call_signature asked = call.signature(Algorithm::name);
  const auto scope = comm.begin(Call::kind, Algorithm::name, &asked);
  try {
    // A transport that charges each call's start (the simulator's launch overhead of a GPU
    // fabric) is told once per call made by the user, not per phase of an algorithm's groups.
    if constexpr (requires { comm.underlying_transport().begin_call(Call::kind); })
      comm.underlying_transport().begin_call(Call::kind);
    if (comm.settings().check) call.check(comm, Algorithm::name);
    call.template run<Algorithm>(comm);
    comm.end_call();
  } catch (const error& failure) {
    // The call's buffers are still alive here; requests left in the communicator's pool would
    // otherwise outlive them (and the transport could go on writing into a freed buffer).
    comm.cancel_requests();
    comm.record_failure(failure);  // a mismatch found by check mode is written too
    throw;
  } catch (const detail::call_cancelled&) {  // an earlier call in flight failed: it says why
    comm.cancel_requests();
    throw;
  } catch (const std::exception& thrown) {  // not weft's: the user's reduction, memory
    comm.cancel_requests();
    comm.end_by_own_exception(thrown.what());
    throw;
  } catch (...) {
    comm.cancel_requests();
    comm.end_by_own_exception("an exception that is not a std::exception");
    throw;
  }
  return comm.finish();
}

// The index in the list of the algorithm weft::automatic runs for `call` (WEFT_ALGO's, else the
// cheapest); throws errc::invalid_argument when WEFT_ALGO names one that cannot run it.
template <class Comm, class Call, class... Algorithms>
int choose_automatic(Comm& comm, const Call& call, algorithm_list<Algorithms...>) {
  const std::string_view wanted = tuning::algorithm_override(Call::kind);
  const auto rows = tuning::rows_of(comm.underlying_transport());
  const tuning::link_constants& local = rows.first;
  const tuning::link_constants& constants = rows.second;
  int chosen = -1;
  int index = 0;
  double best = std::numeric_limits<double>::infinity();
  (
      [&] {
        if constexpr (runs<Algorithms, Call, Comm>) {
          if (wanted.empty()) {
            const double bytes = static_cast<double>(call.message_bytes());
            double estimate = 0;
            if constexpr (requires {
                            Algorithms::estimate_us(comm, Call::kind, bytes, constants, constants);
                          }) {
              // An algorithm of two tiers (weft::hierarchical) costs each with its own row.
              estimate = Algorithms::estimate_us(comm, Call::kind, bytes, local, constants);
            } else {
              estimate = tuning::estimate_us(
                  Algorithms::cost(Call::kind, comm.size(), bytes,
                                   static_cast<double>(comm.pipeline_bytes(Call::kind))),
                  constants);
            }
            if (estimate < best) {
              best = estimate;
              chosen = index;
            }
          } else if (Algorithms::name == wanted) {
            chosen = index;
          }
        }
        ++index;
      }(),
      ...);
  if (chosen < 0) {
    std::string choices;
    auto add_choice = [&](std::string_view name) {
      choices += choices.empty() ? "" : ", ";
      choices += name;
    };
    (
        [&] {
          if constexpr (runs<Algorithms, Call, Comm>) add_choice(Algorithms::name);
        }(),
        ...);
    throw error(errc::invalid_argument,
                "rank " + std::to_string(comm.rank()) + ": WEFT_ALGO asks for '" +
                    std::string(wanted) + "' for " + std::string(to_string(Call::kind)) +
                    ", which cannot run it" +
                    (Call::commutative ? "" : " with a non-commutative op") +
                    "; choose one of: " + choices);
  }
  return chosen;
}

// The name of the algorithm weft::automatic runs for `call`.
template <class Comm, class Call, class... Algorithms>
std::string_view automatic_choice(Comm& comm, const Call& call,
                                  algorithm_list<Algorithms...> list) {
  const int chosen = choose_automatic(comm, call, list);
  std::string_view name;
  int index = 0;
  ((name = index++ == chosen ? Algorithms::name : name), ...);
  return name;
}

template <class Comm, class Call, class... Algorithms>
report run_automatic(Comm& comm, const Call& call, algorithm_list<Algorithms...> list) {
  const int chosen = choose_automatic(comm, call, list);
  report result;
  int index = 0;
  (
      [&] {
        if constexpr (runs<Algorithms, Call, Comm>) {
          if (index == chosen) result = run_with<Algorithms>(comm, call);
        }
        ++index;
      }(),
      ...);
  return result;
}

}  // namespace detail
}  // namespace weft
