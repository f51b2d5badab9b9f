// weft/nonblocking/fusion.hpp — what an in-place allreduce in flight offers weft::group: how to
// tell whether fusing it with others of its kind keeps its result's bits, and how to run the fused
// call.
#pragma once

#include "weft/algorithms/direct.hpp"
#include "weft/algorithms/recursive_doubling.hpp"
#include "weft/collectives.hpp"
#include "weft/communicator.hpp"
#include "weft/dispatch/calls.hpp"
#include "weft/dispatch/selection.hpp"
#include "weft/nonblocking/lanes.hpp"

#include <memory>
#include <span>
#include <string_view>
#include <type_traits>

namespace weft::detail {

// An algorithm that reduces every element in the same order wherever it sits in the buffer.
template <class Algorithm>
constexpr bool same_order_everywhere_v = [] {
  if constexpr (requires { Algorithm::same_order_everywhere; })
    return bool(Algorithm::same_order_everywhere);
  else
    return false;
}();

// Its address names one element type, op and algorithm: the calls that may fuse.
template <class T, class Op, class Algorithm>
inline constexpr char fusion_kind = 0;

template <transport Transport, element T, class Op, class Algorithm>
std::shared_ptr<const fusion_offer<communicator<Transport>>> offer_fusion(std::span<T> data) {
  using comm_t = communicator<Transport>;
  if constexpr (!std::is_empty_v<Op> || !std::is_default_constructible_v<Op>) {
    return nullptr;  // an op with state of its own is this call's alone
  } else {
    auto offer = std::make_shared<fusion_offer<comm_t>>();
    offer->kind = &fusion_kind<T, Op, Algorithm>;
    offer->data = std::as_writable_bytes(data);
    offer->keeps_bits_with = [data](comm_t& comm) -> std::string_view {
      if constexpr (std::is_integral_v<T>) {
        return Algorithm::name;  // every op is exact on integers: any algorithm keeps the bits
      } else if constexpr (std::is_same_v<Algorithm, automatic>) {
        const reducer combine(comm.memory(), Op{}, std::type_identity<T>{});
        const reduction_call<collective::allreduce, is_commutative_v<Op>> call{
            std::as_bytes(data), std::as_writable_bytes(data), &combine, -1,
            &describe_reduction<T, Op, collective::allreduce>};
        const std::string_view chosen = automatic_choice(comm, call, builtin_algorithms{});
        return chosen == recursive_doubling::name || chosen == direct::name ? chosen
                                                                            : std::string_view{};
      } else {
        return same_order_everywhere_v<Algorithm> ? Algorithm::name : std::string_view{};
      }
    };
    offer->run_packed = [](comm_t& lane, bytes packed, std::string_view algorithm) -> report {
      const std::span<T> typed(reinterpret_cast<T*>(packed.data()), packed.size() / sizeof(T));
      if (algorithm == Algorithm::name)
        return allreduce<Transport, T, Op, Algorithm>(lane, typed, Op{}, Algorithm{});
      if constexpr (is_commutative_v<Op> || recursive_doubling::keeps_rank_order) {
        if (algorithm == recursive_doubling::name) {
          return allreduce<Transport, T, Op, recursive_doubling>(lane, typed, Op{},
                                                                 recursive_doubling{});
        }
      }
      return allreduce<Transport, T, Op, direct>(lane, typed, Op{}, direct{});
    };
    return offer;
  }
}

}  // namespace weft::detail
