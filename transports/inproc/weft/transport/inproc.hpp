// weft/transport/inproc.hpp — the in-process transport: every rank is a thread of one process.
//
//   weft::inproc::run(4, [](weft::communicator<weft::inproc::transport>& comm) {
//     weft::allreduce(comm, std::span<float>(data), weft::sum{});
//   });
//
// Matching is rendezvous: a send and its receive meet in the receiver's mailbox, and the
// receiving rank copies the bytes once, straight from the send buffer into the receive buffer
// (or reduces them into place, for recv_reduce). The receiver does it, the next time it waits or
// tests, so each rank's thread moves its own incoming data, the work spreads evenly over the
// ranks, and sends posted after a receive are never held up by its copy. Nothing is buffered:
// a send completes only when its receive has taken the data, so algorithms that would deadlock
// on a transport without eager buffering deadlock here too, in tests.
//
// When a rank's function throws, `run` marks the world failed: every other rank's pending wait
// throws errc::peer_lost naming that rank at once, and `run` rethrows the first exception.
#pragma once

#include "weft/communicator.hpp"
#include "weft/communicator/rank_threads.hpp"
#include "weft/detail/operation_pool.hpp"
#include "weft/detail/request_handle.hpp"
#include "weft/error.hpp"
#include "weft/hosts.hpp"
#include "weft/memory.hpp"
#include "weft/transport.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace weft::inproc {

namespace detail {

// A send goes queued -> (matched, once a receive has it) -> done; a receive goes queued ->
// (arrived: its send is linked as `partner`, waiting for this rank to copy) -> done.
enum class state : int { idle, queued, arrived, matched, done, failed };

// One posted send or receive; nodes are pooled per rank and linked into a mailbox while queued.
struct operation {
  operation* next = nullptr;
  operation* prev = nullptr;
  int source = 0;       // sending rank
  int destination = 0;  // receiving rank
  tag_t tag = 0;
  const std::byte* send_data = nullptr;
  std::byte* recv_data = nullptr;
  std::size_t size = 0;
  bool is_send = false;
  std::atomic<state> status{state::idle};
  std::size_t other_size = 0;    // set when sizes did not match
  operation* partner = nullptr;  // an arrived receive's send
  // A reducing receive: recv_data = combine(own, incoming) instead of a copy.
  const weft::detail::reducer* combine = nullptr;
  const std::byte* own = nullptr;
};

class operation_list {
 public:
  void push_back(operation* node) {
    node->next = nullptr;
    node->prev = tail_;
    (tail_ ? tail_->next : head_) = node;
    tail_ = node;
  }
  void push_front(operation* node) {
    node->prev = nullptr;
    node->next = head_;
    (head_ ? head_->prev : tail_) = node;
    head_ = node;
  }
  operation* pop_front() {
    operation* node = head_;
    if (node != nullptr) erase(node);
    return node;
  }
  bool empty() const { return head_ == nullptr; }
  template <class Visit>
  void for_each(Visit&& visit) const {
    for (operation* node = head_; node != nullptr; node = node->next) visit(*node);
  }
  void erase(operation* node) {
    (node->prev ? node->prev->next : head_) = node->next;
    (node->next ? node->next->prev : tail_) = node->prev;
    node->next = node->prev = nullptr;
  }
  // The arrived receive whose send is `sent`, if it is still here.
  operation* find_partner(const operation* sent) const {
    for (operation* node = head_; node != nullptr; node = node->next) {
      if (node->partner == sent) return node;
    }
    return nullptr;
  }
  // First node from `source` with `tag`: messages of one pair and tag match in posting order.
  operation* find(int source, tag_t tag) const {
    for (operation* node = head_; node != nullptr; node = node->next) {
      if (node->source == source && node->tag == tag) return node;
    }
    return nullptr;
  }

 private:
  operation* head_ = nullptr;
  operation* tail_ = nullptr;
};

// Per-rank state. The mailbox holds receives posted by this rank, sends posted to it, and the
// receives whose send has arrived and waits for this rank to copy; the condition variable wakes
// this rank when one of its operations completes or a send arrives.
struct rank_state {
  std::mutex mutex;
  std::condition_variable progress;
  operation_list posted_receives;
  operation_list pending_sends;
  operation_list arrived;
  weft::detail::operation_pool<operation> pool;  // touched only by this rank's thread
  void notify() {
    std::lock_guard lock(mutex);
    progress.notify_all();
  }
};

}  // namespace detail

template <memory_space Memory = host_memory>
class world;

