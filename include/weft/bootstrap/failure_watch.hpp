// weft/bootstrap/failure_watch.hpp — a job-wide failure notice that does not depend on the data
// fabric: every rank learns, within moments, that a rank was lost, whichever transport it uses.
//
//   rank r reports (lost, why) ----claim----> <prefix>/failed <----get---- each rank's watch
//   rank r's process ends ---- its watch connection closes ----> the store claims it for r
//
// Each rank keeps one connection of its own to the job's bootstrap store, on which a thread
// waits for the key <prefix>/failed; when it is set, the watch hands the notice to the transport
// (the handler), whose waits then throw peer_lost naming the lost rank. The same connection is
// the rank's lifeline: the TCP store claims the key in this rank's name when the connection ends
// without the lifeline being withdrawn, as when the process is killed. A rank that sees a peer
// lost (its communicator's wait failed) claims the key with that rank and why, over a connection
// made for the purpose; the first report of a job wins, so every rank hears the same notice. A
// rank that closes in order withdraws its lifeline first (rank 0, whose store is about to go,
// also tells the watches that the job ended, and the store answers the watches still waiting
// that it closes in order). When the store itself goes without that, the watch reports the rank
// that serves it lost: rank 0 of the job, which a transport joining only some of the job's
// ranks (the node-local tier of weft::tiered) names by its own number, or not at all when that
// rank is not one of its own (its other tier hears of it). Over a file store there are no
// connections: reports still reach every rank, deaths are left to the transport.
//
// A transport starts its watch before it meets its peers, so that a rank killed during the
// start-up is a notice too: until the transport calls started(), a notice also ends the wait on
// the store the transport meets through (store::interrupt), and rethrow_if_lost turns what that
// wait threw into peer_lost naming the lost rank.
#pragma once

#include "weft/bootstrap/store.hpp"
#include "weft/error.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

namespace weft::bootstrap {

class failure_watch {
 public:
  // Called once, on the watch's thread, with the lost rank (this rank itself when the others
  // gave up on it) and why, after lost() and why() say so.
  using handler = std::function<void(int lost, const std::string& why)>;

  // Watches the job under `prefix` through new connections to `meeting`'s store; a store that
  // cannot make them leaves the watch idle (active() false). `serving` is the rank that serves
  // the store, numbered as `rank` is (-1: not one of these ranks). Until started(), a notice
  // also interrupts `meeting`, which must outlive the watch.
  // `named`: this rank as messages name it, where the job numbers it otherwise (the node-local
  // tier of weft::tiered: its rank in the job); -1: `rank`.
  failure_watch(store& meeting, std::string prefix, int rank, int serving = 0,
                handler on_failure = {}, int named = -1)
      : connect_(meeting.connector()),
        key_(std::move(prefix) + "/failed"),
        lifeline_(notice(rank, "its connection to the bootstrap store ended: the process of rank " +
                                   std::to_string(named >= 0 ? named : rank) +
                                   " exited, crashed or was killed")),
        rank_(rank),
        named_(named >= 0 ? named : rank),
        serving_(serving),
        on_failure_(std::move(on_failure)),
        meeting_(&meeting) {
    if (!connect_) return;
    // The store answered this rank a moment ago: a new connection that takes long means it has
    // gone (the job failed and rank 0 exited), not that it has yet to start.
    listening_ = connect_(deadline_clock::now() + connect_time);
    lifeline_set_ = listening_->set_on_close(key_, lifeline_);
    thread_ = std::thread([this] { listen(); });
  }

  failure_watch(const failure_watch&) = delete;
  failure_watch& operator=(const failure_watch&) = delete;

