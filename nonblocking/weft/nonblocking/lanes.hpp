// weft/nonblocking/lanes.hpp — how a communicator runs several calls at once
// (weft/nonblocking.hpp).
//
// Every call issued in flight runs the blocking call's code, unchanged, on a lane: a fiber with a
// communicator of its own (own tag space, taken in issue order, so every rank gives the same call
// the same one; own scratch and requests). A wait on a lane polls its request and, while it is
// not done, gives way: the fiber suspends and whoever drives the lanes resumes the next one. The
// driver is the caller's thread inside test() and wait() (and a blocking call, which completes the
// calls in flight first), or, with options::progress_thread, a thread of the communicator's own.
//
// A pass resumes every waiting call once, oldest first. When a pass moves no call forward, the
// oldest blocks in its transport's wait: until its deadline when it is the only call in flight,
// else for a short slice, so that the others are polled again soon. Calls complete in the order
// issued: a handle is done once its call and every call before it are. When a call fails, the
// calls issued after it are cancelled (their waits throw, so they unwind and withdraw what they
// posted) and fail with the communicator's refusal; later issues are refused the same way.
#pragma once

#include "weft/call.hpp"
#include "weft/communicator/in_flight.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/error.hpp"
#include "weft/nonblocking/fiber.hpp"
#include "weft/transport.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace weft::detail {

template <class Comm>
class lanes;

// What a handle sees of its call.
template <class Comm>
struct call_outcome {
  std::atomic<bool> done{false};  // the call and every call issued before it completed
  report result;
  std::exception_ptr failure;
  lanes<Comm>* driver = nullptr;  // the lanes that run it (read only while not done)
  bool in_open_group = false;     // recorded by a weft::group that has not ended yet
  bool fused = false;             // set by weft::group: this call ran inside a fused one
};

// What an in-place allreduce offers weft::group for fusing with others of its kind.
template <class Comm>
struct fusion_offer {
  const void* kind = nullptr;  // one address per element type, op and algorithm asked for
  bytes data;                  // the call's data, reduced in place
  // The algorithm a fused call may run with and still give every call the bits it would get on
  // its own (automatic's choice for this call's size, if that one keeps them), else empty.
  std::function<std::string_view(Comm&)> keeps_bits_with;
  // Runs the allreduce on `packed` (the fused calls' data, one after another) with that algorithm.
  std::function<report(Comm&, bytes packed, std::string_view algorithm)> run_packed;
};

// A call weft::group recorded, to start when the group ends.
template <class Comm>
struct recorded_call {
  std::string name;
  std::function<report(Comm&)> work;
  std::shared_ptr<call_outcome<Comm>> result;
  std::shared_ptr<const fusion_offer<Comm>> offer;  // null: not fusable
};

template <class Comm>
class lanes final : public calls_in_flight {
 public:
  using job = std::function<report(Comm&)>;
  using outcome = call_outcome<Comm>;

  // How long the oldest call blocks in a pass that moved nothing, while others are in flight.
  static constexpr std::chrono::microseconds slice{100};
  // Each lane's stack (address space; the pages are touched as used), with a guard page below.
  static constexpr std::size_t stack_bytes = std::size_t{1} << 20;

  explicit lanes(bool progress_thread) {
    if (progress_thread) progress_ = std::thread([this] { progress_loop(); });
  }

  lanes(const lanes&) = delete;
  lanes& operator=(const lanes&) = delete;

  // Cancels the calls still in flight (they fail with "the communicator was destroyed").
  ~lanes() override {
    {
      std::unique_lock lock(mutex_);
      stopping_ = true;
      changed_.notify_all();
    }
    if (progress_.joinable()) progress_.join();
    std::unique_lock lock(mutex_);
    for (auto& running : flight_) {
      running.cancel_code = errc::transport;
      running.cancel_reason = "the communicator was destroyed with the call in flight";
      cancel(running);
    }
    while (!flight_.empty()) retire_front();
    for (auto& idle : idle_) idle->stop();
  }

  // Issues `work` (the blocking call of `name` on the lane's communicator) and runs it until its
  // first wait gives way. An argument error is thrown here, and the call is not in flight; any
  // other failure stays with the call and is thrown by its handle.
  std::shared_ptr<outcome> issue(Comm& parent, std::string_view name, job work,
                                 std::shared_ptr<const fusion_offer<Comm>> offer = nullptr) {
    auto result = std::make_shared<outcome>();
    result->driver = this;
    {
      std::unique_lock lock(mutex_);
      if (groups_open_ > 0) {
        result->in_open_group = true;
        recorded_.push_back(
            recorded_call<Comm>{std::string(name), std::move(work), result, std::move(offer)});
        return result;
      }
    }
    start(parent, name, std::move(work), {result});
    return result;
  }