// One rank's endpoint into a world. Use it from that rank's thread only.
template <memory_space Memory = host_memory>
class basic_transport {
 public:
  static constexpr std::string_view tuning_key = "inproc";  // its row in the cost-model table

  // Cancels its operation when dropped before it completed (weft/detail/request_handle.hpp).
  using request = weft::detail::request_handle<basic_transport, detail::operation>;

  basic_transport(world<Memory>* shared, int rank) : world_(shared), rank_(rank) {}

  int rank() const { return rank_; }
  int size() const { return world_->size(); }
  Memory& memory() { return world_->memory(); }
  // The host layout the world was given (hosts as groups of threads), else null.
  const host_layout* hosts() const { return world_->hosts(); }

  request send(int peer, std::span<const std::byte> data, tag_t tag) {
    check_peer(peer, "send to");
    detail::operation* node = own().pool.acquire();
    node->source = rank_;
    node->destination = peer;
    node->tag = tag;
    node->send_data = data.data();
    node->size = data.size();
    node->is_send = true;
    auto& box = world_->state(peer);
    std::lock_guard lock(box.mutex);
    if (detail::operation* receive = box.posted_receives.find(rank_, tag)) {
      // The receiver is waiting for it: hand it over; the receiver copies.
      box.posted_receives.erase(receive);
      receive->partner = node;
      receive->status.store(detail::state::arrived, std::memory_order_relaxed);
      node->status.store(detail::state::matched, std::memory_order_relaxed);
      box.arrived.push_back(receive);
      box.progress.notify_all();
    } else {
      node->status.store(detail::state::queued, std::memory_order_relaxed);
      box.pending_sends.push_back(node);
    }
    return request(node, this);
  }

  request recv(int peer, std::span<std::byte> data, tag_t tag) {
    return post_receive(peer, data, tag, nullptr, nullptr);
  }

  // Called by the communicator when one of its waits fails: every rank's pending and later waits
  // throw, naming `culprit` (the world's failure, as when a rank's function throws in run()).
  void abort(int culprit, std::string_view reason) { world_->abort(culprit, std::string(reason)); }

  // The sends posted to this rank that no receive has matched (weft::early_message_transport).
  std::size_t early_messages(std::span<early_message> found) {
    auto& box = own();
    std::lock_guard lock(box.mutex);
    std::size_t count = 0;
    box.pending_sends.for_each([&](const detail::operation& sent) {
      if (count < found.size()) found[count] = {sent.source, sent.tag};
      ++count;
    });
    return count;
  }

  // The reducing receive (weft::reducing_transport): once the send has arrived, the receiving
  // rank combines (on its own thread, in copy_arrived) straight from the sender's buffer into
  // `target`.
  request recv_reduce(int peer, std::span<std::byte> target, std::span<const std::byte> mine,
                      tag_t tag, const weft::detail::reducer& combine) {
    return post_receive(peer, target, tag, &combine, mine.data());
  }

  bool test(request& operation) {
    copy_arrived();
    return finished(operation.operation(), world_->failed_rank(rank_));
  }

  bool wait(request& operation, deadline_clock::time_point deadline) {
    auto& box = own();
    std::unique_lock lock(box.mutex);
    while (true) {
      if (!box.arrived.empty()) {  // copy whatever has arrived for us, then look again
        lock.unlock();
        copy_arrived();
        lock.lock();
        continue;
      }
      if (finished(operation.operation(), world_->failed_rank(rank_))) return true;
      if (box.progress.wait_until(lock, deadline) == std::cv_status::timeout &&
          box.arrived.empty()) {
        return finished(operation.operation(), world_->failed_rank(rank_));
      }
    }
  }

 private:
  friend class world<Memory>;
  friend request;

  request post_receive(int peer, std::span<std::byte> data, tag_t tag,
                       const weft::detail::reducer* combine, const std::byte* mine) {
    check_peer(peer, "receive from");
    detail::operation* node = own().pool.acquire();
    node->combine = combine;
    node->own = mine;
    node->source = peer;
    node->destination = rank_;
    node->tag = tag;
    node->recv_data = data.data();
    node->size = data.size();
    node->is_send = false;
    auto& box = own();
    std::lock_guard lock(box.mutex);
    if (detail::operation* sent = box.pending_sends.find(peer, tag)) {
      // Copied at our next wait, not now: the sends this rank posts next go out first.
      box.pending_sends.erase(sent);
      node->partner = sent;
      node->status.store(detail::state::arrived, std::memory_order_relaxed);
      sent->status.store(detail::state::matched, std::memory_order_relaxed);
      box.arrived.push_back(node);
    } else {
      node->status.store(detail::state::queued, std::memory_order_relaxed);
      box.posted_receives.push_back(node);
    }
    return request(node, this);
  }

