// weft_torch/csrc/process_group.hpp — weft as a torch.distributed process group (c10d).
//
// Every call checks its tensors on the calling thread (a bad call raises RuntimeError there,
// before anything is sent), takes a contiguous copy of a non-contiguous input, and hands the
// worker a call to start (weft/nonblocking.hpp's i-calls on the group's communicator). Its Work
// completes when the weft call has, after the results are copied into the caller's tensors.
// allreduce_coalesced runs its allreduces in one weft::group: small ones are fused.
#pragma once

#include "tensors.hpp"
#include "work.hpp"
#include "worker.hpp"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "weft/bootstrap/store.hpp"
#include "weft/communicator.hpp"
#include "weft/group.hpp"
#include "weft/nonblocking.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace weft_torch {

// The class Python sees: ProcessGroup plus which weft transport it runs over.
class process_group : public c10d::ProcessGroup {
 public:
  using c10d::ProcessGroup::ProcessGroup;
  const std::string getBackendName() const override { return "weft"; }
  virtual std::string transport_name() const = 0;
};

template <class Transport>
class process_group_over final : public process_group {
 public:
  using comm_type = weft::communicator<Transport>;
  using requests_type = std::vector<weft::request<Transport>>;
  using starter = std::function<void(comm_type&, requests_type&)>;

  // `meeting` is the store the transport met its peers through; it is kept as long as the group.
  process_group_over(std::unique_ptr<weft::bootstrap::store> meeting,
                     std::unique_ptr<Transport> transport, weft::options settings,
                     std::string transport_name)
      : process_group(transport->rank(), transport->size()),
        meeting_(std::move(meeting)),
        transport_(std::move(transport)),
        comm_(std::make_unique<comm_type>(*transport_, settings)),
        transport_name_(std::move(transport_name)) {}

