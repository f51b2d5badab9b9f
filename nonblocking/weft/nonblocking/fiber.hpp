// weft/nonblocking/fiber.hpp — a stack a call in flight runs on (Boost.Context), switched to and
// from with the annotations AddressSanitizer and ThreadSanitizer need to follow a program across
// stacks.
//
// A worker_fiber runs `body` on its own stack. resume() runs it until it calls suspend() (or
// returns); suspend() goes back to whoever resumed it. Nothing but the switch itself happens
// here: what the fiber runs, and when it is resumed, is weft/nonblocking/lanes.hpp's.
#pragma once

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>

#if defined(__SANITIZE_ADDRESS__)
#define WEFT_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WEFT_FIBER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define WEFT_FIBER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WEFT_FIBER_TSAN 1
#endif
#endif

#ifdef WEFT_FIBER_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef WEFT_FIBER_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace weft::detail {

class worker_fiber {
 public:
  // A stack of `stack_bytes` (with a guard page below it, so an overflow faults instead of
  // writing over the heap); `body` starts at the first resume().
  worker_fiber(std::size_t stack_bytes, std::function<void()> body) : body_(std::move(body)) {
    namespace ctx = boost::context;
    fiber_ = ctx::fiber(std::allocator_arg,
                        recording_stack{ctx::protected_fixedsize_stack(stack_bytes), &stack_},
                        [this](ctx::fiber&& caller) {
                          caller_ = std::move(caller);
                          arrived();
                          body_();
                          finished_ = true;
                          leave(/*for_good=*/true);
                          return std::move(caller_);
                        });
#ifdef WEFT_FIBER_TSAN
    tsan_fiber_ = __tsan_create_fiber(0);
#endif
  }

  worker_fiber(const worker_fiber&) = delete;
  worker_fiber& operator=(const worker_fiber&) = delete;

  // The body must have returned (a fiber destroyed mid-body would unwind it by an exception of
  // Boost's own; the lanes never do that).
  ~worker_fiber() {
#ifdef WEFT_FIBER_TSAN
    if (tsan_fiber_ != nullptr) __tsan_destroy_fiber(tsan_fiber_);
#endif
  }

  bool finished() const { return finished_; }

  // Runs the body until it suspends or returns. Called from outside the fiber.
  void resume() {
#ifdef WEFT_FIBER_TSAN
    caller_tsan_ = __tsan_get_current_fiber();
    __tsan_switch_to_fiber(tsan_fiber_, 0);
#endif
#ifdef WEFT_FIBER_ASAN
    void* fake_stack = nullptr;
    __sanitizer_start_switch_fiber(&fake_stack, static_cast<char*>(stack_.sp) - stack_.size,
                                   stack_.size);
#endif
    fiber_ = std::move(fiber_).resume();
#ifdef WEFT_FIBER_ASAN
    __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
  }

  // Goes back to the resume() that ran the fiber. Called on the fiber.
  void suspend() { leave(/*for_good=*/false); }

 private:
  // Allocates with `inner` and remembers where the stack is (AddressSanitizer is told at each
  // switch).
  struct recording_stack {
    boost::context::protected_fixedsize_stack inner;
    boost::context::stack_context* where;
    boost::context::stack_context allocate() { return *where = inner.allocate(); }
    void deallocate(boost::context::stack_context& stack) noexcept {
#ifdef WEFT_FIBER_ASAN
      // The frames a finished fiber leaves behind (Boost's entry frames, which end in a switch,
      // not a return) keep their redzones poisoned, and AddressSanitizer clears no shadow at
      // munmap or mmap: a shared-memory region later mapped at this address would read as a
      // stack redzone. Clear it while the address is still the stack's.
      __asan_unpoison_memory_region(static_cast<char*>(stack.sp) - stack.size, stack.size);
#endif
      inner.deallocate(stack);
    }
  };

  // On the fiber, just after a switch onto it.
  void arrived() {
#ifdef WEFT_FIBER_ASAN
    __sanitizer_finish_switch_fiber(fake_stack_, &caller_bottom_, &caller_size_);
#endif
  }

  void leave(bool for_good) {
#ifdef WEFT_FIBER_TSAN
    __tsan_switch_to_fiber(caller_tsan_, 0);
#endif
#ifdef WEFT_FIBER_ASAN
    __sanitizer_start_switch_fiber(for_good ? nullptr : &fake_stack_, caller_bottom_, caller_size_);
#else
    (void)for_good;
#endif
    if (!for_good) {
      caller_ = std::move(caller_).resume();
      arrived();
    }
  }

  std::function<void()> body_;
  boost::context::stack_context stack_{};
  boost::context::fiber fiber_;   // the fiber, while it is not running
  boost::context::fiber caller_;  // who resumed it, while it runs
  bool finished_ = false;
#ifdef WEFT_FIBER_ASAN
  void* fake_stack_ = nullptr;
  const void* caller_bottom_ = nullptr;
  std::size_t caller_size_ = 0;
#endif
#ifdef WEFT_FIBER_TSAN
  void* tsan_fiber_ = nullptr;
  void* caller_tsan_ = nullptr;
#endif
};

}  // namespace weft::detail
