// weft_torch/csrc/worker.hpp — the thread a weft process group runs its calls on.
//
// torch.distributed calls a backend from any thread and waits on Work objects and futures that
// nobody else drives, so each process group owns one thread that does everything weft does for
// it: it starts each call in flight on the group's communicator (weft::iallreduce and the other
// i-calls, several in flight at once), moves the calls in flight forward, and finishes each
// call's work, in the order issued, as it completes. The communicator is only ever touched by
// this thread.
//
// While calls are in flight the worker waits for the oldest in slices of `poll_slice`, so a call
// issued meanwhile (DDP's next bucket) starts within one slice; with nothing in flight it sleeps
// until a call is issued.
#pragma once

#include "work.hpp"

#include <Python.h>

#include <ATen/core/grad_mode.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace weft_torch {

// One call, as the worker sees it.
struct queued_call {
  c10::intrusive_ptr<work> handle;
  std::function<void()> start;                             // starts the weft call(s)
  std::function<bool(std::chrono::microseconds)> advance;  // true once done; throws its failure
  std::function<void()> complete;  // after success: results into the caller's tensors
};

class worker {
 public:
  static constexpr std::chrono::microseconds poll_slice{200};

  worker() : thread_([this] { run(); }) {}
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;

  ~worker() { stop(); }

  // Finishes the calls issued so far (their own timeouts bound it), then stops the thread. The
  // thread may need the GIL (dropping the last reference to a tensor Python made takes it), so
  // a caller holding the GIL lets go of it while it waits.
  void stop() {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
    }
    ready_.notify_one();
    if (Py_IsInitialized() && PyGILState_Check()) {
      PyThreadState* held = PyEval_SaveThread();
      thread_.join();
      PyEval_RestoreThread(held);
    } else {
      thread_.join();
    }
  }

  void issue(queued_call call) {
    {
      std::lock_guard lock(mutex_);
      issued_.push_back(std::move(call));
    }
    ready_.notify_one();
  }

 private:
  void run() {
    at::NoGradGuard no_grad;  // the copies into the caller's tensors are not part of any graph
    std::deque<queued_call> in_flight;
    for (;;) {
      std::deque<queued_call> fresh;
      {
        std::unique_lock lock(mutex_);
        if (in_flight.empty()) ready_.wait(lock, [&] { return stopping_ || !issued_.empty(); });
        if (stopping_ && issued_.empty() && in_flight.empty()) return;
        fresh.swap(issued_);
      }
      for (auto& call : fresh) {
        try {
          call.start();
          in_flight.push_back(std::move(call));
        } catch (...) {
          call.handle->fail(std::current_exception());
        }
      }
      while (!in_flight.empty()) {
        auto& oldest = in_flight.front();
        try {
          if (!oldest.advance(poll_slice)) break;
          if (oldest.complete) oldest.complete();
          oldest.handle->succeed();
        } catch (...) {
          oldest.handle->fail(std::current_exception());
        }
        in_flight.pop_front();
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<queued_call> issued_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace weft_torch
