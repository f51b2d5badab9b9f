// weft/transport/tcp/failure.hpp — how a failure becomes an error on every rank.
//
// A connection that ends without the peer's goodbye (the process exited, crashed or was
// killed) fails every pending and later request with errc::peer_lost naming that rank, and this
// rank tells every other rank at once (an abort frame), so all ranks learn of it even if they
// were not talking to it. A peer that closed its transport in order (goodbye) fails only the
// requests that need it. A size mismatch fails the receive with both sizes.
#pragma once

#include "weft/error.hpp"
#include "weft/transport/tcp/engine.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace weft::tcp::detail {

// True once done; throws when the operation cannot finish.
inline bool engine::finished(operation* op) {
  if (op->state == status::done && given_up_reason_.empty()) return true;
  // Plain pointers, not strings: this runs on every poll of a pending operation, and only the
  // throwing paths below need the words.
  const char* const verb = op->is_send ? "sending " : "receiving ";
  const char* const direction = op->is_send ? " bytes to rank " : " bytes from rank ";
  if (op->state == status::failed && op->size_mismatch) {  // the two sides' calls differ
    throw error(errc::mismatch, "rank " + std::to_string(rank_) + " expected " +
                                    std::to_string(op->size) + " bytes from rank " +
                                    std::to_string(op->peer) + " but the message has " +
                                    std::to_string(op->other_size) + " bytes (tag " +
                                    std::to_string(op->tag) + ")");
  }
  if (!given_up_reason_.empty()) {
    throw error(errc::peer_lost,
                "rank " + std::to_string(rank_) + " stopped " + verb + std::to_string(op->size) +
                    direction + std::to_string(op->peer) +
                    ": the other ranks count this rank as lost (" + given_up_reason_ +
                    "); it was stopped or slower than their timeout",
                rank_);
  }
  if (lost_rank_ >= 0) {
    throw error(errc::peer_lost,
                "rank " + std::to_string(rank_) + " stopped " + verb + std::to_string(op->size) +
                    direction + std::to_string(op->peer) + ": rank " + std::to_string(lost_rank_) +
                    " is lost (" + lost_reason_ + ")",
                lost_rank_);
  }
  if (const int heard = failures_ ? failures_->lost() : -1;
      heard >= 0 && heard != rank_ &&
      op->state != status::done) {  // the job's notice, through the store
    throw error(errc::peer_lost,
                "rank " + std::to_string(rank_) + " stopped " + verb + std::to_string(op->size) +
                    direction + std::to_string(op->peer) + ": rank " + std::to_string(heard) +
                    " is lost (" + failures_->why() + ")",
                heard);
  }
  if (op->state == status::failed) {
    throw error(errc::peer_lost,
                "rank " + std::to_string(rank_) + " cannot finish " + verb +
                    std::to_string(op->size) + direction + std::to_string(op->peer) + ": " +
                    peer_reason_[static_cast<std::size_t>(op->peer)],
                op->peer);
  }
  return false;
}

// Moves what can move without blocking; throws peer_lost once this rank knows a rank of the job
// is lost (or that the others count this one as lost), as every wait would.
inline void engine::poll() {
  io_.restart();
  io_.poll();
  if (!given_up_reason_.empty()) {
    throw error(errc::peer_lost,
                "rank " + std::to_string(rank_) + ": the other ranks count this rank as lost (" +
                    given_up_reason_ + "); it was stopped or slower than their timeout",
                rank_);
  }
  int lost = lost_rank_;
  std::string why = lost_reason_;
  if (lost < 0 && failures_ && failures_->lost() >= 0 && failures_->lost() != rank_) {
    lost = failures_->lost();
    why = failures_->why();
  }
  if (lost >= 0) {
    throw error(errc::peer_lost,
                "rank " + std::to_string(rank_) + ": rank " + std::to_string(lost) + " is lost (" +
                    why + ")",
                lost);
  }
}

// Tells every connected rank that `culprit` failed (their waits then throw peer_lost naming
// it), and fails this rank's own pending requests the same way. The notices are written before
// this returns (for up to notice_time): one may wait behind the tail of a data frame a peer is
// still reading, and the caller is about to throw and may not enter this transport again until
// it is destroyed — meanwhile that peer would wait for the data out to its timeout. `culprit` is
// this rank itself when its own call failed (a user reduction threw).
inline void engine::report_lost(int culprit, std::string_view reason) {
  if (culprit < 0 || culprit >= size_) return;
  if (lost_rank_ < 0) {
    lost_rank_ = culprit;
    lost_reason_ = std::string(reason);
    broadcast_abort();
  }
  const auto limit = deadline_clock::now() + notice_time;
  io_.restart();
  while (any_sends_queued() && io_.run_one_until(limit) != 0) {
  }
}

// The connection to c.peer ended: fail what needs it; without a goodbye, every rank hears.
inline void engine::lose(connection& c, const std::string& why) {
  if (!c.open) return;
  c.open = false;
  boost::system::error_code ignored;
  c.socket.close(ignored);
  const auto peer = static_cast<std::size_t>(c.peer);
  const bool orderly = c.goodbye;
  peer_reason_[peer] = orderly ? "rank " + std::to_string(c.peer) + " closed its transport"
                               : "the connection to rank " + std::to_string(c.peer) + " ended (" +
                                     why + ") without a goodbye: rank " + std::to_string(c.peer) +
                                     " exited, crashed or was killed, or the network failed";
  for (operation* op : c.sends) {
    if (op->orphan) {
      release(op);
    } else {
      op->state = status::failed;
    }
  }
  c.sends.clear();
  if (c.target != nullptr) c.target->state = status::failed;
  c.target = nullptr;
  for (operation* op : posted_[peer]) op->state = status::failed;
  posted_[peer].clear();
  for (auto& m : early_.from(c.peer)) {
    if (!m->complete && m->claimed != nullptr) {
      m->claimed->source = nullptr;
      m->claimed->state = status::failed;
      m->claimed = nullptr;
    }
  }
  if (orderly || closing_ || lost_rank_ >= 0) return;
  lost_rank_ = c.peer;
  lost_reason_ = peer_reason_[peer];
  broadcast_abort();
}

// A write to c.peer failed (it closed or reset the connection): what it sent before it went
// may still be unread, an abort notice or a goodbye among it, and that, not the broken pipe,
// says why. Read it first.
inline void engine::lose_after_reading(connection& c, const std::string& why) {
  drain(c);  // ends in lose(c, "end of stream") when the peer closed in order
  lose(c, why);
}

// Sends (lost_rank_, lost_reason_) to every rank still connected.
inline void engine::broadcast_abort() {
  std::vector<std::byte> notice(4 + std::min(lost_reason_.size(), max_abort_bytes - 4));
  put32(notice.data(), static_cast<std::uint32_t>(lost_rank_));
  std::memcpy(notice.data() + 4, lost_reason_.data(), notice.size() - 4);
  for (auto& other : connections_) {
    if (other && other->open) queue_control(*other, frame::abort, notice);
  }
}

}  // namespace weft::tcp::detail
