// weft/detail/operation_pool.hpp — the operations a transport hands out for posted sends and
// receives, allocated once and reused, so the steady state of a collective allocates nothing.
//
// An operation's address never changes while the pool lives (requests and the fabric hold it).
// The pool is used by one thread at a time: the transport's own (a rank's thread in process).
#pragma once

#include <memory>
#include <vector>

namespace weft::detail {

template <class Operation>
class operation_pool {
 public:
  // A free operation, a new one when none is free; its fields are as the caller left them when
  // it was released.
  Operation* acquire() {
    if (free_.empty()) {
      storage_.push_back(std::make_unique<Operation>());
      return storage_.back().get();
    }
    Operation* op = free_.back();
    free_.pop_back();
    return op;
  }

  // Takes `op` back for reuse; the caller has reset what the next use must not see.
  void release(Operation* op) { free_.push_back(op); }

  // Visits every operation ever made, free or in use (to fail those still posted, say).
  template <class Visit>
  void for_each(Visit&& visit) {
    for (auto& op : storage_) visit(*op);
  }

 private:
  std::vector<std::unique_ptr<Operation>> storage_;
  std::vector<Operation*> free_;
};

}  // namespace weft::detail