  detail::rank_state& own() { return world_->state(rank_); }

  // Copies (or reduces) every send that arrived for this rank's posted receives, and completes
  // both sides.
  void copy_arrived() {
    auto& box = own();
    detail::operation_list ready;
    {
      std::lock_guard lock(box.mutex);
      while (detail::operation* receive = box.arrived.pop_front()) {
        receive->status.store(detail::state::matched, std::memory_order_relaxed);
        ready.push_back(receive);
      }
    }
    while (detail::operation* receive = ready.pop_front()) {
      detail::operation* sent = receive->partner;
      receive->partner = nullptr;
      const int sender = sent->source;  // once delivered, the sender may reuse its node
      try {
        deliver(sent, receive);
      } catch (...) {
        // A user's reduction threw. This pair is over: the sender's buffer is read no more, so
        // its send is done (a sender cancelling it would otherwise wait for ever). The receives
        // not yet delivered go back to wait for this rank's next wait, or its cancel.
        sent->status.store(detail::state::done, std::memory_order_release);
        receive->status.store(detail::state::done, std::memory_order_release);
        world_->state(sender).notify();
        std::lock_guard lock(box.mutex);
        while (detail::operation* rest = ready.pop_front()) {
          rest->status.store(detail::state::arrived, std::memory_order_relaxed);
          box.arrived.push_back(rest);
        }
        throw;
      }
      world_->state(sender).notify();
    }
  }

  void check_peer(int peer, const char* what) const {
    weft::detail::check_peer(rank_, size(), peer, what);
  }

  // Copies the matched pair once and completes both.
  static void deliver(detail::operation* sent, detail::operation* receive) {
    if (sent->size != receive->size) {
      sent->other_size = receive->size;
      receive->other_size = sent->size;
      sent->status.store(detail::state::failed, std::memory_order_release);
      receive->status.store(detail::state::failed, std::memory_order_release);
      return;
    }
    if (receive->combine != nullptr) {
      (*receive->combine)({receive->recv_data, receive->size}, {receive->own, receive->size},
                          {sent->send_data, sent->size});
    } else if (sent->size != 0) {
      std::memcpy(receive->recv_data, sent->send_data, sent->size);
    }
    sent->status.store(detail::state::done, std::memory_order_release);
    receive->status.store(detail::state::done, std::memory_order_release);
  }

  // True when complete; throws when the operation failed or a peer failed before it completed.
  bool finished(detail::operation* node, int failed_rank) const {
    const detail::state status = node->status.load(std::memory_order_acquire);
    if (status == detail::state::done) return true;
    const int peer = node->is_send ? node->destination : node->source;
    if (status == detail::state::failed) {  // the two sides disagree on the size: calls that differ
      throw error(errc::mismatch,
                  "rank " + std::to_string(rank_) + (node->is_send ? " sent " : " expected ") +
                      std::to_string(node->size) + " bytes " + (node->is_send ? "to" : "from") +
                      " rank " + std::to_string(peer) + " but the peer's matching " +
                      (node->is_send ? "receive holds " : "send has ") +
                      std::to_string(node->other_size) + " bytes (tag " +
                      std::to_string(node->tag) + ")");
    }
    if (failed_rank >= 0) {
      throw error(errc::peer_lost, "rank " + std::to_string(rank_) + " stopped waiting on rank " +
                                       std::to_string(peer) + ": rank " +
                                       std::to_string(failed_rank) + " failed (" +
                                       world_->failure() + ")");
    }
    return false;
  }

