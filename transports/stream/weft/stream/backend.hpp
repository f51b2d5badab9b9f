// weft/stream/backend.hpp — what the stream-ordered protocol runs on: a device's streams, the
// flags they wait on and write, and a memory space bound to a stream. CPU threads are one
// backend (weft/stream/host_streams.hpp), CUDA another (weft/transport/cuda/communicators.hpp).
#pragma once

#include "weft/transport.hpp"

#include <concepts>
#include <cstddef>
#include <cstdint>

namespace weft::stream {

// weft::stream::backend<B> — what the stream-ordered protocol needs of a device:
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

}  // namespace weft::stream
