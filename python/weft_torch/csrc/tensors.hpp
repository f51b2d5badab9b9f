// weft_torch/csrc/tensors.hpp — torch tensors as weft buffers: element types, reduce ops, and the
// checks every call makes before anything is sent.
//
// dtypes: float32, float64, float16 (weft::half), bfloat16 (weft::bfloat16), uint8, int8, int16,
// int32, int64. Ops: SUM, PRODUCT, MIN, MAX, AVG (weft::avg: the sum divided once by the group's
// size, truncating for integers) for all of them; BAND, BOR, BXOR for the integers.
// Non-contiguous tensors are copied into a contiguous one first and the result copied back.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "weft/ops.hpp"
#include "weft/types.hpp"

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weft_torch {

// The torch.distributed function that reaches a ProcessGroup method, where the names differ.
inline std::string torch_name(const std::string& method) {
  static constexpr std::pair<std::string_view, std::string_view> names[] = {
      {"allreduce", "all_reduce"},
      {"allreduce_coalesced", "all_reduce_coalesced"},
      {"allgather", "all_gather"},
      {"_allgather_base", "all_gather_into_tensor"},
      {"_reduce_scatter_base", "reduce_scatter_tensor"},
      {"alltoall_base", "all_to_all_single"},
      {"alltoall", "all_to_all"}};
  for (const auto& [ours, theirs] : names) {
    if (method == ours) return std::string(theirs) + " (" + method + ")";
  }
  return method;
}

// What torch raises as RuntimeError: the call (as torch.distributed names it, and as
// ProcessGroup does) and what about it weft does not do.
[[noreturn]] inline void refuse(const std::string& call, const std::string& what) {
  throw std::runtime_error("weft backend: " + torch_name(call) + ": " + what);
}

// Calls f(T{}) with T the weft element type of `type`.
template <class F>
void with_element(const std::string& call, at::ScalarType type, F&& f) {
  switch (type) {
    case at::kFloat:
      return f(float{});
    case at::kDouble:
      return f(double{});
    case at::kHalf:
      return f(weft::half{});
    case at::kBFloat16:
      return f(weft::bfloat16{});
    case at::kByte:
      return f(std::uint8_t{});
    case at::kChar:
      return f(std::int8_t{});
    case at::kShort:
      return f(std::int16_t{});
    case at::kInt:
      return f(std::int32_t{});
    case at::kLong:
      return f(std::int64_t{});
    default:
      refuse(call, std::string("dtype ") + c10::toString(type) +
                       " is not supported (float32, float64, float16, bfloat16, uint8, int8, "
                       "int16, int32, int64 are)");
  }
}

inline std::string op_name(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return "SUM";
    case c10d::ReduceOp::AVG:
      return "AVG";
    case c10d::ReduceOp::PRODUCT:
      return "PRODUCT";
    case c10d::ReduceOp::MIN:
      return "MIN";
    case c10d::ReduceOp::MAX:
      return "MAX";
    case c10d::ReduceOp::BAND:
      return "BAND";
    case c10d::ReduceOp::BOR:
      return "BOR";
    case c10d::ReduceOp::BXOR:
      return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
      return "PREMUL_SUM";
    default:
      return "op " + std::to_string(static_cast<int>(op.op_));
  }
}

// Calls f(T{}, Op{}) with the element type of `type` and the weft reduction of `op`.
template <class F>
void with_reduction(const std::string& call, at::ScalarType type, const c10d::ReduceOp& op, F&& f) {
  with_element(call, type, [&]<class T>(T) {
    switch (op.op_) {
      case c10d::ReduceOp::SUM:
        return f(T{}, weft::sum{});
      case c10d::ReduceOp::AVG:
        return f(T{}, weft::avg{});
      case c10d::ReduceOp::PRODUCT:
        return f(T{}, weft::prod{});
      case c10d::ReduceOp::MIN:
        return f(T{}, weft::min{});
      case c10d::ReduceOp::MAX:
        return f(T{}, weft::max{});
      case c10d::ReduceOp::BAND:
      case c10d::ReduceOp::BOR:
      case c10d::ReduceOp::BXOR:
        if constexpr (std::integral<T>) {
          if (op.op_ == c10d::ReduceOp::BAND) return f(T{}, weft::band{});
          if (op.op_ == c10d::ReduceOp::BOR) return f(T{}, weft::bor{});
          return f(T{}, weft::bxor{});
        } else {
          refuse(call, op_name(op) + " needs an integer dtype, not " + c10::toString(type));
        }
      default:
        refuse(call, op_name(op) +
                         " is not supported (SUM, AVG, PRODUCT, MIN, MAX, and BAND, BOR, BXOR on "
                         "integers are)");
    }
  });
}

template <class T>
std::span<T> span_of(const at::Tensor& tensor) {
  return {static_cast<T*>(tensor.data_ptr()), static_cast<std::size_t>(tensor.numel())};
}

// A dense CPU tensor, or a RuntimeError naming the call.
inline void check_tensor(const std::string& call, const at::Tensor& tensor) {
  if (!tensor.defined()) refuse(call, "a tensor is undefined");
  if (!tensor.device().is_cpu()) {
    refuse(call,
           "the tensor is on " + tensor.device().str() + "; the weft backend takes CPU tensors");
  }
  if (tensor.layout() != at::kStrided) refuse(call, "sparse tensors are not supported");
}

// The one tensor of a list (torch.distributed passes one per process).
inline const at::Tensor& single(const std::string& call, const std::vector<at::Tensor>& tensors) {
  if (tensors.size() != 1) {
    refuse(call, "takes one tensor per process, got " + std::to_string(tensors.size()));
  }
  check_tensor(call, tensors.front());
  return tensors.front();
}

// Every tensor of `list` has the dtype and number of elements of `like`.
inline void check_alike(const std::string& call, const std::vector<at::Tensor>& list,
                        const at::Tensor& like, std::size_t expected_count) {
  if (list.size() != expected_count) {
    refuse(call, "expected a list of " + std::to_string(expected_count) + " tensors, got " +
                     std::to_string(list.size()));
  }
  for (const auto& tensor : list) {
    check_tensor(call, tensor);
    if (tensor.scalar_type() != like.scalar_type()) {
      refuse(call, std::string("tensors of different dtypes (") +
                       c10::toString(tensor.scalar_type()) + " and " +
                       c10::toString(like.scalar_type()) + ")");
    }
    if (tensor.numel() != like.numel()) {
      refuse(call, "tensors of different sizes (" + std::to_string(tensor.numel()) + " and " +
                       std::to_string(like.numel()) + " elements)");
    }
  }
}

// The tensor itself when contiguous, else a contiguous copy (taken now, on the calling thread).
inline at::Tensor dense(const at::Tensor& tensor) {
  return tensor.is_contiguous() ? tensor : tensor.contiguous();
}

// The list's tensors one after another in one flat tensor (copied now).
inline at::Tensor flat(const std::vector<at::Tensor>& list) {
  std::vector<at::Tensor> pieces;
  pieces.reserve(list.size());
  for (const auto& tensor : list) pieces.push_back(tensor.reshape({-1}));
  return at::cat(pieces);
}

// Copies consecutive pieces of `from` into the tensors of `into` (each its own shape).
inline void unflatten(const at::Tensor& from, const std::vector<at::Tensor>& into) {
  std::int64_t offset = 0;
  for (const auto& tensor : into) {
    tensor.copy_(from.narrow(0, offset, tensor.numel()).view(tensor.sizes()));
    offset += tensor.numel();
  }
}

}  // namespace weft_torch
