// weft/transport/shm/engine.hpp — what a shared-memory transport owns, and what every request
// goes through: post, wait, test, cancel. Meeting the peers is in shm/meeting.hpp, moving pieces
// in shm/sending.hpp and shm/receiving.hpp, what ends an operation that cannot finish in
// shm/failure.hpp; weft/transport/shm.hpp includes them together.
//
// A message goes through the receiver's FIFO from this rank in pieces of up to a slot's bytes,
// one send per peer at a time (so a message's pieces are consecutive in its FIFO). A send is
// complete once its last piece is published: its buffer is the caller's again. The receiver
// copies each piece into the matched receive, or combines it straight from the slot into the
// target of a reducing receive (recv_reduce); a piece that arrives before its receive is posted
// is kept aside. A send of at least lend_bytes from this rank's pool (shm/pool.hpp) is lent
// instead: one slot says where it is, the receiver copies or combines it straight from the pool,
// and the send completes when the receiver gives it back. A lent send dropped before that is
// withdrawn: the receiver, which checks after reading, fails its receive rather than keep bytes
// the caller may have changed. Progress is made by whichever call waits or tests: it polls, then
// sleeps on the rank's doorbell (a futex in its region) that every peer rings after it publishes or
// frees a slot, so more ranks than cores still progress and no thread is needed.
#pragma once

#include "weft/bootstrap/failure_watch.hpp"
#include "weft/bootstrap/store.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/detail/operation_pool.hpp"
#include "weft/detail/owning_process.hpp"
#include "weft/detail/request_handle.hpp"
#include "weft/error.hpp"
#include "weft/memory.hpp"
#include "weft/transport.hpp"
#include "weft/transport/shm/config.hpp"
#include "weft/transport/shm/pool.hpp"
#include "weft/transport/shm/region.hpp"
#include "weft/transport/shm/wiring.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace weft::shm::detail {

enum class status { idle, posted, done, failed };

struct operation {
  bool is_send = false;
  int peer = 0;
  tag_t tag = 0;
  std::byte* data = nullptr;  // the send's source or the receive's target
  std::size_t size = 0;
  std::size_t moved = 0;                           // bytes published (send) or received (receive)
  const std::byte* own = nullptr;                  // recv_reduce: this rank's operand
  const weft::detail::reducer* combine = nullptr;  // recv_reduce: how to combine
  std::vector<std::byte> kept;  // a send dropped part-way: the bytes it had yet to publish
  std::size_t kept_from = 0;    // where `kept` starts in the message
  std::uint64_t loan = 0;       // a send lent by reference: the loan's number (0: copied)
  bool declined = false;        // its loan was declined: it goes through the slots
  bool matched = false;         // a receive its incoming message was matched to
  bool orphan = false;          // its request is gone: released once the fabric is done with it
  status state = status::idle;
  errc code = errc::transport;
  std::string failure;
  int culprit = -1;  // a failure's lost rank (this transport's numbering), -1 when none
};

// A message that arrived before its receive was posted.
struct early_message {
  tag_t tag = 0;
  std::size_t total = 0;
  std::size_t received = 0;
  std::vector<std::byte> data;
  operation* claimed = nullptr;  // a receive posted while the rest was still arriving
  std::string failure;           // lent, and withdrawn by its sender or unreadable: why
  errc failure_code = errc::peer_lost;
};

// What this rank keeps per peer.
struct peer_state {
  std::byte* region = nullptr;      // the peer's region (this rank's own for itself)
  peer_link link;                   // its mapping and process (none for this rank)
  std::deque<operation*> sends;     // in order; the front one is streaming
  std::uint64_t published = 0;      // slots this rank published in its FIFO at the peer
  std::uint64_t consumed = 0;       // of them, how many the peer had consumed when last seen
  std::uint64_t loans = 0;          // messages this rank lent the peer
  std::deque<operation*> receives;  // posted, not yet matched, in order
  std::list<early_message> early;   // arrived before their receive, in order
  operation* incoming = nullptr;    // the receive the message now arriving goes to
  std::list<early_message>::iterator incoming_early;  // or the early message it fills
  bool arriving = false;                              // a message's pieces are arriving
  bool to_early = false;                              // ... into incoming_early
  std::size_t incoming_left = 0;  // pieces' bytes still to come of the message now arriving
  bool discarding = false;        // the message now arriving has no taker (a receive dropped)
  bool ended = false;             // its process ended (pidfd)
  bool closed = false;            // it closed its transport in order
};

