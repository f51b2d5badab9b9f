// weft/communicator/in_flight.hpp — what the communicator knows of nonblocking calls
// (weft/nonblocking.hpp): a wait inside a call in flight gives way to the others (lane_yield), and
// a blocking call completes the calls in flight before it starts (calls_in_flight). Kept apart so
// that the communicator needs nothing of the fibers the calls run on.
#pragma once

#include "weft/error.hpp"
#include "weft/transport.hpp"

namespace weft::detail {

// Thrown out of a wait of a call in flight that is being cancelled: an earlier call failed, or
// the communicator is being destroyed. Not a weft::error, so that no wait mistakes it for a
// transport's failure; the lane turns it into the communicator's refusal.
struct call_cancelled {};

// The lane a call in flight runs on, as its waits see it.
class lane_yield {
 public:
  // Gives way to the other calls in flight; `advanced`: the call got further since it last gave
  // way (this is a new wait). Returns how long the wait may then block on its own request
  // (time_point::min(): not at all, only poll); throws call_cancelled.
  virtual deadline_clock::time_point suspend(bool advanced) = 0;

 protected:
  ~lane_yield() = default;
};

// A communicator's calls in flight, as the communicator sees them.
class calls_in_flight {
 public:
  virtual ~calls_in_flight() = default;
  // Completes every call in flight, in the order issued (a blocking call, split and dup do this
  // before they start). Never throws: a call's failure stays with its handle and failure().
  virtual void drain() = 0;
  // The first failure of a call in flight (the communicator fails with it), else null.
  virtual const error* failure() const = 0;
};

}  // namespace weft::detail
