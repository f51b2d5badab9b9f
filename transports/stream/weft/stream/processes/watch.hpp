// weft/stream/processes/watch.hpp — a stream-ordered rank's progress thread (it sleeps on
// the rank's doorbell, matches the envelopes that come, and watches the peers: a pidfd per peer
// process, each peer region's `aborted` word), what an abort releases, and what a timed-out
// synchronize says. Members of weft::stream::process_rank (weft/stream/processes/process_rank.hpp).
#pragma once

#include "weft/stream/processes/process_rank.hpp"

namespace weft::stream {

// The progress thread: sleeps on this rank's doorbell (a peer rings it with each envelope),
// matches what came, and watches the peers' processes and regions.
template <sharing_backend Backend>
void process_rank<Backend>::progress() {
  control_block* control = mine().control();
  while (!stopping_.load()) {
    const std::uint32_t seen = control->doorbell.load(std::memory_order_acquire);
    bool more = false;
    {
      std::lock_guard lock(mutex_);
      try {
        for (int sender = 0; sender < size_; ++sender) drain(sender);
        watch_peers();
      } catch (
          const std::exception& failure) {  // a device error while enqueuing: nothing runs any more
        abort_locked(std::string("its progress thread failed: ") + failure.what(), errc::transport);
      }
      control->sleeping.store(1, std::memory_order_seq_cst);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      more = news();
    }
    if (!more && !stopping_.load())
      shm::detail::futex_wait(control->doorbell, seen, std::chrono::milliseconds(20));
    control->sleeping.store(0, std::memory_order_relaxed);
  }
}

// Whether some envelope is waiting to be read.
template <sharing_backend Backend>
bool process_rank<Backend>::news() const {
  const region_view here = mine();
  for (int sender = 0; sender < size_; ++sender) {
    const auto s = static_cast<std::size_t>(sender);
    if (here.slot(sender, read_[s])->sequence.load(std::memory_order_acquire) == read_[s] + 1)
      return true;
  }
  return false;
}

// Locked. A peer whose process ended, or that aborted, aborts this rank.
template <sharing_backend Backend>
void process_rank<Backend>::watch_peers() {
  if (aborted_) return;
  for (int peer = 0; peer < size_; ++peer) {
    const auto p = static_cast<std::size_t>(peer);
    if (peer == rank_) continue;
    // A peer that closed its transport in order and then exits is not lost.
    if (pidfds_[p] >= 0 && views_[p].control()->closed.load(std::memory_order_acquire) == 0) {
      pollfd one{pidfds_[p], POLLIN, 0};
      if (::poll(&one, 1, 0) > 0) {
        abort_locked("rank " + std::to_string(peer) + " was lost: its process (pid " +
                         std::to_string(pids_[p]) + ") ended",
                     errc::peer_lost);
        return;
      }
    }
    if (views_[p].control()->closed.load(std::memory_order_acquire) != 0 && waits_on(peer)) {
      abort_locked("rank " + std::to_string(peer) +
                       " closed its transport while this rank still waits for it",
                   errc::peer_lost);
      return;
    }
    const state_block* state = views_[p].state();
    if (state->aborted.load(std::memory_order_acquire) != 0) {
      abort_locked(std::string(state->reason, strnlen(state->reason, sizeof state->reason)),
                   errc::peer_lost);
      return;
    }
  }
}

// Locked. Releases this rank's streams and carriers, withdraws what is unmatched, and says so in
// this rank's region so that every peer aborts too.
template <sharing_backend Backend>
void process_rank<Backend>::abort_locked(const std::string& reason, errc code) {
  if (!aborted_) {
    aborted_ = reason;
    code_ = code;
    state_block* state = mine().state();
    const std::string told = who() + ": " + reason;
    const std::size_t n = std::min(told.size(), sizeof state->reason - 1);
    std::memcpy(state->reason, told.data(), n);
    state->reason[n] = '\0';
    state->aborted.store(1, std::memory_order_release);
    for (int peer = 0; peer < size_; ++peer) {
      if (peer != rank_ && views_[static_cast<std::size_t>(peer)].base != nullptr)
        shm::detail::ring(views_[static_cast<std::size_t>(peer)].control());
    }
  }
  flags_->release_all();
  for (int peer = 0; peer < size_; ++peer) {  // carriers waiting on a post that may never come
    const region_view v = views_[static_cast<std::size_t>(peer)];
    if (v.base == nullptr) continue;
    const std::uint32_t highest =
        peer == rank_ ? posted_ : highest_post_[static_cast<std::size_t>(peer)];
    if (!reached(read_flag(v.posted()), highest)) store_flag(v.posted(), highest);
  }
  for (auto& queue : pending_) {
    for (operation* op : queue) settle(op, false);
    queue.clear();
  }
  for (auto& g : wholes_) {  // carriers waiting for the peers' shares of a whole collective
    for (int peer = 0; peer < size_ && g->enqueued; ++peer) {
      const announced& part = g->from[static_cast<std::size_t>(peer)];
      if (peer != rank_)
        store_flag(views_[static_cast<std::size_t>(peer)].flags() + part.flag, part.value);
    }
  }
}

template <sharing_backend Backend>
error process_rank<Backend>::timed_out(std::chrono::milliseconds timeout) {
  std::lock_guard lock(mutex_);
  const std::string head = who() + " (device " + std::to_string(device_) +
                           "): its stream did not finish within " +
                           std::to_string(timeout.count()) + " ms";
  for (const auto& g : wholes_) {  // a whole collective some rank has not posted its part of
    if (!g->enqueued && g->mine)
      return error(errc::timeout, head + weft::stream::detail::missing_parts(*g));
  }
  for (const auto& w : waits_) {
    if (!w.done.done()) return error(errc::timeout, head + weft::stream::detail::waiting_for(w));
  }
  return error(errc::timeout,
               head + "; it waits for no other rank: the device is still busy with its own work");
}

// Locked. Whether this rank still waits for `peer`: a receive from it unmatched, a transfer with
// it unfinished, or a whole collective without its part.
template <sharing_backend Backend>
bool process_rank<Backend>::waits_on(int peer) const {
  if (!pending_[static_cast<std::size_t>(peer)].empty()) return true;
  for (const auto& w : waits_) {
    if (w.peer == peer && !w.done.done()) return true;
  }
  for (const auto& g : wholes_) {
    if (g->mine && !g->enqueued && !g->parts[static_cast<std::size_t>(peer)].arrived) return true;
  }
  return false;
}

}  // namespace weft::stream
