// weft/stream/operations.hpp — the sends and receives the stream-ordered protocol matches, in
// one process (weft/stream/local_ranks.hpp) and between processes (weft/stream/processes.hpp),
// and what their errors say.
#pragma once

#include "weft/call.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/stream/flags.hpp"
#include "weft/stream/whole_collective.hpp"
#include "weft/transport.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace weft::stream::detail {

// Which call a message belongs to, for the errors (weft::communicator tells it at each post).
struct call_note {
  collective kind = collective::sendrecv;
  std::string_view algorithm;
  int step = 0;
};

// One posted send or receive. It lives in its ranks' operation pool until it is both settled (its
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

}  // namespace weft::stream::detail