class engine : public weft::detail::retiring<engine> {
 public:
  using operation_type = operation;

  engine(int rank, int size, bootstrap::store* meeting, const config& settings);
  ~engine() { close(); }
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  pool_memory& memory() { return memory_; }
  const config& settings() const { return settings_; }
  // How many peers' processes this rank watches through a pidfd.
  int watched() const;
  // How many peers' memory this rank can read by process_vm_readv (or directly: same process).
  int readable_peers() const { return readable_peers_; }
  // The messages that arrived before their receive and no receive has claimed
  // (weft::early_message_transport).
  std::size_t early_messages(std::span<weft::early_message> found) const {
    std::size_t count = 0;
    for (std::size_t peer = 0; peer < peers_.size(); ++peer) {
      for (const auto& m : peers_[peer].early) {
        if (m.claimed != nullptr) continue;
        if (count < found.size()) found[count] = {static_cast<int>(peer), m.tag};
        ++count;
      }
    }
    return count;
  }

  // Posts a send or a (reducing) receive (below the class).
  operation* post(bool is_send, int peer, std::byte* data, std::size_t size, tag_t tag,
                  const std::byte* own = nullptr, const weft::detail::reducer* combine = nullptr);
  operation* post_send(int peer, std::span<const std::byte> data, tag_t tag) {
    return post_request(true, peer, const_cast<std::byte*>(data.data()), data.size(), tag);
  }
  operation* post_recv(int peer, std::span<std::byte> data, tag_t tag) {
    return post_request(false, peer, data.data(), data.size(), tag);
  }
  operation* post_request(bool is_send, int peer, std::byte* data, std::size_t size, tag_t tag,
                          const std::byte* own = nullptr,
                          const weft::detail::reducer* combine = nullptr) {
    operation* op = post(is_send, peer, data, size, tag, own, combine);
    hand_out();
    return op;
  }

  bool wait(operation* op, deadline_clock::time_point deadline) {
    auto idle_since = deadline_clock::now();
    unsigned polls = 0;
    while (!finished(op)) {
      const auto now = deadline_clock::now();
      if (now >= deadline) {
        // A wait that only polls (a call in flight gives way between polls) still hears of a
        // peer that ended.
        if (!watch_processes_now_and_then(now)) return false;
        return finished(op);
      }
      if (progress()) {
        idle_since = now;
        continue;
      }
      if (++polls % 256 == 0) watch_peers();
      if (now - idle_since < spin_) {
        // A rank with nothing to do lets a crowded core's other rank run.
        std::this_thread::yield();
        continue;
      }
      sleep_until_rung(std::min(deadline, now + std::chrono::milliseconds(10)), op);
      watch_peers();
    }
    return true;
  }

  bool test(operation* op) {
    progress();
    watch_processes_now_and_then(deadline_clock::now());
    return finished(op);
  }

  // Moves what can move without blocking; throws peer_lost once the job has heard a rank is lost.
  void poll() {
    progress();
    const int lost = failures_ ? failures_->lost() : -1;
    if (lost >= 0) {
      throw error(errc::peer_lost,
                  who() + ": rank " + name(lost) + " is lost (" + failures_->why() + ")",
                  job_rank(lost));
    }
  }

  // The request is gone: a receive not yet matched and a send not yet begun are withdrawn; a
  // send part-way keeps its remaining bytes and goes on; a receive part-way reads the rest of
  // its message into nothing.
  void cancel(operation* op);

  // The communicator gave up on `culprit`: every rank of the job hears it through the store.
  void report_lost(int culprit, std::string_view reason) {
    if (failures_) failures_->report(culprit, reason);
    // (the peers that see this rank close before the notice reaches them read it in its region)
    if (culprit >= 0 && culprit < size_ && culprit != rank_ && first_lost_ < 0)
      first_lost_ = culprit;
    if (told_reason_.empty()) {
      told_reason_ = std::string(reason);
      told_culprit_ = culprit;
    }
  }

  void close();

