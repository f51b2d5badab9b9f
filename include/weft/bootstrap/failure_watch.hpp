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
// also tells the watches that the job ended). When the store itself goes without that, the
// watch reports rank 0, which serves it, lost. Over a file store there are no connections:
// reports still reach every rank, deaths are left to the transport.
#pragma once

#include "weft/bootstrap/store.hpp"
#include "weft/error.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

namespace weft::bootstrap {

class failure_watch {
 public:
  // Called once, on the watch's thread, with the lost rank (this rank itself when the others
  // gave up on it) and why.
  using handler = std::function<void(int lost, const std::string& why)>;

  // Watches the job under `prefix` through new connections to `meeting`'s store; a store that
  // cannot make them leaves the watch idle (active() false).
  failure_watch(const store& meeting, std::string prefix, int rank, handler on_failure)
      : connect_(meeting.connector()),
        key_(std::move(prefix) + "/failed"),
        lifeline_(notice(rank, "its connection to the bootstrap store ended: the process of rank " +
                                   std::to_string(rank) + " exited, crashed or was killed")),
        rank_(rank),
        on_failure_(std::move(on_failure)) {
    if (!connect_) return;
    listening_ = connect_(deadline_clock::now() + std::chrono::seconds(30));
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
        if (rank_ == 0) closing->claim(key_, notice(-1, "the job ended"));
      } catch (const error&) {  // the store is gone already
      }
    }
    if (rank_ == 0) {
      // The store goes with this process: first let the watches hear that the job ended (this
      // one hears it when the store has answered them all), or they would take its going for
      // rank 0's death.
      const auto until = deadline_clock::now() + report_time;
      while (!heard_ && deadline_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    listening_->interrupt();
    thread_.join();
  }

  bool active() const { return thread_.joinable(); }

  // This rank saw `lost` lost: every rank's watch hears it (the first report of a job wins).
  void report(int lost, std::string_view why) {
    if (!active() || stopping_ || heard_) return;  // the job has its notice already
    try {
      connect_(deadline_clock::now() + report_time)->claim(key_, notice(lost, "reported by rank " + std::to_string(rank_) + ": " + std::string(why)));
    } catch (const error&) {  // the store is gone: the others learn that from their own watch
    }
  }

 private:
  // How long a report or a withdrawal may spend reaching the store (it may be gone).
  static constexpr std::chrono::seconds report_time{2};

  static std::string notice(int lost, const std::string& why) { return std::to_string(lost) + "|" + why; }

  void listen() {
    int lost = -1;
    std::string why;
    try {
      std::optional<std::string> value;
      while (!stopping_ && !value) value = listening_->get(key_, deadline_clock::now() + std::chrono::hours(24 * 365));
      if (!value) return;
      heard_ = true;
      const auto bar = std::min(value->find('|'), value->size());
      if (std::from_chars(value->data(), value->data() + bar, lost).ec != std::errc{}) return;
      why = value->substr(std::min(bar + 1, value->size()));
    } catch (const error& failure) {  // the store's connection ended
      heard_ = true;
      lost = 0;
      why = "the bootstrap store rank 0 serves went away (" + std::string(failure.what()) +
            "): rank 0 exited, crashed or was killed";
    }
    if (lost >= 0 && !stopping_) on_failure_(lost, why);
  }

  store::connector_type connect_;
  std::string key_;
  std::string lifeline_;
  int rank_;
  handler on_failure_;
  std::unique_ptr<store> listening_;  // its thread's alone
  bool lifeline_set_ = false;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> heard_{false};  // the key was set, or the store went
  std::thread thread_;
};

}  // namespace weft::bootstrap