  std::string transport_name() const override { return transport_name_; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    const std::string call = "allreduce";
    const auto& tensor = single(call, tensors);
    auto data = dense(tensor);
    return submit(c10d::OpType::ALLREDUCE, {tensor}, allreduce_in_place(call, data, opts.reduceOp),
                  copy_back(tensor, data));
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override {
    const std::string call = "allreduce_coalesced";
    if (tensors.empty()) refuse(call, "no tensors given");
    std::vector<starter> calls;
    std::vector<std::function<void()>> copies;
    for (const auto& tensor : tensors) {
      check_tensor(call, tensor);
      auto data = dense(tensor);
      calls.push_back(allreduce_in_place(call, data, opts.reduceOp));
      if (auto copy = copy_back(tensor, data)) copies.push_back(std::move(copy));
    }
    starter start = [calls](comm_type& comm, requests_type& out) {
      weft::group together(comm);
      for (const auto& issue : calls) issue(comm, out);
    };
    std::function<void()> complete;
    if (!copies.empty()) {
      complete = [copies] {
        for (const auto& copy : copies) copy();
      };
    }
    return submit(c10d::OpType::ALLREDUCE_COALESCED, tensors, std::move(start),
                  std::move(complete));
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    const std::string call = "broadcast";
    const auto& tensor = single(call, tensors);
    const int root = checked_root(call, opts.rootRank, opts.rootTensor);
    auto data = dense(tensor);
    auto start = one_call(call, tensor.scalar_type(), [data, root]<class T>(T, comm_type& comm) {
      return weft::ibroadcast(comm, span_of<T>(data), root);
    });
    return submit(c10d::OpType::BROADCAST, {tensor}, std::move(start), copy_back(tensor, data));
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override {
    const std::string call = "reduce";
    const auto& tensor = single(call, tensors);
    const int root = checked_root(call, opts.rootRank, opts.rootTensor);
    auto data = dense(tensor);
    // In place: the root's tensor gets the result; the others' data is kept.
    auto start = one_reduction(call, tensor.scalar_type(), opts.reduceOp,
                               [data, root]<class T, class Op>(T, Op op, comm_type& comm) {
                                 return weft::ireduce(comm, span_of<T>(data), op, root);
                               });
    return submit(c10d::OpType::REDUCE, {tensor}, std::move(start), copy_back(tensor, data));
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions&) override {
    const std::string call = "allgather";
    const auto& input = single(call, inputs);
    if (outputs.size() != 1)
      refuse(call, "takes one output list per process, got " + std::to_string(outputs.size()));
    check_alike(call, outputs.front(), input, static_cast<std::size_t>(size_));
    auto mine = dense(input);
    auto all = at::empty({size_ * input.numel()}, input.options());
    auto start = one_call(call, input.scalar_type(), [mine, all]<class T>(T, comm_type& comm) {
      return weft::iallgather(comm, span_of<const T>(mine), span_of<T>(all));
    });
    auto targets = outputs.front();
    return submit(c10d::OpType::ALLGATHER, targets, std::move(start),
                  [all, targets] { unflatten(all, targets); });
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions&) override {
    const std::string call = "_allgather_base";
    check_pair(call, output, input,
               "the output must have the input's elements times the group's size");
    auto mine = dense(input);
    auto all = dense(output);
    auto start = one_call(call, input.scalar_type(), [mine, all]<class T>(T, comm_type& comm) {
      return weft::iallgather(comm, span_of<const T>(mine), span_of<T>(all));
    });
    return submit(c10d::OpType::_ALLGATHER_BASE, {output}, std::move(start),
                  copy_back(output, all));
  }

  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override {
    const std::string call = "gather";
    const auto& input = single(call, inputs);
    const int root = checked_root(call, opts.rootRank, 0);
    std::vector<at::Tensor> targets;
    if (rank_ == root) {
      if (outputs.size() != 1)
        refuse(call, "the root takes one output list, got " + std::to_string(outputs.size()));
      check_alike(call, outputs.front(), input, static_cast<std::size_t>(size_));
      targets = outputs.front();
    } else if (!outputs.empty() && !(outputs.size() == 1 && outputs.front().empty())) {
      refuse(call, "only the root (rank " + std::to_string(root) + ") takes output tensors");
    }
    auto mine = dense(input);
    auto all = at::empty({rank_ == root ? size_ * input.numel() : 0}, input.options());
    auto start =
        one_call(call, input.scalar_type(), [mine, all, root]<class T>(T, comm_type& comm) {
          return weft::igather(comm, span_of<const T>(mine), span_of<T>(all), root);
        });
    std::function<void()> complete;
    if (!targets.empty()) complete = [all, targets] { unflatten(all, targets); };
    return submit(c10d::OpType::GATHER, targets, std::move(start), std::move(complete));
  }

  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override {
    const std::string call = "scatter";
    const auto& output = single(call, outputs);
    const int root = checked_root(call, opts.rootRank, 0);
    at::Tensor all;
    if (rank_ == root) {
      if (inputs.size() != 1)
        refuse(call, "the root takes one input list, got " + std::to_string(inputs.size()));
      check_alike(call, inputs.front(), output, static_cast<std::size_t>(size_));
      all = flat(inputs.front());
    } else {
      if (!inputs.empty() && !(inputs.size() == 1 && inputs.front().empty())) {
        refuse(call, "only the root (rank " + std::to_string(root) + ") takes input tensors");
      }
      all = at::empty({0}, output.options());
    }
    auto mine = dense(output);
    auto start =
        one_call(call, output.scalar_type(), [mine, all, root]<class T>(T, comm_type& comm) {
          return weft::iscatter(comm, span_of<const T>(all), span_of<T>(mine), root);
        });
    return submit(c10d::OpType::SCATTER, {output}, std::move(start), copy_back(output, mine));
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    const std::string call = "reduce_scatter";
    const auto& output = single(call, outputs);
    if (inputs.size() != 1)
      refuse(call, "takes one input list per process, got " + std::to_string(inputs.size()));
    check_alike(call, inputs.front(), output, static_cast<std::size_t>(size_));
    return start_reduce_scatter(call, output, flat(inputs.front()), opts.reduceOp);
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override {
    const std::string call = "_reduce_scatter_base";
    check_pair(call, input, output,
               "the input must have the output's elements times the group's size");
    return start_reduce_scatter(call, output, dense(input), opts.reduceOp);
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions&) override {
    const std::string call = "alltoall_base";
    check_tensor(call, output);
    check_tensor(call, input);
    if (output.scalar_type() != input.scalar_type())
      refuse(call, "the input and output have different dtypes");
    auto from = dense(input);
    auto into = dense(output);
    starter start;
    if (output_splits.empty() && input_splits.empty()) {
      if (input.numel() != output.numel() || input.numel() % size_ != 0) {
        refuse(call,
               "without split sizes the input and output must have the same number of elements, "
               "a multiple of the group's size (" +
                   std::to_string(input.numel()) + " and " + std::to_string(output.numel()) + ")");
      }
      start = one_call(call, input.scalar_type(), [from, into]<class T>(T, comm_type& comm) {
        return weft::ialltoall(comm, span_of<const T>(from), span_of<T>(into));
      });
    } else {
      start = alltoallv(call, from, into, split_counts(call, "input", input, input_splits),
                        split_counts(call, "output", output, output_splits));
    }
    return submit(c10d::OpType::ALLTOALL_BASE, {output}, std::move(start), copy_back(output, into));
  }

  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions&) override {
    const std::string call = "alltoall";
    const auto expected = static_cast<std::size_t>(size_);
    if (inputs.size() != expected || outputs.size() != expected) {
      refuse(call, "takes one input and one output tensor per rank (" + std::to_string(size_) +
                       "), got " + std::to_string(inputs.size()) + " and " +
                       std::to_string(outputs.size()));
    }
    std::vector<std::size_t> sent;
    std::vector<std::size_t> received;
    for (std::size_t i = 0; i < expected; ++i) {
      check_tensor(call, inputs[i]);
      check_tensor(call, outputs[i]);
      if (inputs[i].scalar_type() != inputs[0].scalar_type() ||
          outputs[i].scalar_type() != inputs[0].scalar_type()) {
        refuse(call, "the tensors have different dtypes");
      }
      sent.push_back(static_cast<std::size_t>(inputs[i].numel()));
      received.push_back(static_cast<std::size_t>(outputs[i].numel()));
    }
    const auto total = std::accumulate(received.begin(), received.end(), std::size_t{0});
    auto into = at::empty({static_cast<std::int64_t>(total)}, inputs[0].options());
    auto start = alltoallv(call, flat(inputs), into, std::move(sent), std::move(received));
    return submit(c10d::OpType::ALLTOALL, outputs, std::move(start),
                  [into, outputs] { unflatten(into, outputs); });
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions&) override {
    starter start = [](comm_type& comm, requests_type& out) {
      out.push_back(weft::ibarrier(comm));
    };
    return submit(c10d::OpType::BARRIER, {}, std::move(start), {});
  }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int peer,
                                      int tag) override {
    const std::string call = "send";
    const auto& tensor = single(call, tensors);
    check_peer(call, peer);
    auto data = dense(tensor);
    auto start =
        one_call(call, tensor.scalar_type(), [data, peer, tag]<class T>(T, comm_type& comm) {
          return weft::isend(comm, span_of<const T>(data), peer, tag);
        });
    return submit(c10d::OpType::SEND, {tensor}, std::move(start), {});
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int peer,
                                      int tag) override {
    const std::string call = "recv";
    const auto& tensor = single(call, tensors);
    check_peer(call, peer);
    auto data = dense(tensor);
    auto start =
        one_call(call, tensor.scalar_type(), [data, peer, tag]<class T>(T, comm_type& comm) {
          return weft::irecv(comm, span_of<T>(data), peer, tag);
        });
    return submit(c10d::OpType::RECV, {tensor}, std::move(start), copy_back(tensor, data));
  }

  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>&, int) override {
    refuse("recv", "a receive from any source is not supported: name the source rank");
  }

