// weft/transport.hpp — the concepts every layer is written against.
//
//   element       what a collective can move and reduce
//   memory_space  where buffers live, and how to copy and combine there (CPU loop or kernel)
//   transport     tagged, non-blocking, two-sided point-to-point messages between ranks
//
// Each model states `static_assert(weft::transport<its_type>)` (or memory_space) next to its
// definition, so a model that drifts from the concept fails where it is written.
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>

#include "weft/call.hpp"
#include "weft/error.hpp"
#include "weft/ops.hpp"

namespace weft {

using tag_t = std::uint64_t;
using deadline_clock = std::chrono::steady_clock;

// The deadline `time` from now, saturating: a wait of duration::max() (or anything too long for
// the clock) waits as long as the clock can count instead of overflowing into the past; a
// negative time is a deadline already passed.
template <class Rep, class Period>
deadline_clock::time_point deadline_after(std::chrono::duration<Rep, Period> time) {
  const auto now = deadline_clock::now();
  if (time <= std::chrono::duration<Rep, Period>::zero()) return now;
  using seconds = std::chrono::duration<double>;
  const auto room = deadline_clock::time_point::max() - now;
  // (in doubles, which hold any duration; the second of margin covers their rounding)
  if (std::chrono::duration_cast<seconds>(time) >=
      std::chrono::duration_cast<seconds>(room) - seconds(1)) {
    return deadline_clock::time_point::max();
  }
  return now + std::chrono::duration_cast<deadline_clock::duration>(time);
}

// weft::element<T> — requirements on an element type:
//   1. T is trivially copyable (it travels as bytes and is copied with memcpy or a DMA);
//   2. T is an object type that is neither const, volatile, a pointer, nor a reference
//      (a pointer means nothing on another rank).
template <class T>
concept element = std::is_trivially_copyable_v<T> && std::is_object_v<T> && !std::is_const_v<T> &&
                  !std::is_volatile_v<T> && !std::is_pointer_v<T>;

// weft::memory_space_for<M, T, Op> — requirements on a memory space, for element T and
// reduction Op:
//   1. m.copy(dst, src) copies src.size() bytes (dst.size() == src.size()); ordered after
//      every earlier operation on m and on the transport that owns m;
//   2. m.combine(dst, a, b, op) sets dst[i] = op(a[i], b[i]) for every i; dst may be the same
//      span as a or as b (never a partial overlap);
//   3. m.finalize(data, op, ranks) applies op.finalize(x, ranks) to every element (avg);
//   4. m.allocate(bytes) returns scratch memory of the space aligned to 64 bytes, and
//      m.deallocate(pointer, bytes) releases it;
//   5. the CPU never reads or writes the space's memory except through these operations
//      (so a device memory space runs combine as a kernel, and algorithms stay unchanged).
template <class M, class T, class Op>
concept memory_space_for = requires(M& m, std::span<T> dst, std::span<const T> src, const Op& op,
                                    int ranks) {
  {m.combine(dst, src, src, op)};
  {m.finalize(dst, op, ranks)};
};

template <class M>
concept memory_space = requires(M& m, std::span<std::byte> dst, std::span<const std::byte> src,
                                std::byte* pointer, std::size_t bytes) {
  {m.copy(dst, src)};
  { m.allocate(bytes) } -> std::same_as<std::byte*>;
  {m.deallocate(pointer, bytes)};
}
&&memory_space_for<M, int, sum>;

// weft::transport<T> — requirements on a transport, in order:
//   1. T is movable and has a movable `T::request`, the handle of one posted operation;
//      destroying a request that has not completed cancels it: afterwards the transport no
//      longer touches its buffer;
//   2. t.rank() and t.size() give this rank and the world size, 0 <= rank < size;
//   3. t.send(peer, bytes, tag) and t.recv(peer, bytes, tag) post without blocking and
//      return a request; the buffer stays the caller's and must stay valid until the request
//      completes or is destroyed;
//   4. t.wait(request, deadline) blocks until the request completes (returns true) or the
//      deadline passes (returns false, the request still pending); it throws weft::error
//      (peer_lost, transport) naming this rank and the peer when the transfer cannot finish;
//   5. t.test(request) polls: true once the request has completed;
//   6. t.memory() returns the memory space the transport's buffers live in;
//   7. (semantic, checked by the conformance tests) messages between one pair with one tag
//      match in the order posted; a receive may be posted before or after its send; a send
//      to self works; zero-byte messages work; a receive names its exact size.
//
// `wait` establishes order, not host completion: once it returns true, every later operation
// issued through the transport or its memory space sees the transfer as complete.
template <class T>
concept transport = std::movable<T> && std::movable<typename T::request> &&
    requires(T& t, const T& ct, int peer, tag_t tag, std::span<const std::byte> out,
             std::span<std::byte> in, typename T::request& request,
             deadline_clock::time_point deadline) {
  { ct.rank() } -> std::same_as<int>;
  { ct.size() } -> std::same_as<int>;
  { t.send(peer, out, tag) } -> std::same_as<typename T::request>;
  { t.recv(peer, in, tag) } -> std::same_as<typename T::request>;
  { t.wait(request, deadline) } -> std::same_as<bool>;
  { t.test(request) } -> std::same_as<bool>;
  { t.memory() } -> memory_space;
} && memory_space<std::remove_cvref_t<decltype(std::declval<T&>().memory())>>;

namespace detail {
class reducer;
}

// weft::reducing_transport<T> — an optional refinement of transport:
//   1. t.recv_reduce(peer, target, own, tag, combine) posts a receive that, instead of copying
//      the incoming message, leaves target = combine(own, incoming) (target may be own), and
//      returns a request like recv;
//   2. the combine runs in the transport's memory space (through `combine`), exactly once.
// Shared-memory transports can reduce straight from the sender's buffer, saving a pass over
// memory; the communicator falls back to receive-then-combine for other transports.
template <class T>
concept reducing_transport = transport<T> &&
    requires(T& t, int peer, std::span<std::byte> target, std::span<const std::byte> own, tag_t tag,
             const detail::reducer& combine) {
  { t.recv_reduce(peer, target, own, tag, combine) } -> std::same_as<typename T::request>;
};

// weft::collective_transport<T> — an optional refinement for transports whose ranks all reach
// each other's buffers (the GPUs of one process, weft::cuda::communicators):
//   1. t.post_collective(kind, in, out, combine, tag) posts this rank's part of a whole
//      allreduce, reduce_scatter or allgather (combine is null for allgather) and returns a
//      request like send's; the transport runs the collective once every rank of the world has
//      posted with the same tag, each rank reducing its share straight from every rank's input
//      into every rank's output, in rank order;
//   2. t.runs_collectives() says whether it can now: false where some rank cannot reach
//      another's memory (then post_collective throws errc::invalid_argument).
// weft::fused is the algorithm that uses it.
template <class T>
concept collective_transport = transport<T> &&
    requires(T& t, collective kind, std::span<const std::byte> in, std::span<std::byte> out,
             const detail::reducer* combine, tag_t tag) {
  { t.post_collective(kind, in, out, combine, tag) } -> std::same_as<typename T::request>;
  { t.runs_collectives() } -> std::same_as<bool>;
};

// weft::in_switch_transport<T> — an optional refinement for transports whose ranks hang off a
// switch that reduces (NVLink SHARP, InfiniBand SHARP; today the simulator's machines):
//   1. t.post_in_switch(kind, members, in, out, combine, tag) posts this rank's part of an
//      allreduce, reduce_scatter or allgatherv among the transport ranks `members` (in the
//      group's rank order; this rank among them), and returns a request like send's. The switch
//      runs it once every member has posted with the same tag: each member sends its input up
//      once and receives its output once (combine is null for allgatherv, whose member i
//      contributes in.size() bytes at their place in `out`, in member order);
//   2. t.switch_reduces(members) says whether those ranks share such a switch (else
//      post_in_switch throws errc::invalid_argument);
//   3. t.in_switch_us(kind, members, bytes) is its time for `bytes` (the call's largest buffer),
//      what weft::automatic costs it at.
// weft::in_switch is the algorithm that uses it.
template <class T>
concept in_switch_transport = transport<T> &&
    requires(T& t, collective kind, std::span<const int> members, std::span<const std::byte> in,
             std::span<std::byte> out, const detail::reducer* combine, tag_t tag, double bytes) {
  { t.post_in_switch(kind, members, in, out, combine, tag) } -> std::same_as<typename T::request>;
  { t.switch_reduces(members) } -> std::same_as<bool>;
  { t.in_switch_us(kind, members, bytes) } -> std::same_as<double>;
};

// A message that arrived at this rank and matched no posted receive yet.
struct early_message {
  int peer = -1;
  tag_t tag = 0;
};

// weft::early_message_transport<T> — an optional refinement of transport:
//   t.early_messages(found) writes the (peer, tag) of messages that have arrived at this rank
//   and matched no receive yet into `found`, oldest first for each peer, and returns how many
//   there are (more than found.size() when some did not fit). It moves nothing: it reports what
//   earlier waits took in. The communicator reads it to tell a message of another call (a
//   mismatch) from a peer that is only slow.
template <class T>
concept early_message_transport = transport<T> && requires(T& t, std::span<early_message> found) {
  { t.early_messages(found) } -> std::same_as<std::size_t>;
};

// weft::peeking_transport<T> — an optional refinement of transport, for transports that cannot
// list what arrived early but can look for one message (libfabric's FI_PEEK):
//   t.peek(peer, tag, ignore) returns the tag of the oldest message from `peer` that arrived
//   before its receive and whose tag equals `tag` in the bits `ignore` leaves, or nullopt when
//   there is none (or the transport cannot look). It moves nothing. The communicator looks for
//   messages of other calls with it, where early_messages is not offered.
template <class T>
concept peeking_transport = transport<T> && requires(T& t, int peer, tag_t tag, tag_t ignore) {
  { t.peek(peer, tag, ignore) } -> std::same_as<std::optional<tag_t>>;
};

namespace detail {
// Throws errc::invalid_argument unless 0 <= peer < size; `what` is "send to" or "receive from".
// Transports call it before posting, so a bad rank is refused before anything is sent.
inline void check_peer(int rank, int size, int peer, const char* what) {
  if (peer < 0 || peer >= size) {
    throw error(errc::invalid_argument, "rank " + std::to_string(rank) + ": cannot " + what +
                                            " rank " + std::to_string(peer) + " in a world of " +
                                            std::to_string(size) + " ranks");
  }
}
}  // namespace detail

template <transport T>
using memory_space_of = std::remove_cvref_t<decltype(std::declval<T&>().memory())>;

}  // namespace weft