  // weft::group: while a group is open (groups nest), issue() records calls instead of starting
  // them; the outermost group's end takes what was recorded and starts it (start()).
  void open_group() {
    std::unique_lock lock(mutex_);
    ++groups_open_;
  }
  // A group is open: calls issued now are recorded (and only then worth offering for fusion).
  bool recording() const {
    std::unique_lock lock(mutex_);
    return groups_open_ > 0;
  }
  // The calls recorded, once the outermost group closes; else none.
  std::vector<recorded_call<Comm>> close_group() {
    std::unique_lock lock(mutex_);
    if (--groups_open_ > 0) return {};
    return std::exchange(recorded_, {});
  }

  // Starts `work` as one call in flight whose end completes every outcome of `results` (more than
  // one: a fused call). Throws an argument error (the outcomes then untouched), as issue() does.
  void start(Comm& parent, std::string_view name, job work,
             std::vector<std::shared_ptr<outcome>> results) {
    std::unique_lock lock(mutex_);
    const std::uint32_t context = parent.next_lane_context();
    if (failure_) {
      throw error(failure_->code(), "rank " + std::to_string(parent.rank()) + " refuses " +
                                        std::string(name) + ": " + failed_earlier());
    }
    std::unique_ptr<lane> taken;
    if (idle_.empty()) {
      taken = std::make_unique<lane>(parent);
    } else {
      taken = std::move(idle_.back());
      idle_.pop_back();
    }
    taken->comm.become_lane(parent, context, taken.get());
    for (auto& result : results) result->in_open_group = false;
    flight_.push_back(
        running_call{std::move(taken), std::move(work), std::move(results), {}, errc::transport});
    running_call& issued = flight_.back();
    issued.runner->start(&issued.work);
    issued.runner->resume(deadline_clock::time_point::min());
    if (issued.runner->idle() && issued.runner->failure() &&
        is_argument_error(issued.runner->failure())) {
      auto thrown = issued.runner->failure();
      idle_.push_back(std::move(issued.runner));
      flight_.pop_back();
      std::rethrow_exception(thrown);
    }
    after_pass();
    changed_.notify_all();
  }

  // Moves every call in flight forward once, without blocking; true once `call` is done.
  bool test(outcome& call) {
    refuse_if_recorded(call);
    if (progress_.joinable()) return call.done.load(std::memory_order_acquire);
    std::unique_lock lock(mutex_);
    if (!call.done.load(std::memory_order_relaxed)) pass(deadline_clock::time_point::min());
    return call.done.load(std::memory_order_relaxed);
  }

  // Drives the calls in flight until `call` is done (true) or `deadline` passes (false).
  bool wait(outcome& call, deadline_clock::time_point deadline) {
    refuse_if_recorded(call);
    std::unique_lock lock(mutex_);
    if (progress_.joinable()) {
      return changed_.wait_until(lock, deadline,
                                 [&] { return call.done.load(std::memory_order_relaxed); });
    }
    while (!call.done.load(std::memory_order_relaxed)) {
      const auto now = deadline_clock::now();
      if (now >= deadline) return false;
      pass(flight_.size() == 1 ? deadline : std::min(deadline, now + slice));
    }
    return true;
  }

  void drain() override {
    std::unique_lock lock(mutex_);
    if (progress_.joinable()) {
      changed_.wait(lock, [&] { return flight_.empty(); });
      return;
    }
    while (!flight_.empty()) {
      pass(deadline_clock::now() + (flight_.size() == 1 ? std::chrono::hours(24) : slice));
    }
  }

  const error* failure() const override {
    std::unique_lock lock(mutex_);
    return failure_ ? &*failure_ : nullptr;
  }

 private:
  // A fiber and the communicator the calls it runs use; reused from call to call.
  class lane final : public lane_yield {
   public:
    explicit lane(Comm& parent)
        : comm(parent.underlying_transport(), parent.settings(), 0),
          fiber_(stack_bytes, [this] { loop(); }) {}

    ~lane() { stop(); }

    Comm comm;

    void start(job* work) {
      work_ = work;
      failure_ = nullptr;
      result_ = {};
      cancel_ = false;
      idle_ = false;
      advanced_ = 0;
    }

    // Runs the lane until it gives way again or its call ends. `until`: how long the wait it is
    // in may block on its own request.
    void resume(deadline_clock::time_point until) {
      until_ = until;
      fiber_.resume();
    }

    void cancel() { cancel_ = true; }
    void stop() {
      if (fiber_.finished()) return;
      stopping_ = true;
      fiber_.resume();
    }

    bool idle() const { return idle_; }
    std::uint64_t advanced() const { return advanced_; }
    std::exception_ptr failure() const { return failure_; }
    const report& result() const { return result_; }

    deadline_clock::time_point suspend(bool advanced) override {
      if (advanced) ++advanced_;
      fiber_.suspend();
      if (cancel_) throw call_cancelled{};
      return until_;
    }

   private:
    void loop() {
      for (;;) {
        if (stopping_) return;
        try {
          result_ = (*work_)(comm);
        } catch (...) {  // call_cancelled included
          failure_ = std::current_exception();
        }
        idle_ = true;
        ++advanced_;
        fiber_.suspend();
      }
    }

    job* work_ = nullptr;
    report result_;
    std::exception_ptr failure_;
    deadline_clock::time_point until_{};
    std::uint64_t advanced_ = 0;
    bool cancel_ = false;
    bool idle_ = true;
    bool stopping_ = false;
    worker_fiber fiber_;  // last: its body uses the members above
  };