 private:
  c10::intrusive_ptr<c10d::Work> submit(c10d::OpType type, std::vector<at::Tensor> outputs,
                                        starter start, std::function<void()> complete) {
    auto handle = c10::make_intrusive<work>(rank_, type, std::move(outputs));
    auto requests = std::make_shared<requests_type>();
    queued_call queued;
    queued.handle = handle;
    queued.start = [this, requests, start = std::move(start)] { start(*comm_, *requests); };
    queued.advance = [requests, next = std::size_t{0}](std::chrono::microseconds slice) mutable {
      for (; next < requests->size(); ++next) {
        if (!(*requests)[next].wait_for(slice)) return false;
      }
      return true;
    };
    queued.complete = std::move(complete);
    worker_.issue(std::move(queued));
    return handle;
  }

  // The start of one weft call on tensors of `type`: issue(T{}, comm) starts it, T the weft
  // element type. An unsupported dtype is refused now, on the calling thread.
  template <class Issue>
  static starter one_call(const std::string& call, at::ScalarType type, Issue issue) {
    starter start;
    with_element(call, type, [&]<class T>(T) {
      start = [issue](comm_type& comm, requests_type& out) { out.push_back(issue(T{}, comm)); };
    });
    return start;
  }

  // The same for a reduction: issue(T{}, reduction, comm), with the weft reduction of `op`.
  template <class Issue>
  static starter one_reduction(const std::string& call, at::ScalarType type,
                               const c10d::ReduceOp& op, Issue issue) {
    starter start;
    with_reduction(call, type, op, [&]<class T, class Op>(T, Op reduction) {
      start = [issue, reduction](comm_type& comm, requests_type& out) {
        out.push_back(issue(T{}, reduction, comm));
      };
    });
    return start;
  }

  static starter allreduce_in_place(const std::string& call, at::Tensor data,
                                    const c10d::ReduceOp& op) {
    return one_reduction(call, data.scalar_type(), op,
                         [data]<class T, class Op>(T, Op reduction, comm_type& comm) {
                           return weft::iallreduce(comm, span_of<T>(data), reduction);
                         });
  }

