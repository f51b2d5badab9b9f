// weft/options.hpp — a communicator's options: how long a wait may block, the piece sizes of
// pipelined algorithms, direct's handshake, check mode; each also read from the environment
// (docs/tuning.md has every variable).
#pragma once

#include "weft/detail/env.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace weft {

struct options {
  // Longest any single wait may block before it throws errc::timeout.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // Pipelined algorithms move messages in pieces of at most this many bytes ...
  std::size_t chunk_bytes = std::size_t{1} << 20;
  // ... except those that reduce each piece (ring's and recursive halving's exchanges, the
  // double binary tree): pieces of this many bytes, sized so that a piece is still in cache
  // when it is reduced and sent on. 0: the transport's measured size (its row in
  // tuning/cost_model.hpp; 256 KiB over TCP), else chunk_bytes.
  std::size_t reduce_chunk_bytes = 0;
  // direct's exchanges with everyone, on 3 or more ranks, send a block of at least this many
  // bytes only once its receiver has posted the receive and said so (a zero-byte message), so
  // ranks that start early do not spend the CPUs pushing blocks to ranks that have not started.
  // Unset: the transport's measured size (64 KiB over TCP, never elsewhere); 0: never.
  std::optional<std::size_t> handshake_bytes;
  // Before each collective, ranks compare what they were asked to do (errc::mismatch).
  bool check = false;
  // Without check mode, calls that differ are still found from their messages: a digest of each
  // call in its tags, and what arrived early read by slow waits and at each call's end
  // (weft/communicator/consistency.hpp). Off: such calls may wait out the timeout, or
  // return each other's data where the messages happen to fit. The same on every rank.
  bool detect_mismatch = true;
  // Calls in flight (weft/nonblocking.hpp) are moved forward by a thread of the communicator's
  // own, not only inside test() and wait(): for callers that compute without calling into weft
  // over transports that move data only when called (tcp, ofi, shm, inproc).
  bool progress_thread = false;
  // weft::group fuses in-place allreduces of at most this many bytes each; 0: none.
  std::size_t fuse_bytes = std::size_t{1} << 20;
  // The calls the flight recorder keeps per communicator (weft/recorder.hpp); 0: no recorder.
  std::size_t recorder_calls = 64;

  // Defaults overridden by WEFT_TIMEOUT_MS, WEFT_CHUNK_BYTES, WEFT_REDUCE_CHUNK_BYTES,
  // WEFT_HANDSHAKE_BYTES, WEFT_CHECK, WEFT_DETECT_MISMATCH, WEFT_PROGRESS_THREAD, WEFT_FUSE_BYTES
  // and WEFT_RECORDER
  // (docs/tuning.md);
  // a value that cannot be read, a timeout of 0 and a piece size under smallest_piece are refused.
  static options from_environment() {
    namespace env = detail::env;
    options result;
    if (const auto value = env::timeout()) result.timeout = *value;
    if (const auto value = env::piece_bytes("WEFT_CHUNK_BYTES", smallest_piece, largest_piece))
      result.chunk_bytes = static_cast<std::size_t>(*value);
    if (const auto value = env::piece_bytes("WEFT_REDUCE_CHUNK_BYTES", smallest_piece,
                                            largest_piece, "the transport's measured size"))
      result.reduce_chunk_bytes = static_cast<std::size_t>(*value);
    if (const auto value = env::bytes("WEFT_HANDSHAKE_BYTES", SIZE_MAX))
      result.handshake_bytes = static_cast<std::size_t>(*value);
    if (const auto value = env::flag("WEFT_CHECK")) result.check = *value;
    if (const auto value = env::flag("WEFT_DETECT_MISMATCH")) result.detect_mismatch = *value;
    if (const auto value = env::flag("WEFT_PROGRESS_THREAD")) result.progress_thread = *value;
    if (const auto value = env::bytes("WEFT_FUSE_BYTES", largest_piece))
      result.fuse_bytes = static_cast<std::size_t>(*value);
    if (const auto value = env::count("WEFT_RECORDER", std::uint64_t{1} << 20))
      result.recorder_calls = static_cast<std::size_t>(*value);
    return result;
  }
  // The smallest piece size the environment may ask for (4 KiB; the options themselves take any
  // size from 1 byte, for tests that exercise many pieces on small inputs).
  static constexpr std::uint64_t smallest_piece = 4096;
  // The largest piece size the environment may ask for (1 TiB).
  static constexpr std::uint64_t largest_piece = std::uint64_t{1} << 40;
};

}  // namespace weft
