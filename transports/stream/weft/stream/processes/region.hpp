// weft/stream/processes/region.hpp — the host memory a stream-ordered rank shares with the
// ranks of its host (weft/stream/processes.hpp), and how it is laid out.
//
// One region per rank (memfd, as the shm transport's: no name anywhere, gone with the last
// process that maps it), mapped by every peer, and registered with the device where the
// backend has one, so that streams wait on and write its words:
//
//   control    the owner's doorbell (its progress thread sleeps on it), closed, aborted and why
//   posted     the word the owner's stream raises at each post: a peer's transfer reads a
//              message once this word reaches the post that sent it
//   inbound    one FIFO of envelopes per sending rank (itself included): tail (envelopes the
//              owner has read), then the envelopes; a sender fills one and publishes it by
//              writing its sequence number last, then rings the owner's doorbell
//   flags      the owner's done flags: a send's is written by the receiver's transfer, once it
//              has read the message; a receive's by that transfer too
//
// The message itself lies in the sender's device pool (which every peer maps): a buffer the
// user allocated there (registered) is read in place, any other is first copied there by the
// sender's stream (staged). So a message is one copy from a registered buffer, two otherwise.
#pragma once

#include "weft/error.hpp"
#include "weft/transport/shm/region.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::stream {

using weft::shm::detail::cache_line;
using weft::shm::detail::control_block;
using weft::shm::detail::shared_counter;

// What a peer reads of the owner's state besides control_block.
struct alignas(cache_line) state_block {
  std::atomic<std::uint32_t> aborted;  // 1 once `reason` is written: every peer aborts too
  char reason[cache_line * 3 - sizeof(std::uint32_t)];
};

// One message announced to its receiver, or one rank's part of a whole collective announced to
// every other rank. Published when `sequence` reads 1 + the envelopes the sender published
// before it on this FIFO.
struct alignas(cache_line) envelope {
  std::atomic<std::uint64_t> sequence;
  std::uint64_t tag;
  std::uint64_t bytes;      // the message's (a part's input) bytes
  std::uint64_t where;      // its offset in the sender's pool
  std::uint64_t out_bytes;  // a part's output bytes
  std::uint64_t out_where;  // and its offset in the sender's pool
  std::uint32_t posted;  // the sender's post: its `posted` word reaches it once the data is there
  std::uint32_t flag;    // a message: the sender's done flag (an index into its flags), written
                         // when read; a part: the flag the sender's share raises when done
  std::uint32_t value;   // what that flag is raised to
  std::uint32_t kind;    // 0: a message; else 1 + the collective of a part
  // A message staged in pieces (pieces > 1): `where` and `out_where` are the two areas the
  // sender's staging carrier fills in turn, `out_bytes` a piece's bytes; the carrier raises `ready`
  // to ready_value + i once piece i is in its area, the receiver's transfer raises `consumed`
  // to consumed_value + i once it has read it.
  std::uint32_t pieces;
  std::uint32_t ready;
  std::uint32_t ready_value;
  std::uint32_t consumed;
  std::uint32_t consumed_value;
};
static_assert(sizeof(envelope) == 2 * cache_line);

inline constexpr std::size_t flag_chunk = 1024;  // flags are handed out in chunks of this many

// Where things are in the region of a job of `ranks` with `envelopes` per FIFO and `flags`.
struct layout {
  std::size_t ranks = 0;
  std::size_t envelopes = 0;
  std::size_t flags = 0;

  static constexpr std::size_t state_offset() { return sizeof(control_block); }
  static constexpr std::size_t posted_offset() { return state_offset() + sizeof(state_block); }
  std::size_t fifo_bytes() const { return sizeof(shared_counter) + envelopes * sizeof(envelope); }
  std::size_t fifo_offset(int sender) const {
    return posted_offset() + cache_line + static_cast<std::size_t>(sender) * fifo_bytes();
  }
  std::size_t flags_offset() const { return fifo_offset(static_cast<int>(ranks)); }
  std::size_t total() const {
    const std::size_t end = flags_offset() + flags * sizeof(std::uint32_t);
    return (end + shm::detail::page_bytes - 1) / shm::detail::page_bytes * shm::detail::page_bytes;
  }
};

// One rank's region as laid out by `shape`, at `base` (its own mapping or a peer's).
struct region_view {
  std::byte* base = nullptr;
  const layout* shape = nullptr;

  control_block* control() const { return reinterpret_cast<control_block*>(base); }
  state_block* state() const {
    return reinterpret_cast<state_block*>(base + layout::state_offset());
  }
  std::uint32_t* posted() const {
    return reinterpret_cast<std::uint32_t*>(base + layout::posted_offset());
  }
  shared_counter* tail(int sender) const {
    return reinterpret_cast<shared_counter*>(base + shape->fifo_offset(sender));
  }
  envelope* slot(int sender, std::uint64_t sequence) const {
    auto* first =
        reinterpret_cast<envelope*>(base + shape->fifo_offset(sender) + sizeof(shared_counter));
    return first + sequence % shape->envelopes;
  }
  std::uint32_t* flags() const {
    return reinterpret_cast<std::uint32_t*>(base + shape->flags_offset());
  }
};

// The flag memory of weft::stream::flag_pool: chunks of this rank's region, never freed.
class region_flags {
 public:
  region_flags(std::uint32_t* first, std::size_t count) : next_(first), left_(count) {}
  std::uint32_t* allocate_flags(std::size_t n) {
    if (n > left_) {
      throw error(errc::transport,
                  "stream-ordered transport: more than " + std::to_string(used_) +
                      " messages in flight at once; wait for some before posting more");
    }
    std::uint32_t* chunk = next_;
    next_ += n;
    left_ -= n;
    used_ += n;
    return chunk;
  }
  void free_flags(std::uint32_t*, std::size_t) {}

 private:
  std::uint32_t* next_;
  std::size_t left_;
  std::size_t used_ = 0;
};

}  // namespace weft::stream
