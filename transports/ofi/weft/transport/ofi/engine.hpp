// weft/transport/ofi/engine.hpp — what a libfabric transport owns and how a wait makes progress.
//
// The engine holds the fabric's objects (fabric, domain, completion queue, address vector,
// endpoint), the registration cache and the operations in flight, at one address while the
// provider holds pointers into its operations. This header declares it and defines what every
// request goes through (finished, wait, cancel); the rest is defined by concern in
// ofi/meeting.hpp (opening the endpoint, meeting the peers, closing), ofi/posting.hpp (posts,
// the backlog of posts the provider deferred, sends to self), ofi/completion.hpp (reading the
// completion queue) and ofi/failure.hpp (errors), which weft/transport/ofi.hpp includes
// together.
#pragma once

#include "weft/bootstrap/failure_watch.hpp"
#include "weft/bootstrap/store.hpp"
#include "weft/detail/operation_pool.hpp"
#include "weft/detail/owning_process.hpp"
#include "weft/detail/request_handle.hpp"
#include "weft/error.hpp"
#include "weft/memory.hpp"
#include "weft/transport.hpp"
#include "weft/transport/ofi/config.hpp"
#include "weft/transport/ofi/peer_watch.hpp"
#include "weft/transport/ofi/registration_cache.hpp"
#include "weft/transport/ofi/shm_region.hpp"
#include "weft/transport/ofi/wire.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace weft::ofi::detail {

class engine : public weft::detail::retiring<engine> {
 public:
  using operation_type = operation;

  // Opens an endpoint on the chosen provider and meets the other ranks through `meeting` (not
  // needed for one rank); ofi/meeting.hpp.
  engine(int rank, int size, bootstrap::store* meeting, const config& settings);
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;
  ~engine() {
    close();
    if (info_ != nullptr) fi_freeinfo(info_);
  }
  // Says farewell to every peer, then closes the fabric's objects, once (ofi/meeting.hpp).
  void close();

