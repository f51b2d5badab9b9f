// weft/recorder.hpp — the flight recorder: every communicator keeps its last calls (64 by
// default; WEFT_RECORDER=N, 0 for none), each with its number, what was asked (collective,
// count, type, op, root, algorithm), the step it is in, the peer it waits for, the bytes it sent,
// and when it started and ended. When a call fails with a timeout, a lost peer or a mismatch,
// and when the process gets SIGUSR1, each rank writes its records: as JSON lines to
// WEFT_RECORDER_DIR/rank-<world rank>.jsonl, else one line per communicator on stderr.
// `weft-why DIR` reads a job's records and says who is stuck where (docs/errors.md).
//
// Cost: two uncontended spin-lock passes and two coarse clock reads per call, two relaxed stores
// per blocking wait (about 25 ns a call); none when WEFT_RECORDER=0.
#pragma once

#include "weft/call.hpp"
#include "weft/error.hpp"

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace weft {

// One call as the recorder saw it.
struct recorded_call {
  enum class outcome : std::uint8_t { running, done, failed };
  std::uint64_t number = 0;      // the communicator's collective number: 1 for its first
                                 // collective; a send, recv or sendrecv has the number of
                                 // the collective before it (only the ranks in it make it)
  call_signature signature;      // what was asked (count, type and op for the collectives)
  std::int64_t started_us = 0;   // CLOCK_MONOTONIC in microseconds, to the kernel's tick
  std::int64_t ended_us = 0;     // 0 while running
  int step = 0;                  // the step it was in
  int waiting_for = -1;          // the rank (of this communicator) a wait was for, -1: none
  int culprit = -1;              // a failure's lost rank, as the job numbers it (error::culprit)
  bool waiting_to_send = false;  // that wait was a send's
  std::uint64_t bytes_sent = 0;
  outcome state = outcome::running;
  std::string failure;  // the error, when it failed
};

class flight_recorder {
 public:
  // `world_ranks`: the job's rank of each rank of the communicator; `rank`: this rank's;
  // `context`: the communicator's id, the same on every rank.
  flight_recorder(std::size_t capacity, std::vector<int> world_ranks, int rank,
                  std::uint32_t context)
      : ring_(capacity),
        world_ranks_(std::move(world_ranks)),
        rank_(rank),
        world_rank_(world_ranks_[static_cast<std::size_t>(rank)]),
        size_(static_cast<int>(world_ranks_.size())),
        context_(context) {}

  // A new call numbered `number` (recorded_call::number): `asked` when the facade knows the
  // call's arguments, else its kind and algorithm.
  void begin(std::uint64_t number, collective kind, std::string_view algorithm,
             const call_signature* asked) {
    const std::int64_t started = now_us();
    std::lock_guard guard(lock_);
    recorded_call& entry = ring_[static_cast<std::size_t>(count_ % ring_.size())];
    ++count_;
    entry.number = number;
    if (asked != nullptr) {
      entry.signature = *asked;
    } else {
      entry.signature = call_signature{};
      entry.signature.kind = kind;
      call_signature::assign(entry.signature.algorithm, algorithm);
    }
    entry.started_us = started;
    entry.ended_us = 0;
    entry.step = 0;
    entry.waiting_for = -1;
    entry.culprit = -1;
    entry.waiting_to_send = false;
    entry.bytes_sent = 0;
    entry.state = recorded_call::outcome::running;
    entry.failure.clear();
    step_.store(0, std::memory_order_relaxed);
    waiting_for_.store(-1, std::memory_order_relaxed);
  }
  // Before a blocking wait: the step, and the peer it waits for (-1 after).
  void waiting(int step, int peer, bool to_send) {
    step_.store(step, std::memory_order_relaxed);
    waiting_for_.store(to_send ? -2 - peer : peer, std::memory_order_relaxed);
  }
  void end(int step, std::uint64_t bytes_sent, bool failed) {
    const std::int64_t ended = now_us();
    std::lock_guard guard(lock_);
    if (count_ == 0) return;
    recorded_call& entry = current();
    if (entry.state != recorded_call::outcome::running) return;
    settle(entry);
    entry.step = step;
    entry.bytes_sent = bytes_sent;
    entry.ended_us = ended;
    entry.state = failed ? recorded_call::outcome::failed : recorded_call::outcome::done;
    if (!failed) entry.waiting_for = -1;
  }
  // The running call failed with `why`; false when no call runs (it was recorded already).
  bool failed(std::string_view why, int culprit, int step, std::uint64_t bytes_sent) {
    std::lock_guard guard(lock_);
    if (count_ == 0) return false;
    recorded_call& entry = current();
    if (entry.state != recorded_call::outcome::running) return false;
    settle(entry);
    entry.step = step;
    entry.bytes_sent = bytes_sent;
    entry.ended_us = now_us();
    entry.state = recorded_call::outcome::failed;
    entry.failure = std::string(why);
    entry.culprit = culprit;
    return true;
  }

  // The calls kept, oldest first (a running call with its live step and wait).
  std::vector<recorded_call> calls() const {
    std::lock_guard guard(lock_);
    std::vector<recorded_call> kept;
    const std::uint64_t first = count_ > ring_.size() ? count_ - ring_.size() : 0;
    for (std::uint64_t number = first; number < count_; ++number) {
      kept.push_back(ring_[static_cast<std::size_t>(number % ring_.size())]);
      if (kept.back().state == recorded_call::outcome::running) settle(kept.back());
    }
    return kept;
  }

  // One JSON object per line: a header naming the rank, the communicator and why, then a
  // line per call.
  std::string json_lines(std::string_view reason) const {
    std::string text = "{\"record\":\"header\",\"world_rank\":" + std::to_string(world_rank_) +
                       ",\"rank\":" + std::to_string(rank_) + ",\"size\":" + std::to_string(size_) +
                       ",\"communicator\":" + std::to_string(context_) + ",\"reason\":\"" +
                       escaped(reason) + "\",\"at_us\":" + std::to_string(now_us()) + "}\n";
    for (const auto& call : calls()) {
      const auto& s = call.signature;
      text += "{\"record\":\"call\",\"world_rank\":" + std::to_string(world_rank_) +
              ",\"rank\":" + std::to_string(rank_) +
              ",\"communicator\":" + std::to_string(context_) +
              ",\"number\":" + std::to_string(call.number) + ",\"collective\":\"" +
              std::string(to_string(s.kind)) + "\",\"count\":" + std::to_string(s.count) +
              ",\"type\":\"" + escaped(s.type.data()) + "\",\"op\":\"" + escaped(s.op.data()) +
              "\",\"root\":" + std::to_string(s.root) + ",\"algorithm\":\"" +
              escaped(s.algorithm.data()) + "\",\"state\":\"" + state_name(call.state) +
              "\",\"step\":" + std::to_string(call.step) +
              ",\"waiting_for\":" + std::to_string(call.waiting_for) + ",\"waiting_for_world\":" +
              std::to_string(call.waiting_for >= 0
                                 ? world_ranks_[static_cast<std::size_t>(call.waiting_for)]
                                 : -1) +
              ",\"culprit\":" + std::to_string(call.culprit) +
              ",\"waiting_to_send\":" + (call.waiting_to_send ? "true" : "false") +
              ",\"bytes_sent\":" + std::to_string(call.bytes_sent) +
              ",\"started_us\":" + std::to_string(call.started_us) +
              ",\"ended_us\":" + std::to_string(call.ended_us) + ",\"failure\":\"" +
              escaped(call.failure) + "\"}\n";
    }
    return text;
  }

  // One line for stderr: the last call and where it is.
  std::string summary() const {
    const auto kept = calls();
    std::string text = "weft: flight recorder, rank " + std::to_string(world_rank_) +
                       " (communicator " + std::to_string(context_) + ", rank " +
                       std::to_string(rank_) + " of " + std::to_string(size_) + "): ";
    if (kept.empty()) return text + "no calls";
    const auto& last = kept.back();
    text += std::string(to_string(last.signature.kind)) + " #" + std::to_string(last.number) + " " +
            state_name(last.state) + " in step " + std::to_string(last.step);
    if (last.waiting_for >= 0) {
      text += std::string(", waiting to ") + (last.waiting_to_send ? "send to" : "receive from") +
              " rank " + std::to_string(world_ranks_[static_cast<std::size_t>(last.waiting_for)]);
    }
    if (kept.size() > 1) {
      const auto& before = kept[kept.size() - 2];
      text += "; before it " + std::string(to_string(before.signature.kind)) + " #" +
              std::to_string(before.number) + " " + state_name(before.state);
    }
    return text + " (WEFT_RECORDER_DIR=DIR keeps every record for weft-why)";
  }

  int world_rank() const { return world_rank_; }

 private:
  // CLOCK_MONOTONIC (steady_clock's, one clock for a host) read to the kernel's tick, a few
  // milliseconds: enough to tell who waited how long, at a tenth of a precise read's cost.
  static std::int64_t now_us() {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    return static_cast<std::int64_t>(now.tv_sec) * 1000000 + now.tv_nsec / 1000;
  }
  static const char* state_name(recorded_call::outcome state) {
    return state == recorded_call::outcome::running ? "running"
           : state == recorded_call::outcome::done  ? "done"
                                                    : "failed";
  }
  static std::string escaped(std::string_view text) {
    std::string out;
    for (const char c : text) {
      if (c == '"' || c == '\\') out += '\\';
      if (static_cast<unsigned char>(c) < 0x20) {
        out += ' ';
        continue;
      }
      out += c;
    }
    return out;
  }
  recorded_call& current() { return ring_[static_cast<std::size_t>((count_ - 1) % ring_.size())]; }
  // The live step and wait into `entry` (the running call's).
  void settle(recorded_call& entry) const {
    entry.step = step_.load(std::memory_order_relaxed);
    const int waiting = waiting_for_.load(std::memory_order_relaxed);
    entry.waiting_to_send = waiting <= -2;
    entry.waiting_for = waiting <= -2 ? -2 - waiting : waiting;
  }

  // A spin lock: the communicator's thread takes it twice a call, a writer of the records
  // (another thread, rarely) for as long as a copy takes.
  class spin_lock {
   public:
    void lock() noexcept {
      while (held_.exchange(true, std::memory_order_acquire)) {
        while (held_.load(std::memory_order_relaxed)) std::this_thread::yield();
      }
    }
    void unlock() noexcept { held_.store(false, std::memory_order_release); }

   private:
    std::atomic<bool> held_{false};
  };
  mutable spin_lock lock_;
  std::vector<recorded_call> ring_;
  std::vector<int> world_ranks_;
  std::uint64_t count_ = 0;
  std::atomic<int> step_{0};
  std::atomic<int> waiting_for_{-1};  // a peer; -2 - peer for a send's; -1: none
  int rank_;
  int world_rank_;
  int size_;
  std::uint32_t context_;
};

}  // namespace weft
