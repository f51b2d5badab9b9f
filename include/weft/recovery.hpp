// weft/recovery.hpp — going on after a lost rank: revoke, agree, shrink (docs/recovery.md).
//
//   try {
//     weft::allreduce(*world, std::span<float>(grads), weft::sum{});
//   } catch (const weft::error& failure) {       // peer_lost, revoked or timeout
//     world->revoke();                            // every rank's calls end, not only this one's
//     world = &weft::shrink(*world);              // the survivors, renumbered 0..k-1
//     // redo the step on the survivors
//   }
//
// The world communicator of a session (job.comm()) knows its session, which rebuilds the world over
// the job's bootstrap store: the survivors agree there on who is lost (a fault-tolerant
// agreement, weft/bootstrap/agreement.hpp), keep their order, meet again under keys of their own
// and get a new transport and communicator. The store must outlive the ranks that fail.
#pragma once

#include "weft/communicator.hpp"
#include "weft/communicator/owner.hpp"
#include "weft/error.hpp"

#include <cstdint>
#include <string>

namespace weft {

namespace detail {
template <transport T>
world_owner<communicator<T>>& owner_of(communicator<T>& world, const char* what) {
  if (auto* owner = world.owner()) return *owner;
  throw error(errc::invalid_argument,
              "rank " + std::to_string(world.transport_rank(world.rank())) + ": " + what +
                  " needs a session's world communicator (job.comm()); this one was split or "
                  "duplicated from one, or built over a transport directly; nothing was sent");
}
}  // namespace detail

// Agreement among the ranks of `world` still running, on every rank that returns it the same:
// the bitwise AND of their flags, and the ranks counted lost (with why). Ranks that died before or
// during the agreement are found through the store (a lifeline, their process on this host, or
// the communicator's timeout); the agreement goes on without them. Every rank still running calls
// it, in the same order as its other agreements and shrinks. It works whatever state the
// communicator is in: revoked, failed, or healthy (a rank asking whether the others' step went
// well). Throws peer_lost on a rank the others counted lost before it came.
template <transport T>
agreement agree(communicator<T>& world, std::uint64_t flag = ~std::uint64_t{0}) {
  return detail::owner_of(world, "weft::agree").agree(flag);
}

// The survivors of `world`, as a new world communicator: revokes `world` (so every rank's calls
// on it end), agrees on the ranks lost, and builds a new transport of the others over the store,
// in their order, renumbered 0..k-1. A rank lost during the shrink is agreed on and left out too.
// `world` and every communicator split from it stay revoked; the session's comm() is the new one.
// Every rank still running calls it.
template <transport T>
communicator<T>& shrink(communicator<T>& world) {
  return detail::owner_of(world, "weft::shrink").shrink();
}

}  // namespace weft