  // Posts for a request (counted until the request is dropped: cancel).
  operation* post_send(int peer, std::span<const std::byte> data, tag_t tag) {
    return post_request(true, peer, const_cast<std::byte*>(data.data()), data.size(), tag);
  }
  operation* post_recv(int peer, std::span<std::byte> data, tag_t tag) {
    return post_request(false, peer, data.data(), data.size(), tag);
  }
  operation* post_request(bool is_send, int peer, std::byte* data, std::size_t size, tag_t tag) {
    operation* op = post(is_send, peer, data, size, tag);
    hand_out();
    return op;
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  host_memory& memory() { return memory_; }
  const fi_info& info() const { return *info_; }
  std::string provider_name() const {
    return info_ && info_->fabric_attr->prov_name ? info_->fabric_attr->prov_name
                                                  : settings_.provider;
  }
  std::size_t max_message() const { return max_message_; }
  bool registers_memory() const { return registrations_.needed(); }
  std::uint64_t registrations_made() const { return registrations_.made(); }
  const config& settings() const { return settings_; }

  // The communicator gave up on `culprit`: closing skips the farewell, and every rank of the job
  // hears of it through the bootstrap store (weft/bootstrap/failure_watch.hpp).
  void report_lost(int culprit, std::string_view reason) {
    peer_failed_ = true;
    if (failures_) failures_->report(culprit, reason);
  }

  // The tag of the oldest message from `peer` that arrived before its receive and matches `tag`
  // outside `ignore` (FI_PEEK; ofi/posting.hpp); nullopt when none, or when the provider cannot
  // peek or folds tags (then never again).
  std::optional<tag_t> peek(int peer, tag_t tag, tag_t ignore);

  // Posts a send or receive (ofi/posting.hpp).
  operation* post(bool is_send, int peer, std::byte* data, std::size_t size, tag_t tag);

  // Reads the completion queue once (and retries deferred posts); true if anything happened
  // (ofi/completion.hpp).
  bool progress();

  // True once done; throws when the operation cannot finish (a peer process that has ended
  // cannot finish it: what it delivered before was read by the progress before this call).
  bool finished(operation* op) {
    // The job heard that `lost` was lost (ofi/meeting.hpp's failure watch). When the others gave
    // up on this rank, what completed fails too: they count the call as failed.
    int lost = job_lost();
    if (lost == rank_ && (op->state == status::posted || op->state == status::done)) {
      op->state = status::posted;
      fail(op, errc::peer_lost, lost_message(op, lost), lost);
    }
    if (op->state == status::posted && peer_gone(op->peer)) {
      progress();
      if (op->state == status::posted) fail_gone(op);
    }
    if (lost >= 0 && op->state == status::posted)
      fail(op, errc::peer_lost, lost_message(op, lost), lost);
    if (op->state == status::done) return true;
    if (op->state == status::failed) throw error(op->code, op->failure, op->culprit);
    return false;
  }

  bool wait(operation* op, deadline_clock::time_point deadline) {
    auto idle_since = deadline_clock::now();
    while (!finished(op)) {
      const auto now = deadline_clock::now();
      if (now >= deadline) return false;
      if (progress()) {
        idle_since = now;
        continue;
      }
      // Manual progress: keep reading the queue; past the spin, nap briefly between reads.
      if (now - idle_since < settings_.spin) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
    return true;
  }

  bool test(operation* op) {
    progress();
    return finished(op);
  }

  // Reads the completion queue once; throws peer_lost once the job has heard a rank is lost.
  void poll() {
    progress();
    if (const int lost = job_lost(); lost >= 0) {
      throw error(errc::peer_lost,
                  who() + ": rank " + std::to_string(lost) + " is lost (" + failures_->why() + ")",
                  lost);
    }
  }

  // The request is gone: take the operation back from the fabric, or let it finish on the
  // transport's own where its buffer is only ever read.
  void cancel(operation* op) {
    // Retired while this request lived: the endpoint no longer touches its buffer.
    if (take_back()) return;
    switch (op->state) {
      case status::idle:
      case status::done:
        release(op);
        return;
      case status::failed:
        if (op->completed < op->pieces.size()) break;  // the fabric still holds part of it
        release(op);
        return;
      case status::queued: {  // a self operation still waiting for its match
        auto& list = op->is_send ? self_sends_ : self_receives_;
        list.erase(std::remove(list.begin(), list.end(), op), list.end());
        release(op);
        return;
      }
      case status::posted:
        break;
    }
    // The endpoint was closed to take back another receive's buffer: the fabric holds nothing.
    if (ep_ == nullptr) {
      withdraw_queued(op);
      release(op);
      return;
    }
    // Posted to the fabric: take back what is still queued, cancel the rest, and wait (bounded)
    // until the fabric lets go of the buffer.
    if (withdraw_queued(op)) {
      --in_flight_;
      release(op);
      return;
    }
    for (auto& p : op->pieces) {
      if (p.posted) {
        provider_call call(calls_);
        fi_cancel(&ep_->fid, &p.context);
      }
    }
    op->orphan = true;
    // A receive's cancellation usually completes at once; a send is not waited for.
    const auto limit = deadline_clock::now() +
                       (op->is_send ? std::chrono::milliseconds(0) : std::chrono::seconds(2));
    progress();
    while (op->orphan && op->state != status::idle && deadline_clock::now() < limit) {
      if (op->completed == op->pieces.size()) break;
      progress();
    }
    if (op->state == status::idle) return;  // completed and released by progress()
    if (op->completed == op->pieces.size()) {
      release(op);
      return;
    }
    // The provider still holds it: most cannot cancel a send in flight. It stays an orphan,
    // freed if it ever completes. A send's buffer is only ever read, and by now no receive can
    // match it (the communicator that posted it has failed, and tags are never reused).
    if (op->is_send) return;
    // A receive the provider would not cancel must not be filled later: close the endpoint,
    // which ends every use of every buffer. This rank's transport is finished.
    broken_ = true;
    broken_reason_ = who() +
                     "'s fabric endpoint was closed to take back the buffer of an abandoned "
                     "receive that provider '" +
                     provider_name() + "' would not cancel; build a new transport";
    {
      std::lock_guard closing(mapping_lock());
      fi_close(&ep_->fid);
    }
    ep_ = nullptr;
    pool_.for_each([this](operation& owned) {
      if (owned.state == status::posted) fail(&owned, errc::transport, broken_reason_);
    });
    in_flight_ = 0;
    release(op);
  }

 private:
  // How long a call into the provider may stay stuck after a peer died before the process ends.
  static constexpr std::chrono::seconds stuck_limit{30};

  // Opening, meeting and parting (ofi/meeting.hpp).
  void open();
  void meet(bootstrap::store& meeting);
  void exchange_addresses(bootstrap::store& meeting);
  void forget_region_of(bootstrap::store& meeting, int lost);
  void farewell();
  std::string endpoint_name() const;
  fi_addr_t own_address_entry();

  // Posting (ofi/posting.hpp).
  std::uint64_t fabric_tag(tag_t tag) const;
  void post_self(operation* op);
  void drain_backlog();
  bool withdraw_queued(operation* op);

  // Completions (ofi/completion.hpp).
  void complete(piece* p, const fi_cq_tagged_entry* entry);

  // Failures (ofi/failure.hpp).
  void read_error();
  void fail(operation* op, errc code, const std::string& why, int culprit = -1);
  [[noreturn]] void fail_call(const char* what, int code) const;
  void check(const char* what, int code) const {
    if (code != 0) fail_call(what, code);
  }
  std::string size_mismatch(std::size_t expected, std::size_t got, tag_t tag) const;
  bool peer_gone(int peer) const { return watch_ && watch_->gone(peer); }
  // The rank the job's failure notice names, -1 while none.
  int job_lost() const { return failures_ ? failures_->lost() : -1; }
  // op's peer process ended. It may have given up after another rank was lost, and closed: the
  // job's notice then names the rank lost first (a rank that dies has one claimed in its name),
  // waited for a moment when it has not come yet.
  void fail_gone(operation* op) {
    const int lost = job_lost() >= 0 ? job_lost() : await_job_notice();
    if (lost < 0) {
      fail(op, errc::peer_lost, gone_message(op), op->peer);
    } else {
      fail(op, errc::peer_lost, lost_message(op, lost), lost);
    }
  }
  // The job's notice, waited for a moment (bounded): what a peer process that ended says next.
  int await_job_notice() const {
    if (!failures_ || !failures_->active()) return -1;
    const auto until = deadline_clock::now() + std::chrono::milliseconds(500);
    while (failures_->lost() < 0 && deadline_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return failures_->lost();
  }
  std::string gone_message(const operation* op) const;
  std::string lost_message(const operation* op, int lost) const;

  std::string who() const { return "rank " + std::to_string(rank_); }

  void release(operation* op) {
    registrations_.release(op->memory);
    op->memory = nullptr;
    op->state = status::idle;
    op->pieces.clear();
    op->completed = 0;
    op->orphan = false;
    op->cancelling = false;
    op->failure.clear();
    op->partner = nullptr;
    pool_.release(op);
  }

  weft::detail::owning_process owner_;
  int rank_ = 0;
  int size_ = 1;
  config settings_;
  host_memory memory_;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
  std::vector<fi_addr_t> addresses_;  // by rank
  std::size_t max_message_ = 0;
  std::uint64_t tag_mask_ = ~std::uint64_t{0};
  registration_cache registrations_;
  std::deque<piece*> backlog_;  // posts that met -FI_EAGAIN, in order
  weft::detail::operation_pool<operation> pool_;
  std::deque<operation*> self_sends_, self_receives_;
  std::size_t in_flight_ = 0;  // operations the fabric still holds
  bool ready_ = false;         // every peer's address is in the address vector
  bool peer_failed_ = false;   // an operation failed or the communicator gave up on a peer
  bool broken_ = false;  // the endpoint was closed to take back a buffer: nothing works anymore
  std::string broken_reason_;
  std::vector<std::string> peer_names_;                 // each rank's endpoint name, as published
  bool closed_ = false;                                 // close() has run
  std::unique_ptr<bootstrap::failure_watch> failures_;  // the job's failure notice
  call_tracker calls_;                                  // calls into the provider, for the watcher
  std::unique_ptr<peer_watch> watch_;                   // peer processes on this host
  // peek's one request in the provider: its context, and what its completion said.
  enum class peek_state { idle, posted, found, none };
  piece peek_piece_;
  peek_state peek_state_ = peek_state::idle;
  tag_t peeked_tag_ = 0;
  bool can_peek_ = false;  // set by open() for the providers that can
};

}  // namespace weft::ofi::detail