  ~failure_watch() {
    if (!thread_.joinable()) return;
    stopping_ = true;
    if (!heard_) {  // once the key is set (or the store gone), there is nothing to withdraw
      try {
        auto closing = connect_(deadline_clock::now() + report_time);
        if (lifeline_set_) closing->withdraw_on_close(key_, lifeline_);
        if (rank_ == serving_) closing->claim(key_, notice(-1, "the job ended"));
      } catch (const error&) {  // the store is gone already
      }
    }
    if (rank_ == serving_) {
      // The store goes with this process: first let the watches hear that the job ended (this
      // one hears it when the store has answered them all), or they would take its going for
      // rank 0's death.
      const auto until = deadline_clock::now() + report_time;
      while (!heard_ && deadline_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    listening_->interrupt();
    thread_.join();
  }

  bool active() const { return thread_.joinable(); }

  // The rank the job heard was lost (this rank when the others gave up on it), -1 while none.
  int lost() const { return lost_.load(std::memory_order_acquire); }
  // Why, once lost() is not -1.
  const std::string& why() const { return why_; }

  // The transport has met its peers: a notice no longer interrupts the store.
  void started() {
    std::lock_guard guard(starting_guard_);
    meeting_ = nullptr;
  }

  // During start-up: when the job heard of a lost rank (what `failure` is likely the result
  // of), throws peer_lost saying so, from `who` ("rank 1"); otherwise returns.
  void rethrow_if_lost(const std::string& who) const {
    const int rank = lost();
    if (rank < 0) return;
    if (const auto sizes = weft::detail::quoted_sizes(why_);
        !sizes.empty()) {  // no rank is lost: none can start
      throw error(errc::mismatch, who + " could not start: " + std::string(sizes), rank);
    }
    if (rank == rank_) {
      throw error(errc::peer_lost,
                  who + " could not start: the other ranks count it as lost (" + why_ + ")");
    }
    throw error(errc::peer_lost,
                who + " could not start: rank " + std::to_string(rank) + " is lost (" + why_ + ")");
  }

  // Called with the `failure` that ended the start-up, before rethrow_if_lost. When that is the
  // store's connection ending (peer_lost: rank 0 went, likely because it heard of a lost rank
  // and failed), the watch's own connection to the store carries the notice that came first, or
  // ends too: wait for it (bounded), so that this rank names the rank the job lost first. The
  // same when a peer refused or dropped this rank's connection (transport): that peer may have
  // failed for a reason the job's notice carries (world sizes that differ).
  void await_notice(const error& failure) const {
    if (failure.code() != errc::peer_lost && failure.code() != errc::transport) return;
    const auto deadline = deadline_clock::now() + report_time;
    while (active() && lost() < 0 && deadline_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  // Tells the watches of the job under `prefix` that rank `lost` (as they number it) is lost and
  // why, through `meeting` (a connection of the caller's): a watch that starts later hears it too.
  // The first report of a job wins.
  static void tell(store& meeting, const std::string& prefix, int lost, std::string_view why) {
    meeting.claim(prefix + "/failed", notice(lost, std::string(why)));
  }

  // This rank saw `lost` lost: every rank's watch hears it (the first report of a job wins).
  void report(int lost, std::string_view why) {
    if (!active() || stopping_ || heard_) return;  // the job has its notice already
    try {
      connect_(deadline_clock::now() + report_time)
          ->claim(key_, notice(lost, "reported by rank " + std::to_string(named_) + ": " +
                                         std::string(why)));
    } catch (const error&) {  // the store is gone: the others learn that from their own watch
    }
  }

 private:
  // How long a report or a withdrawal may spend reaching the store (it may be gone).
  static constexpr std::chrono::seconds report_time{2};
  // How long making the watch's own connection may take.
  static constexpr std::chrono::seconds connect_time{5};

  static std::string notice(int lost, const std::string& why) {
    return std::to_string(lost) + "|" + why;
  }

  void listen() {
    int lost = -1;
    std::string why;
    try {
      std::optional<std::string> value;
      while (!stopping_ && !value)
        value = listening_->get(key_, deadline_clock::now() + std::chrono::hours(24 * 365));
      if (!value) return;
      heard_ = true;
      const auto bar = std::min(value->find('|'), value->size());
      if (std::from_chars(value->data(), value->data() + bar, lost).ec != std::errc{}) return;
      why = value->substr(std::min(bar + 1, value->size()));
    } catch (const error& failure) {  // the store's connection ended
      heard_ = true;
      if (listening_->closed_in_order() || serving_ < 0) return;
      lost = serving_;
      why = "the bootstrap store rank 0 serves went away (" + std::string(failure.what()) +
            "): rank 0 exited, crashed or was killed";
    }
    if (lost < 0 || stopping_) return;
    why_ = std::move(why);
    lost_.store(lost, std::memory_order_release);
    {
      std::lock_guard guard(starting_guard_);
      if (meeting_ != nullptr) meeting_->interrupt();
    }
    if (on_failure_) on_failure_(lost, why_);
  }

  store::connector_type connect_;
  std::string key_;
  std::string lifeline_;
  int rank_;
  int named_;    // rank_ as messages name it
  int serving_;  // the rank that serves the store, in this watch's numbering; -1: none of its ranks
  handler on_failure_;
  std::unique_ptr<store> listening_;  // its thread's alone
  bool lifeline_set_ = false;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> heard_{false};  // the key was set, or the store went
  std::atomic<int> lost_{-1};       // set once, by the watch's thread, after why_
  std::string why_;
  std::mutex starting_guard_;
  store* meeting_;  // interrupted by a notice until started()
  std::thread thread_;
};

}  // namespace weft::bootstrap
