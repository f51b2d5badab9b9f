// weft/stream/endpoint.hpp — what a stream-ordered world (weft/stream/world.hpp) is made of:
// the backend it runs on, the operations it matches, and one rank's endpoint (the transport).
#pragma once

#include "weft/call.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/detail/request_handle.hpp"
#include "weft/stream/flags.hpp"
#include "weft/stream/whole_collective.hpp"
#include "weft/transport.hpp"

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace weft::stream {

// weft::stream::backend<B> — what a stream-ordered world needs of its device:
//   1. streams (ordered queues of work) made and destroyed per device: make_stream(device),
//      destroy_stream(s), and idle(s): true once everything enqueued on s has run;
//   2. memory_on(device, s): the memory space whose copy, combine and allocation run on s;
//   3. flags: allocate_flags(n) / free_flags(p, n) give 32-bit words streams and host both
//      reach; write_flag(s, f, v) and wait_flag(s, f, v) enqueue "set *f = v" and "wait until
//      *f reaches v" (weft/stream/flags.hpp's cyclic comparison);
//   4. direct_access(reader, owner): a kernel on device `reader` can read `owner`'s memory;
//   5. optionally wait_flags(s, waits): every wait of a span of flag_wait enqueued in one call
//      (cheaper than one call each where enqueuing costs the host, as on CUDA).
template <class B>
concept backend = requires(B& b, typename B::stream_type s, int device, std::uint32_t* flag,
                           std::uint32_t value, std::size_t n) {
  { b.make_stream(device) } -> std::same_as<typename B::stream_type>;
  {b.destroy_stream(s)};
  { b.idle(s) } -> std::same_as<bool>;
  { b.memory_on(device, s) } -> std::same_as<typename B::memory_type>;
  { b.allocate_flags(n) } -> std::same_as<std::uint32_t*>;
  {b.free_flags(flag, n)};
  {b.write_flag(s, flag, value)};
  {b.wait_flag(s, flag, value)};
  { b.direct_access(device, device) } -> std::same_as<bool>;
}
&&memory_space<typename B::memory_type>;

namespace detail {

// Which call a message belongs to, for the errors (weft::communicator tells it at each post).
struct call_note {
  collective kind = collective::sendrecv;
  std::string_view algorithm;
  int step = 0;
};

// One posted send or receive. It lives in the world's pool until it is both settled (its
// transfer enqueued, or withdrawn) and released (its request dropped).
struct operation {
  int source = 0;
  int destination = 0;
  tag_t tag = 0;
  const std::byte* send_data = nullptr;
  std::byte* recv_data = nullptr;
  std::size_t size = 0;
  bool is_send = false;
  std::optional<weft::detail::reducer>
      combine;  // a reducing receive's (a copy: the call may return first)
  const std::byte* own = nullptr;
  std::uint32_t posted = 0;  // the value the poster's "posted" flag takes at this post
  flag_ticket done;          // shared by the two sides of a transfer
  bool settled = false;
  bool released = false;
  bool waited = false;
  bool failed = false;         // the two sides' sizes differ
  std::size_t other_size = 0;  // the other side's size, when they differ
  call_note note;
  whole_call* whole = nullptr;  // a part of a whole collective (post_collective), else null
};

// A stream's wait for another rank, kept so a timed-out synchronize can say what it waits for.
struct wait_record {
  flag_ticket done;
  int peer = 0;
  bool is_send = false;
  std::size_t size = 0;
  call_note note;
};

// The size disagreement `op` took part in, from its side.
inline std::string mismatch_message(const operation& op) {
  const std::size_t sent = op.is_send ? op.size : op.other_size;
  const std::size_t room = op.is_send ? op.other_size : op.size;
  return "rank " + std::to_string(op.source) + " sends " + std::to_string(sent) +
         " bytes to rank " + std::to_string(op.destination) + ", whose matching receive holds " +
         std::to_string(room) + " bytes (" + std::string(to_string(op.note.kind)) + ", step " +
         std::to_string(op.note.step) + " on rank " +
         std::to_string(op.is_send ? op.source : op.destination) +
         "); the ranks made different calls, or with different counts";
}

// What a stream waiting on `w` waits for, for a timed-out synchronize.
inline std::string waiting_for(const wait_record& w) {
  const std::string peer = std::to_string(w.peer);
  const std::string kind(to_string(w.note.kind));
  return ": it waits for rank " + peer + " to " + (w.is_send ? "receive " : "send ") +
         std::to_string(w.size) + " bytes (" + kind +
         (w.note.algorithm.empty() ? "" : ", algorithm " + std::string(w.note.algorithm)) +
         ", step " + std::to_string(w.note.step) + "); rank " + peer + " may not have issued " +
         kind + ", or issued another call; abort() releases the streams";
}

}  // namespace detail

template <backend Backend>
class world;

// One rank's endpoint (weft::transport, weft::reducing_transport). Used by one host thread at a
// time, as a communicator is; several ranks' endpoints may be used from one thread.
template <backend Backend>
class transport {
 public:
  using memory_type = typename Backend::memory_type;
  using request = weft::detail::request_handle<transport, detail::operation>;
  // Collectives only enqueue: results are there once the stream is synchronized.
  static constexpr bool stream_ordered = true;
  static constexpr std::string_view tuning_key = Backend::tuning_key;

  transport(world<Backend>* shared, int rank) : world_(shared), rank_(rank) {}

  int rank() const { return rank_; }
  int size() const { return world_->size(); }
  memory_type& memory() { return world_->memory(rank_); }
  world<Backend>& shared() { return *world_; }

  request send(int peer, std::span<const std::byte> data, tag_t tag) {
    weft::detail::check_peer(rank_, size(), peer, "send to");
    return request(
        world_->post(true, rank_, peer, tag, data.data(), nullptr, data.size(), nullptr, nullptr),
        this);
  }
  request recv(int peer, std::span<std::byte> data, tag_t tag) {
    weft::detail::check_peer(rank_, size(), peer, "receive from");
    return request(
        world_->post(false, peer, rank_, tag, nullptr, data.data(), data.size(), nullptr, nullptr),
        this);
  }
  // target = combine(own, incoming), run by the transfer's lane straight from the send buffer.
  request recv_reduce(int peer, std::span<std::byte> target, std::span<const std::byte> own,
                      tag_t tag, const weft::detail::reducer& combine) {
    weft::detail::check_peer(rank_, size(), peer, "receive from");
    return request(world_->post(false, peer, rank_, tag, nullptr, target.data(), target.size(),
                                &combine, own.data()),
                   this);
  }

  // This rank's part of a whole collective (weft::collective_transport): once every rank has
  // posted with `tag`, a lane of each device runs that device's share straight from every
  // rank's input into every rank's output (weft/stream/whole_collective.hpp).
  request post_collective(collective kind, std::span<const std::byte> in, std::span<std::byte> out,
                          const weft::detail::reducer* combine, tag_t tag) {
    return request(world_->post_collective(rank_, kind, in, out, combine, tag), this);
  }
  bool runs_collectives() const { return world_->runs_collectives(); }

  // Orders this rank's stream after the transfer and returns true at once (never blocks the
  // host); throws when the two sides' sizes differ or the world was aborted.
  bool wait(request& operation, deadline_clock::time_point) {
    return world_->enqueue_wait(rank_, operation.operation());
  }
  bool test(request& operation) { return world_->enqueue_wait(rank_, operation.operation()); }

  // Told by weft::communicator before each post: the call the next messages belong to.
  void note_call(collective kind, std::string_view algorithm, int step) {
    world_->note_call(rank_, {kind, algorithm, step});
  }

  // weft::communicator's tell_others: a rank that gave up poisons the world.
  void abort(int, std::string_view reason) { world_->abort(std::string(reason)); }

 private:
  friend request;
  void cancel(detail::operation* op) { world_->release(op); }

  world<Backend>* world_;
  int rank_;
};

}  // namespace weft::stream
