// weft/transport/sim/endpoint.hpp — one simulated rank's side of the world: its transport
// (weft::transport, and weft::in_switch_transport where the fabric's switches reduce) and its
// memory space, whose combines and copies cost virtual time. The world they share, and the
// model, are in weft/transport/sim/world.hpp.
#pragma once

#include "weft/detail/request_handle.hpp"
#include "weft/error.hpp"
#include "weft/hosts.hpp"
#include "weft/memory.hpp"
#include "weft/transport.hpp"
#include "weft/transport/sim/in_switch.hpp"
#include "weft/transport/sim/phantom.hpp"
#include "weft/transport/sim/world.hpp"
#include "weft/tuning/cost_model.hpp"

#include <cstddef>
#include <cstring>
#include <span>
#include <utility>

namespace weft::sim {

// One rank's memory space: host memory whose combines and copies also cost virtual time;
// phantom buffers are skipped (weft/transport/sim/phantom.hpp).
class memory {
 public:
  // `timed`: combines and copies cost the rank virtual time (false: the switch's reduction).
  memory(world* shared, int rank, bool timed = true) : world_(shared), rank_(rank), timed_(timed) {}

  void copy(std::span<std::byte> dst, std::span<const std::byte> src) const;
  template <class T, class Op>
  void combine(std::span<T> dst, std::span<const T> a, std::span<const T> b, const Op& op) const;
  template <class T, class Op>
  void finalize(std::span<T> data, const Op& op, int ranks) const;
  std::byte* allocate(std::size_t bytes) const;
  void deallocate(std::byte* pointer, std::size_t bytes) const;

 private:
  double seconds(double traffic) const;

  world* world_;
  int rank_;
  bool timed_;
};
static_assert(memory_space<memory>);

// One rank's endpoint (weft::transport). Used by that rank's thread only.
class transport {
 public:
  // Drops (cancels) its operation when destroyed (weft/detail/request_handle.hpp).
  using request = weft::detail::request_handle<transport, detail::operation>;

  transport(world* shared, int rank) : world_(shared), rank_(rank), memory_(shared, rank) {}

  int rank() const { return rank_; }
  int size() const;
  sim::memory& memory() { return memory_; }
  // The fabric's nodes, as hosts (weft::hierarchical's tiers, split_by_host).
  const host_layout* hosts() const;

  request send(int peer, std::span<const std::byte> data, tag_t tag);
  request recv(int peer, std::span<std::byte> data, tag_t tag);
  // Waits in virtual time: never blocks past the deadline's meaning (there is no wall-clock
  // deadline in a simulation); throws when the ranks deadlock or another rank failed.
  bool wait(request& operation, deadline_clock::time_point);
  bool test(request& operation);

  // weft::in_switch (weft::in_switch_transport): this rank's part of an operation the switch
  // that `members` hang off runs, whether they share one that reduces, and its time.
  request post_in_switch(collective kind, std::span<const int> members,
                         std::span<const std::byte> in, std::span<std::byte> out,
                         const weft::detail::reducer* combine, tag_t tag);
  bool switch_reduces(std::span<const int> members) const;
  double in_switch_us(collective kind, std::span<const int> members, double bytes) const;
  // Told by weft's dispatch at the start of each call: spends the fabric's launch overhead.
  void begin_call(collective kind);

  // This rank's virtual clock, in seconds since the run began.
  double now() const;
  // Spends `seconds` of this rank's virtual time computing (a layer's GEMMs, say): what a
  // training step does between its collectives.
  void compute(double seconds);
  // weft::automatic's rows for this machine, node-local and network: a route's latency (alpha),
  // its slowest link (beta), the memory a combine's traffic is timed at (gamma).
  std::pair<tuning::link_constants, tuning::link_constants> cost_constants() const;

 private:
  friend request;
  void cancel(detail::operation* op);