 private:
  // shm/meeting.hpp
  void meet(bootstrap::store& meeting);
  void probe_memory_reads();

  // Below the class: moving what can move, completing, withdrawing, sleeping on the doorbell.
  bool progress();
  void complete(operation* op);
  void withdraw(operation* op);
  void sleep_until_rung(deadline_clock::time_point until, operation* op);

  // Sending (shm/sending.hpp).
  void start_send(operation* op);
  bool push(int peer);

  // Receiving (shm/receiving.hpp).
  void start_receive(operation* op);
  bool drain(int peer);
  void take_piece(int peer, const slot_header& piece, const std::byte* payload);
  void take_loan(int peer, const slot_header& piece);
  std::string read_loan(int peer, const loan& lent, std::size_t bytes, std::byte* target,
                        const std::byte* own, const weft::detail::reducer* combine, errc& code);
  operation* match(int peer, tag_t tag, std::size_t total, bool& posted);
  void deliver_early(operation* op, early_message& message);

  // Failure (shm/failure.hpp).
  bool finished(operation* op);
  void fail(operation* op, errc code, std::string why, int culprit = -1);
  // `closes`: also read whether a peer closed its transport (a poll-only wait asks the pidfds only:
  // a peer that gave up after a loss is read at a blocking wait, where the job's notice of the
  // loss has had its chance to come first).
  void watch_peers(bool closes = true);
  // For waits that only poll, and tests: watch_peers(false) at most once a millisecond; whether it
  // ran.
  bool watch_processes_now_and_then(deadline_clock::time_point now) {
    if (now - watched_at_ < std::chrono::milliseconds(1)) return false;
    watched_at_ = now;
    watch_peers(false);
    return true;
  }
  // The rank to blame when `closer` closed its transport while this rank waited for it.
  int root_of_close(int closer, int lost);
  // Why `root` counts as lost, for a message: its process ended, or the job's notice says so.
  std::string lost_text(int root) const;
  // What `closer` wrote in its region of why it gave up (empty: nothing, or it closed in order).
  std::string close_reason_of(int closer) const;
  // Rank `rank` as the job numbers it (config::job_ranks).
  int job_rank(int rank) const {
    const auto& job = settings_.job_ranks;
    return job.empty() ? rank : job[static_cast<std::size_t>(rank)];
  }
  std::string name(int rank) const { return std::to_string(job_rank(rank)); }
  std::string who() const { return "rank " + name(rank_); }
  // Which of this transport's ranks is the job's rank 0, which serves the store; -1 when none.
  int serving_rank() const {
    const auto& job = settings_.job_ranks;
    if (job.empty()) return 0;
    const auto found = std::find(job.begin(), job.end(), 0);
    return found == job.end() ? -1 : static_cast<int>(found - job.begin());
  }
  std::string direction(const operation* op) const {
    return who() + (op->is_send ? " could not send to rank " : " could not receive from rank ") +
           name(op->peer);
  }
  void release(operation* op) {
    op->state = status::idle;
    op->kept.clear();
    op->kept.shrink_to_fit();
    op->orphan = false;
    op->matched = false;
    op->loan = 0;
    op->declined = false;
    pool_.release(op);
  }

  int rank_;
  int size_;
  config settings_;
  layout shape_;
  mapping own_;                    // this rank's region
  std::unique_ptr<pool> buffers_;  // its pool's allocations
  pool_memory memory_;
  std::vector<peer_state> peers_;  // by rank, this rank's own included
  weft::detail::operation_pool<operation> pool_;
  std::unique_ptr<bootstrap::failure_watch> failures_;  // the job's notice, through the store
  weft::detail::owning_process owner_;
  std::chrono::microseconds spin_{0};  // settings_.spin, or less on a crowded host
  int readable_peers_ = 0;
  std::string told_reason_;  // what this rank told the job when it reported first_lost_
  int told_culprit_ = -1;    // whom it told of then (this rank: its own call threw, a revoke)
  deadline_clock::time_point watched_at_{};  // the last watch_peers() of a wait or test
  int first_lost_ =
      -1;  // the first rank an operation here failed for as lost; told to peers at close
  bool closed_ = false;
};

