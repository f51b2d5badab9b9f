// weft/group.hpp — calls issued together (ncclGroupStart/ncclGroupEnd), small allreduces fused.
//
//   {
//     weft::group together(comm);                    // calls in flight on comm are recorded ...
//     for (auto& grad : grads) handles.push_back(weft::iallreduce(comm, std::span<float>(grad)));
//   }                                                // ... and start here, fused where they can be
//   for (auto& handle : handles) handle.wait();      // handle.fused(), handle.result().calls
//
// When the outermost group on a communicator ends, its calls start in the order issued. In-place
// allreduces (iallreduce(comm, data, op, algorithm)) of one element type, op and algorithm, each
// of at most options::fuse_bytes, are fused: their data is packed into one buffer, reduced by one
// call at the place of the first of them, and unpacked. Fusion never changes a result's bits: it
// happens for integer elements (every op is exact), and for floating-point ones where the
// algorithm (the one asked for, or the one weft::automatic picks for each call's own size, which
// must be the same for all of them) reduces every element in the same order wherever it sits in a
// buffer (recursive_doubling, direct); the others start separately. A handle may be waited for
// only once its group has ended. Every rank must issue the same calls in the same groups.
#pragma once

#include "weft/buffer.hpp"
#include "weft/collectives.hpp"
#include "weft/communicator.hpp"
#include "weft/nonblocking.hpp"
#include "weft/nonblocking/lanes.hpp"

#include <exception>
#include <map>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace weft {

template <transport Transport>
class group {
 public:
  using communicator_type = communicator<Transport>;

  explicit group(communicator_type& comm) : comm_(&comm), unwinding_(std::uncaught_exceptions()) {
    detail::lanes_of(comm).open_group();
  }
  group(const group&) = delete;
  group& operator=(const group&) = delete;

  // Ends the group if end() was not called. An error starting a call stays with that call's
  // handle; a group left by an exception starts nothing and fails its calls.
  ~group() {
    if (ended_) return;
    if (std::uncaught_exceptions() > unwinding_) {
      abandon();
      return;
    }
    try {
      end();
    } catch (...) {  // each call's handle has it
    }
  }

  // Ends the group: starts its calls (the outermost group's), fused where they can be. Throws the
  // first argument error of a call (that call's handle throws it too; the others start).
  void end() {
    ended_ = true;
    auto recorded = detail::lanes_of(*comm_).close_group();
    if (recorded.empty()) return;
    start_all(recorded);
  }

 private:
  using comm_t = communicator_type;
  using recorded_t = detail::recorded_call<comm_t>;
  using outcome_t = detail::call_outcome<comm_t>;

  void abandon() {
    auto recorded = detail::lanes_of(*comm_).close_group();
    if (recorded.empty()) return;
    // The others start these calls: they hear that this rank never will, instead of waiting.
    std::string names;
    for (const auto& call : recorded) names += (names.empty() ? "" : ", ") + call.name;
    comm_->skip_calls("left a weft::group by an exception, so its " +
                      std::to_string(recorded.size()) + " call(s) there (" + names +
                      ") never started");
    for (auto& call : recorded) {
      fail_unstarted(*call.result, std::make_exception_ptr(error(
                                       errc::invalid_argument,
                                       "rank " + std::to_string(comm_->rank()) + ": " + call.name +
                                           " was not started: its weft::group "
                                           "was left by an exception")));
    }
  }

  // A recorded call that will not start: its handle is done, and throws `failure`.
  static void fail_unstarted(outcome_t& call, std::exception_ptr failure) {
    call.in_open_group = false;
    call.failure = std::move(failure);
    call.done.store(true, std::memory_order_release);
  }

  // Which recorded calls fuse: for each call, the index of the first call of its fused set
  // (itself when it runs alone or leads a set), and the algorithm the set runs with.
  void start_all(std::vector<recorded_t>& recorded) {
    const std::size_t limit = comm_->settings().fuse_bytes;
    std::vector<std::size_t> leader(recorded.size());
    std::vector<std::size_t> members(recorded.size(), 0);
    std::vector<std::string_view> algorithm(recorded.size());
    std::map<std::pair<const void*, std::string_view>, std::size_t> open_sets;
    for (std::size_t i = 0; i < recorded.size(); ++i) {
      leader[i] = i;
      const auto& offer = recorded[i].offer;
      if (!offer || offer->data.empty() || offer->data.size() > limit) continue;
      const std::string_view keeps = offer->keeps_bits_with(*comm_);
      if (keeps.empty()) continue;
      const auto [where, added] = open_sets.try_emplace({offer->kind, keeps}, i);
      leader[i] = where->second;
      algorithm[where->second] = keeps;
      ++members[where->second];
    }
    std::exception_ptr first_error;
    for (std::size_t i = 0; i < recorded.size(); ++i) {
      if (leader[i] != i) continue;
      try {
        if (members[i] > 1) {
          start_fused(recorded, leader, i, algorithm[i]);
        } else {
          detail::lanes_of(*comm_).start(*comm_, recorded[i].name, std::move(recorded[i].work),
                                         {recorded[i].result});
        }
      } catch (...) {
        if (!first_error) first_error = std::current_exception();
        for (std::size_t j = i; j < recorded.size(); ++j) {
          if (leader[j] == i) fail_unstarted(*recorded[j].result, std::current_exception());
        }
      }
    }
    if (first_error) std::rethrow_exception(first_error);
  }

  // One call for the set led by `first`: packs its members' data, runs the allreduce on the pack
  // with `algorithm`, unpacks; every member's handle gets the fused call's report.
  void start_fused(std::vector<recorded_t>& recorded, const std::vector<std::size_t>& leader,
                   std::size_t first, std::string_view algorithm) {
    std::vector<detail::bytes> parts;
    std::vector<std::shared_ptr<outcome_t>> results;
    std::size_t total = 0;
    for (std::size_t j = first; j < recorded.size(); ++j) {
      if (leader[j] != first) continue;
      parts.push_back(recorded[j].offer->data);
      total += recorded[j].offer->data.size();
      recorded[j].result->fused = true;
      results.push_back(recorded[j].result);
    }
    auto run_packed = recorded[first].offer->run_packed;
    auto work = [parts = std::move(parts), total, run_packed, algorithm](comm_t& lane) {
      const buffer<std::byte, typename comm_t::memory_type> packed(lane.memory(), total);
      std::size_t offset = 0;
      for (const auto part : parts) {
        lane.copy(packed.span().subspan(offset, part.size()), part);
        offset += part.size();
      }
      report result = run_packed(lane, packed.span(), algorithm);
      offset = 0;
      for (const auto part : parts) {
        lane.copy(part, packed.span().subspan(offset, part.size()));
        offset += part.size();
      }
      result.calls = static_cast<int>(parts.size());
      return result;
    };
    detail::lanes_of(*comm_).start(*comm_, "allreduce", std::move(work), std::move(results));
  }

  communicator_type* comm_;
  int unwinding_;
  bool ended_ = false;
};

template <transport Transport>
group(communicator<Transport>&) -> group<Transport>;

}  // namespace weft