  world* world_;
  int rank_;
  sim::memory memory_;
};
static_assert(weft::transport<transport>);
static_assert(weft::in_switch_transport<transport>);

// --- out of line ------------------------------------------------------------------------------

inline int transport::size() const { return world_->size(); }
inline const host_layout* transport::hosts() const { return &world_->hosts(); }
inline double transport::now() const { return world_->now(rank_); }
inline void transport::compute(double seconds) { world_->advance(rank_, seconds); }
inline std::pair<tuning::link_constants, tuning::link_constants> transport::cost_constants() const {
  return world_->cost_constants();
}

inline transport::request transport::send(int peer, std::span<const std::byte> data, tag_t tag) {
  weft::detail::check_peer(rank_, size(), peer, "send to");
  return request(world_->post(rank_, true, peer, data.data(), nullptr, data.size(), tag), this);
}
inline transport::request transport::recv(int peer, std::span<std::byte> data, tag_t tag) {
  weft::detail::check_peer(rank_, size(), peer, "receive from");
  return request(world_->post(rank_, false, peer, nullptr, data.data(), data.size(), tag), this);
}
inline bool transport::wait(request& operation, deadline_clock::time_point) {
  return world_->wait(rank_, operation.operation());
}
inline bool transport::test(request& operation) {
  return world_->test(rank_, operation.operation());
}
inline void transport::cancel(detail::operation* op) { world_->release(op); }

inline transport::request transport::post_in_switch(collective kind, std::span<const int> members,
                                                    std::span<const std::byte> in,
                                                    std::span<std::byte> out,
                                                    const weft::detail::reducer* combine,
                                                    tag_t tag) {
  auto [part, finished] = world_->post_in_switch(rank_, kind, members, in, out, combine, tag);
  request result(part, this);
  if (finished) {  // the last part: the result, written by the switch at no cost to the ranks
    sim::memory untimed(world_, rank_, false);
    detail::switch_result(*finished, untimed);
  }
  return result;
}
inline bool transport::switch_reduces(std::span<const int> members) const {
  return world_->switch_of(members) != nullptr;
}
inline double transport::in_switch_us(collective kind, std::span<const int> members,
                                      double bytes) const {
  const reducing_switch* hub = world_->switch_of(members);
  if (hub == nullptr) return tuning::never;
  return world::switch_seconds(*hub, kind, static_cast<int>(members.size()), bytes) * 1e6;
}
inline void transport::begin_call(collective) {
  world_->advance(rank_, world_->machine().launch_seconds());
}

inline double memory::seconds(double traffic) const {
  return timed_ ? world_->memory_seconds(traffic) : 0.0;
}

inline void memory::copy(std::span<std::byte> dst, std::span<const std::byte> src) const {
  if (src.empty() || dst.data() == src.data()) return;
  if (!world_->skip_bytes(dst.data(), src.data())) std::memcpy(dst.data(), src.data(), src.size());
  world_->advance(rank_, seconds(2.0 * static_cast<double>(src.size())));
}

template <class T, class Op>
void memory::combine(std::span<T> dst, std::span<const T> a, std::span<const T> b,
                     const Op& op) const {
  if (dst.empty()) return;
  if (!world_->skip_bytes(dst.data(), a.data(), b.data())) host_memory{}.combine(dst, a, b, op);
  world_->advance(rank_, seconds(3.0 * static_cast<double>(dst.size_bytes())));
}

template <class T, class Op>
void memory::finalize(std::span<T> data, const Op& op, int ranks) const {
  if (data.empty()) return;
  if (!world_->skip_bytes(data.data())) host_memory{}.finalize(data, op, ranks);
  if constexpr (has_finalize_v<Op, T>)
    world_->advance(rank_, seconds(2.0 * static_cast<double>(data.size_bytes())));
}

inline std::byte* memory::allocate(std::size_t bytes) const {
  if (world_->mode() == payload::phantom) return detail::phantom_ranges::get().reserve(bytes);
  return host_memory{}.allocate(bytes);
}
inline void memory::deallocate(std::byte* pointer, std::size_t bytes) const {
  if (world_->mode() == payload::phantom)
    return detail::phantom_ranges::get().release(pointer, bytes);
  host_memory{}.deallocate(pointer, bytes);
}

}  // namespace weft::sim
