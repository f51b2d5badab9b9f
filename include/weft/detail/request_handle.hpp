// weft/detail/request_handle.hpp — the request every transport hands out for a posted send or
// receive: a move-only handle of one operation that cancels it when dropped before completion.
//
// Lifetime: the operation belongs to its owner (the transport or its engine), which frees it
// once it has completed and nothing refers to it. A handle destroyed, or assigned over, while it
// still holds its operation calls owner->cancel(op): the owner takes the operation back from
// the fabric (or waits, bounded, until the fabric lets go of its buffer) so that the caller's
// buffer is never touched after the handle is gone. The owner's wait and test read the
// operation through operation(). Owner::cancel must be reachable from here: public, or the
// owner befriends request_handle.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

namespace weft::detail {

template <class Owner, class Operation>
class request_handle {
 public:
  request_handle() = default;
  request_handle(Operation* op, Owner* owner) noexcept : op_(op), owner_(owner) {}
  request_handle(request_handle&& other) noexcept
      : op_(std::exchange(other.op_, nullptr)), owner_(other.owner_) {}
  request_handle& operator=(request_handle&& other) noexcept {
    if (this != &other) {
      release();
      op_ = std::exchange(other.op_, nullptr);
      owner_ = other.owner_;
    }
    return *this;
  }
  request_handle(const request_handle&) = delete;
  request_handle& operator=(const request_handle&) = delete;
  ~request_handle() { release(); }

  // The operation this handle holds; nullptr for an empty or moved-from handle.
  Operation* operation() const noexcept { return op_; }

 private:
  void release() {
    if (op_ != nullptr) owner_->cancel(op_);
    op_ = nullptr;
  }

  Operation* op_ = nullptr;
  Owner* owner_ = nullptr;
};

// What a transport holds its engine by. Closing the transport while requests are still alive (a
// pending receive kept past session::close_transport(), say) must not leave them pointing at
// freed memory: the engine is closed at once (its connections end, nothing touches a request's
// buffer any more) and lives on, retired, until the last request is dropped, which deletes it.
// Engine: requests_held() (requests handed out and not yet dropped), retire() (close now), and
// a cancel(op) that, once retired, only counts the request down and deletes the engine after
// the last: what retiring<Engine> below gives it.
template <class Engine>
struct close_or_retire {
  void operator()(Engine* engine) const noexcept {
    if (engine->requests_held() == 0) {
      delete engine;
    } else {
      engine->retire();
    }
  }
};

template <class Engine>
using engine_ptr = std::unique_ptr<Engine, close_or_retire<Engine>>;

// The bookkeeping close_or_retire asks of an engine, once for every transport. Engine derives
// from retiring<Engine>, has a public close() (an orderly close that runs once), calls
// hand_out() for every request it hands out, and take_back() first thing in its cancel(): true
// means the engine is retired (and deleted once its last request is dropped), and cancel must
// touch nothing more.
template <class Engine>
class retiring {
 public:
  std::size_t requests_held() const { return held_; }
  void retire() {
    static_cast<Engine*>(this)->close();
    retired_ = true;
  }

 protected:
  void hand_out() { ++held_; }
  bool take_back() {
    --held_;
    if (!retired_) return false;
    if (held_ == 0) delete static_cast<Engine*>(this);
    return true;
  }

 private:
  std::size_t held_ = 0;  // requests handed out and not yet dropped
  bool retired_ = false;  // closed while requests lived; the last deletes it
};

}  // namespace weft::detail
