// weft/stream/carriers.hpp — the streams that carry transfers between stream-ordered ranks, in
// one process (weft/stream/local_ranks.hpp) and between processes (weft/stream/processes.hpp).
// (Not the nonblocking engine's lanes, weft/nonblocking/lanes.hpp: those order calls in flight.)
//
// A transfer waits for nothing but its posts (each side's "posted" flag reaching the value of
// its post), so it runs on a carrier of its own kind: a stream that never waits for anything a
// rank's stream does after its post. Transfers share a carrier when that delays nothing.
#pragma once

#include "weft/stream/flags.hpp"
#include "weft/transport.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <thread>
#include <vector>

namespace weft::stream::detail {

template <class Backend, class Memory = typename Backend::memory_type>
struct carrier {
  typename Backend::stream_type stream;
  Memory memory;
  flag_ticket last;  // the last transfer's done flag (a word that is never written: idle)
  std::vector<std::uint32_t>
      posts;  // the last transfer's posts (sender, receiver; or every rank's)
};

template <class Backend, class Memory = typename Backend::memory_type>
using carrier_set = std::vector<std::unique_ptr<carrier<Backend, Memory>>>;

// The carrier for a transfer whose sides posted at `posts`, from `mine`: the first that is idle, or
// whose last transfer was posted before this one on every side (then whatever that one waits
// for, this one waits for too, and queueing behind it delays nothing); else a new carrier on
// `device`, whose memory space make_memory(device, stream) gives. Transfers posted in order on
// every side (the usual case) share one carrier.
template <class Backend, class Memory, class MakeMemory>
carrier<Backend, Memory>& carrier_after(Backend& backend, carrier_set<Backend, Memory>& mine,
                                        int device, std::span<const std::uint32_t> posts,
                                        MakeMemory make_memory) {
  auto later = [](std::uint32_t a, std::uint32_t b) {
    return static_cast<std::int32_t>(a - b) > 0;
  };
  for (auto& l : mine) {
    const bool after = l->posts.size() == posts.size() &&
                       std::equal(posts.begin(), posts.end(), l->posts.begin(), later);
    if (l->last.word == nullptr || l->last.done() || after) {
      l->posts.assign(posts.begin(), posts.end());
      return *l;
    }
  }
  const auto s = backend.make_stream(device);
  mine.push_back(std::make_unique<carrier<Backend, Memory>>(
      carrier<Backend, Memory>{s, make_memory(device, s), {}, {posts.begin(), posts.end()}}));
  return *mine.back();
}

// Enqueues every wait of `waits` on `s`: in one call where the backend has one (wait_flags),
// else one call each.
template <class Backend>
void enqueue_waits(Backend& backend, typename Backend::stream_type s,
                   std::span<const flag_wait> waits) {
  if (waits.empty()) return;
  if constexpr (requires { backend.wait_flags(s, waits); }) {
    if (waits.size() > 1) {
      backend.wait_flags(s, waits);
      return;
    }
  }
  for (const auto& w : waits) backend.wait_flag(s, w.word, w.value);
}

// A host's wait for streams: until done(), polling the first 200 us (a short call, as a stream
// sync spins), then sleeping 20 us doubling to 2 ms; throws timed_out() at the deadline.
template <class Done, class TimedOut>
void poll_until(Done done, deadline_clock::time_point deadline, TimedOut timed_out) {
  const auto start = deadline_clock::now();
  auto pause = std::chrono::microseconds(20);
  while (!done()) {
    const auto now = deadline_clock::now();
    if (now >= deadline) throw timed_out();
    if (now - start < std::chrono::microseconds(200)) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
}

// A destructor's bounded wait while busy(): after 10 s, abort() releases what is left, and the
// streams run to their end. A device error while draining ends the wait.
template <class Busy, class Abort>
void drain_or_abort(Busy busy, Abort abort) noexcept {
  try {
    const auto deadline = deadline_clock::now() + std::chrono::seconds(10);
    while (busy()) {
      if (deadline_clock::now() >= deadline) {
        abort();
        while (busy()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  } catch (...) {
  }
}

// Whether every carrier has run everything enqueued on it.
template <class Backend, class Memory>
bool carriers_idle(Backend& backend, const std::vector<carrier_set<Backend, Memory>>& all) {
  for (const auto& mine : all) {
    for (const auto& l : mine) {
      if (!backend.idle(l->stream)) return false;
    }
  }
  return true;
}

template <class Backend, class Memory>
void destroy_carriers(Backend& backend, std::vector<carrier_set<Backend, Memory>>& all) noexcept {
  for (auto& mine : all) {
    for (auto& l : mine) backend.destroy_stream(l->stream);
  }
  all.clear();
}

}  // namespace weft::stream::detail