  // alltoallv from `from` into `into`, `sent[i]` elements to rank i and `received[i]` from it.
  static starter alltoallv(const std::string& call, at::Tensor from, at::Tensor into,
                           std::vector<std::size_t> sent, std::vector<std::size_t> received) {
    auto counts =
        std::make_shared<const std::pair<std::vector<std::size_t>, std::vector<std::size_t>>>(
            std::move(sent), std::move(received));
    return one_call(call, from.scalar_type(), [from, into, counts]<class T>(T, comm_type& comm) {
      return weft::ialltoallv(comm, span_of<const T>(from),
                              std::span<const std::size_t>(counts->first), span_of<T>(into),
                              std::span<const std::size_t>(counts->second));
    });
  }

  c10::intrusive_ptr<c10d::Work> start_reduce_scatter(const std::string& call,
                                                      const at::Tensor& output, at::Tensor all,
                                                      const c10d::ReduceOp& op) {
    auto mine = dense(output);
    auto start = one_reduction(call, output.scalar_type(), op,
                               [all, mine]<class T, class Op>(T, Op reduction, comm_type& comm) {
                                 return weft::ireduce_scatter(comm, span_of<const T>(all),
                                                              span_of<T>(mine), reduction);
                               });
    return submit(c10d::OpType::REDUCE_SCATTER, {output}, std::move(start),
                  copy_back(output, mine));
  }

  // Copies a call's contiguous stand-in back into the caller's tensor (nothing when it is the
  // tensor).
  static std::function<void()> copy_back(const at::Tensor& tensor, const at::Tensor& stand_in) {
    if (tensor.is_same(stand_in)) return {};
    return [tensor, stand_in] { tensor.copy_(stand_in); };
  }

  int checked_root(const std::string& call, std::int64_t root, std::int64_t root_tensor) const {
    if (root < 0 || root >= size_) {
      refuse(call, "root rank " + std::to_string(root) + " is outside the group of " +
                       std::to_string(size_));
    }
    if (root_tensor != 0)
      refuse(call,
             "takes one tensor per process (root tensor " + std::to_string(root_tensor) + ")");
    return static_cast<int>(root);
  }

  void check_peer(const std::string& call, int peer) const {
    if (peer < 0 || peer >= size_)
      refuse(call,
             "rank " + std::to_string(peer) + " is outside the group of " + std::to_string(size_));
    if (peer == rank_) refuse(call, "rank " + std::to_string(peer) + " is this process");
  }

  // The two tensors of a *_base call: CPU, one dtype, `big` holding `small`'s elements times the
  // group's size.
  void check_pair(const std::string& call, const at::Tensor& big, const at::Tensor& small,
                  const std::string& rule) const {
    check_tensor(call, big);
    check_tensor(call, small);
    if (big.scalar_type() != small.scalar_type())
      refuse(call, "the input and output have different dtypes");
    if (big.numel() != size_ * small.numel()) {
      refuse(call, rule + " (" + std::to_string(big.numel()) + " and " +
                       std::to_string(small.numel()) + " elements, " + std::to_string(size_) +
                       " ranks)");
    }
  }

  // Elements per rank of an alltoall_base side: its split sizes (rows of dimension 0), or equal
  // parts.
  std::vector<std::size_t> split_counts(const std::string& call, const std::string& side,
                                        const at::Tensor& tensor,
                                        const std::vector<std::int64_t>& splits) const {
    const std::int64_t rows = tensor.dim() == 0 ? 1 : tensor.size(0);
    const std::int64_t row = rows == 0 ? 0 : tensor.numel() / rows;
    std::vector<std::size_t> counts;
    if (splits.empty()) {
      if (rows % size_ != 0) {
        refuse(call, "the " + side + "'s " + std::to_string(rows) +
                         " rows do not split evenly over " + std::to_string(size_) + " ranks");
      }
      counts.assign(static_cast<std::size_t>(size_), static_cast<std::size_t>(rows / size_ * row));
      return counts;
    }
    if (splits.size() != static_cast<std::size_t>(size_)) {
      refuse(call, "the " + side + " split sizes name " + std::to_string(splits.size()) +
                       " ranks, the group has " + std::to_string(size_));
    }
    std::int64_t total = 0;
    for (const auto split : splits) {
      if (split < 0) refuse(call, "a negative " + side + " split size");
      total += split;
      counts.push_back(static_cast<std::size_t>(split * row));
    }
    if (total != rows) {
      refuse(call, "the " + side + " split sizes add up to " + std::to_string(total) +
                       " rows, the tensor has " + std::to_string(rows));
    }
    return counts;
  }

  std::unique_ptr<weft::bootstrap::store> meeting_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<comm_type> comm_;
  std::string transport_name_;
  worker worker_;  // last: stopped (its calls finished) before the communicator goes
};

}  // namespace weft_torch