  struct running_call {
    std::unique_ptr<lane> runner;
    job work;
    std::vector<std::shared_ptr<outcome>> results;  // more than one: calls fused into this one
    std::string cancel_reason;  // set when cancelled: why, as the call's failure says
    errc cancel_code = errc::transport;
  };

  void refuse_if_recorded(const outcome& call) {
    std::unique_lock lock(mutex_);
    if (call.in_open_group) {
      throw error(
          errc::invalid_argument,
          "a call of a weft::group was waited for (or tested) before the group ended; it starts "
          "when the group ends, so waiting for it inside the group would never return");
    }
  }

  // Why calls are refused and cancelled once a call failed (failure_ set), as the communicator says
  // it.
  std::string failed_earlier() const {
    return "this communicator failed earlier (" + strip_prefix(failure_->what()) +
           "); build a new communicator";
  }

  static bool is_argument_error(const std::exception_ptr& thrown) {
    try {
      std::rethrow_exception(thrown);
    } catch (const error& failure) {
      return failure.code() == errc::invalid_argument;
    } catch (...) {
      return false;
    }
  }

  // One pass over the calls in flight (the mutex held): each waiting call resumes once, oldest
  // first; if none moved, the oldest may block until `block_until`.
  void pass(deadline_clock::time_point block_until) {
    std::uint64_t before = 0;
    for (auto& running : flight_) before += running.runner->advanced();
    for (auto& running : flight_) {
      if (!running.runner->idle()) running.runner->resume(deadline_clock::time_point::min());
    }
    std::uint64_t after = 0;
    for (auto& running : flight_) after += running.runner->advanced();
    if (after == before && block_until > deadline_clock::now()) {
      for (auto& running : flight_) {
        if (running.runner->idle()) continue;
        running.runner->resume(block_until);
        break;
      }
    }
    after_pass();
  }

  // Records a failure (cancelling the calls issued after it) and retires the finished calls at
  // the front, in order. Failures are taken in issue order too: a call that failed while one issued
  // before it still runs waits for that one, so that when both fail (a lost peer fails every call
  // waiting on it, in whatever order the passes see it) the earlier is the communicator's failure
  // and the later says it was cancelled, on every rank alike.
  void after_pass() {
    for (std::size_t i = 0; i < flight_.size() && !failure_; ++i) {
      auto& running = flight_[i];
      if (!running.runner->idle()) break;
      if (!running.runner->failure()) continue;
      try {
        std::rethrow_exception(running.runner->failure());
      } catch (const error& failed) {
        failure_.emplace(failed);
      } catch (const call_cancelled&) {
        continue;
      } catch (const std::exception& failed) {
        failure_.emplace(errc::transport, failed.what());
      } catch (...) {
        failure_.emplace(errc::transport,
                         "a call in flight threw something that is not an exception");
      }
      for (std::size_t j = i + 1; j < flight_.size(); ++j) {
        flight_[j].cancel_code = failure_->code();
        flight_[j].cancel_reason = failed_earlier();
        cancel(flight_[j]);
      }
    }
    bool retired = false;
    while (!flight_.empty() && flight_.front().runner->idle()) {
      retire_front();
      retired = true;
    }
    if (retired) changed_.notify_all();
  }

  // Resumes a waiting call with its waits throwing until it has unwound.
  void cancel(running_call& running) {
    running.runner->cancel();
    while (!running.runner->idle()) running.runner->resume(deadline_clock::time_point::min());
  }

  void retire_front() {
    running_call& front = flight_.front();
    std::exception_ptr failure = front.runner->failure();
    if (!front.cancel_reason.empty()) {
      const report& was = front.runner->comm.finish();
      const std::string name =
          was.collective.empty() ? std::string("a call") : std::string(was.collective);
      failure = std::make_exception_ptr(error(
          front.cancel_code, "rank " + std::to_string(front.runner->comm.rank()) + " cancelled " +
                                 name + " in flight: " + front.cancel_reason));
    }
    for (auto& call : front.results) {
      call->result = front.runner->result();
      call->failure = failure;
      call->done.store(true, std::memory_order_release);
    }
    idle_.push_back(std::move(front.runner));
    flight_.pop_front();
  }

  void progress_loop() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      if (flight_.empty()) {
        changed_.wait(lock);
        continue;
      }
      // One call alone may block longer: only a new issue (or test, wait) waits for the slice.
      pass(deadline_clock::now() + (flight_.size() == 1 ? 10 * slice : slice));
      // Let a caller in (issue, test, wait) between passes.
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    }
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;  // a call retired, was issued, or the lanes are stopping
  std::deque<running_call> flight_;  // in issue order
  std::vector<std::unique_ptr<lane>> idle_;
  std::optional<error> failure_;
  int groups_open_ = 0;
  std::vector<recorded_call<Comm>> recorded_;  // while a group is open
  bool stopping_ = false;
  std::thread progress_;
};

}  // namespace weft::detail