// Posts a send or a (reducing) receive: a fresh operation, then the send goes out
// (shm/sending.hpp) or the receive meets its message (shm/receiving.hpp).
inline operation* engine::post(bool is_send, int peer, std::byte* data, std::size_t size, tag_t tag,
                               const std::byte* own, const weft::detail::reducer* combine) {
  weft::detail::check_peer(rank_, size_, peer, is_send ? "send to" : "receive from");
  operation* op = pool_.acquire();
  op->is_send = is_send;
  op->peer = peer;
  op->tag = tag;
  op->data = data;
  op->size = size;
  op->moved = 0;
  op->own = own;
  op->combine = combine;
  op->matched = false;
  op->orphan = false;
  op->loan = 0;
  op->declined = false;
  op->state = status::posted;
  op->code = errc::transport;
  op->failure.clear();
  if (closed_) {
    fail(op, errc::transport, direction(op) + ": this rank closed its transport");
    return op;
  }
  if (is_send) {
    start_send(op);
  } else {
    start_receive(op);
  }
  return op;
}

inline bool engine::progress() {
  bool any = false;
  for (int peer = 0; peer < size_; ++peer) {
    if (peers_[static_cast<std::size_t>(peer)].region == nullptr) continue;
    any = drain(peer) || any;
    any = push(peer) || any;
  }
  return any;
}

inline void engine::complete(operation* op) {
  if (op->state != status::posted) return;
  op->state = status::done;
  if (op->orphan) release(op);
}

// Takes `op` out of every queue and arrival it is part of. A lent send not yet given back is
// withdrawn from the peer too (take_loan), before its buffer is the caller's again: the fence
// orders the mark before whatever the caller then writes.
inline void engine::withdraw(operation* op) {
  auto& state = peers_[static_cast<std::size_t>(op->peer)];
  if (op->is_send && op->loan != 0 && own_.base() != nullptr) {
    lent_counters* counters = lent_to(own_.base(), shape_, op->peer);
    if (counters->given_back.load(std::memory_order_acquire) < op->loan) {
      counters->withdrawn.store(op->loan, std::memory_order_seq_cst);
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
  }
  if (op->is_send) {
    state.sends.erase(std::remove(state.sends.begin(), state.sends.end(), op), state.sends.end());
    return;
  }
  state.receives.erase(std::remove(state.receives.begin(), state.receives.end(), op),
                       state.receives.end());
  if (state.incoming == op) {
    state.incoming = nullptr;
    state.discarding = true;
  }
  for (auto& message : state.early)
    if (message.claimed == op) message.claimed = nullptr;
}

inline void engine::sleep_until_rung(deadline_clock::time_point until, operation* op) {
  control_block* me = control_of(own_.base());
  const std::uint32_t seen = me->doorbell.load(std::memory_order_seq_cst);
  me->sleeping.store(1, std::memory_order_seq_cst);
  std::atomic_thread_fence(
      std::memory_order_seq_cst);  // the last look below sees what ring() did not wake
  if (!progress() && op->state == status::posted)
    futex_wait(me->doorbell, seen, until - deadline_clock::now());
  me->sleeping.store(0, std::memory_order_seq_cst);
}

inline void engine::cancel(operation* op) {
  if (take_back()) return;  // retired while this request lived
  if (op->state != status::posted) {
    release(op);
    return;
  }
  auto& state = peers_[static_cast<std::size_t>(op->peer)];
  if (op->loan != 0) {  // lent, not given back: withdrawn (the peer fails its receive)
    withdraw(op);
    release(op);
    return;
  }
  if (op->is_send && op->moved != 0) {
    // Part of it is in the peer's FIFO: the rest goes too, from a copy (the buffer is the
    // caller's again once the request is gone).
    const std::byte* rest =
        op->kept.empty() ? op->data + op->moved : op->kept.data() + (op->moved - op->kept_from);
    std::vector<std::byte> copy(rest, rest + (op->size - op->moved));
    op->kept = std::move(copy);
    op->kept_from = op->moved;
    op->orphan = true;
    return;
  }
  if (!op->is_send &&
      state.incoming == op) {  // part-way: the rest of the message is read into nothing
    state.incoming = nullptr;
    state.discarding = true;
  }
  withdraw(op);
  release(op);
}

}  // namespace weft::shm::detail
