// weft_torch/csrc/work.hpp — the c10d::Work a weft process group returns for every call.
//
// The call runs on the process group's worker thread (weft_torch/csrc/worker.hpp); the worker
// finishes the work, which wakes wait(), and completes its future (what DDP's reducer and
// Work.get_future() wait on) with the call's output tensors, or sets the call's error on both.
#pragma once

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <exception>
#include <utility>
#include <vector>

namespace weft_torch {

class work final : public c10d::Work {
 public:
  work(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {}

  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // On the worker thread, once the call is done.
  void succeed() {
    finish();
    future_->markCompleted(c10::IValue(outputs_));
  }
  void fail(std::exception_ptr failure) {
    finish(failure);
    future_->setError(std::move(failure));
  }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace weft_torch