  // Withdraws a node that has not completed, then returns it to the pool.
  void cancel(detail::operation* node) {
    auto& box = world_->state(node->is_send ? node->destination : rank_);
    while (true) {
      {
        std::lock_guard lock(box.mutex);
        const detail::state status = node->status.load(std::memory_order_acquire);
        if (status == detail::state::queued) {
          (node->is_send ? box.pending_sends : box.posted_receives).erase(node);
          break;
        }
        if (status == detail::state::arrived) {
          // Our receive had its send handed over but never copied it: give the send back,
          // ahead of later sends of the same stream, for the next receive to take.
          box.arrived.erase(node);
          detail::operation* sent = node->partner;
          node->partner = nullptr;
          sent->status.store(detail::state::queued, std::memory_order_relaxed);
          box.pending_sends.push_front(sent);
          break;
        }
        if (status != detail::state::matched) break;  // done, failed or idle
        if (node->is_send) {
          // Our send was handed to a receive that has not been copied yet: take it back, and
          // the receive waits for the next send again. (Waiting instead for the receiver, which
          // may itself be cancelling its own send to us, would wait for ever.)
          if (detail::operation* receive = box.arrived.find_partner(node)) {
            box.arrived.erase(receive);
            receive->partner = nullptr;
            receive->status.store(detail::state::queued, std::memory_order_relaxed);
            box.posted_receives.push_front(receive);
            break;
          }
        }
      }
      // Our send is in a receiver's hands: it copies it the next time it waits, or gives it
      // back if it withdraws its receive. Either happens within that rank's timeout.
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    node->status.store(detail::state::idle, std::memory_order_relaxed);
    own().pool.release(node);
  }

  world<Memory>* world_;
  int rank_;
};

using transport = basic_transport<host_memory>;
static_assert(weft::transport<transport>);
static_assert(weft::early_message_transport<transport>);
static_assert(weft::reducing_transport<transport>);

// The shared state of `size` thread-ranks.
template <memory_space Memory>
class world {
 public:
  explicit world(int size, Memory memory = {}) : memory_(std::move(memory)) {
    if (size < 1) {
      throw error(errc::invalid_argument,
                  "inproc world needs at least one rank, got " + std::to_string(size));
    }
    ranks_.reserve(static_cast<std::size_t>(size));
    for (int i = 0; i < size; ++i) ranks_.push_back(std::make_unique<detail::rank_state>());
  }

  // A world of hosts.size() ranks that says which of them share a host, as if the threads were
  // processes on several hosts: what hierarchical collectives are tested on.
  explicit world(const host_layout& hosts, Memory memory = {})
      : world(hosts.size(), std::move(memory)) {
    hosts_ = hosts;
  }
  const host_layout* hosts() const { return hosts_.empty() ? nullptr : &hosts_; }

  int size() const { return static_cast<int>(ranks_.size()); }
  Memory& memory() { return memory_; }
  basic_transport<Memory> endpoint(int rank) { return basic_transport<Memory>(this, rank); }

  // Records that `rank` failed; every other rank's wait then throws errc::peer_lost.
  void abort(int rank, const std::string& reason) {
    {
      std::lock_guard lock(failure_mutex_);
      if (failed_ >= 0) return;
      failure_ = reason;
      told_the_culprit_.store(!weft::detail::quoted_mismatch(reason).empty(),
                              std::memory_order_relaxed);
      failed_ = rank;
    }
    for (auto& state : ranks_) state->notify();
  }

  // The failed rank other than `self`, or -1; `self` too when the notice is of a mismatch (the
  // culprit made another call, and must hear of it as the others do).
  int failed_rank(int self) const {
    const int failed = failed_.load(std::memory_order_acquire);
    return failed == self && !told_the_culprit_.load(std::memory_order_relaxed) ? -1 : failed;
  }
  std::string failure() const {
    std::lock_guard lock(failure_mutex_);
    return failure_;
  }
  detail::rank_state& state(int rank) { return *ranks_[static_cast<std::size_t>(rank)]; }

 private:
  Memory memory_;
  host_layout hosts_;
  std::vector<std::unique_ptr<detail::rank_state>> ranks_;
  std::atomic<int> failed_{-1};
  std::atomic<bool> told_the_culprit_{
      false};  // the failure is a mismatch: its culprit hears it too
  mutable std::mutex failure_mutex_;
  std::string failure_;
};

// Runs fn on `size` threads, one per rank, and rethrows the first exception any rank threw (the
// others then fail with errc::peer_lost naming it). fn takes either the rank's transport or a
// communicator built over it.
template <memory_space Memory, class Function>
void run(world<Memory>& shared, Function&& fn, options settings = options::from_environment()) {
  weft::detail::run_rank_threads(
      shared.size(), "inproc::run",
      [&](int rank) {
        basic_transport<Memory> endpoint = shared.endpoint(rank);
        weft::detail::call_as_rank(fn, endpoint, settings);
      },
      [&](int rank, const std::string* failure) {
        if (failure != nullptr) shared.abort(rank, *failure);
      });
}

template <class Function>
void run(int size, Function&& fn, options settings = options::from_environment()) {
  world<host_memory> shared(size);
  run(shared, std::forward<Function>(fn), settings);
}

}  // namespace weft::inproc
