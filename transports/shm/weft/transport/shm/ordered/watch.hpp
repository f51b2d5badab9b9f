// weft/transport/shm/ordered/watch.hpp — a stream-ordered rank's progress thread: it sleeps on
// the rank's doorbell, matches the envelopes that come, and watches the peers (a pidfd per peer
// process, each peer region's `aborted` word). Part of weft/transport/shm/ordered/world.hpp.
#pragma once

#include "weft/transport/shm/ordered/world.hpp"

namespace weft::shm::ordered {

// The progress thread: sleeps on this rank's doorbell (a peer rings it with each envelope),
// matches what came, and watches the peers' processes and regions.
template <sharing_backend Backend>
void world<Backend>::progress() {
  control_block* control = mine().control();
  while (!stopping_.load()) {
    const std::uint32_t seen = control->doorbell.load(std::memory_order_acquire);
    bool more = false;
    {
      std::lock_guard lock(mutex_);
      try {
        for (int sender = 0; sender < size_; ++sender) drain(sender);
        watch_peers();
      } catch (const std::exception& failure) {  // a device error while enqueuing: nothing runs any more
        abort_locked(std::string("its progress thread failed: ") + failure.what(), errc::transport);
      }
      control->sleeping.store(1, std::memory_order_seq_cst);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      more = news();
    }
    if (!more && !stopping_.load()) detail::futex_wait(control->doorbell, seen, std::chrono::milliseconds(20));
    control->sleeping.store(0, std::memory_order_relaxed);
  }
}

// Whether some envelope is waiting to be read.
template <sharing_backend Backend>
bool world<Backend>::news() const {
  const region_view here = mine();
  for (int sender = 0; sender < size_; ++sender) {
    const auto s = static_cast<std::size_t>(sender);
    if (here.slot(sender, read_[s])->sequence.load(std::memory_order_acquire) == read_[s] + 1) return true;
  }
  return false;
}

// Locked. A peer whose process ended, or that aborted, aborts this rank.
template <sharing_backend Backend>
void world<Backend>::watch_peers() {
  if (aborted_) return;
  for (int peer = 0; peer < size_; ++peer) {
    const auto p = static_cast<std::size_t>(peer);
    if (peer == rank_) continue;
    // A peer that closed its transport in order and then exits is not lost.
    if (pidfds_[p] >= 0 && views_[p].control()->closed.load(std::memory_order_acquire) == 0) {
      pollfd one{pidfds_[p], POLLIN, 0};
      if (::poll(&one, 1, 0) > 0) {
        abort_locked("rank " + std::to_string(peer) + " was lost: its process (pid " + std::to_string(pids_[p]) +
                         ") ended",
                     errc::peer_lost);
        return;
      }
    }
    const state_block* state = views_[p].state();
    if (state->aborted.load(std::memory_order_acquire) != 0) {
      abort_locked(std::string(state->reason, strnlen(state->reason, sizeof state->reason)), errc::peer_lost);
      return;
    }
  }
}

}  // namespace weft::shm::ordered
