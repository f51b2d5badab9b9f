// weft/transport/ofi/completion.hpp — how the libfabric transport learns what finished, and what
// failed.
//
// Progress is manual: a waiting rank reads its completion queue, which is also what moves its
// peers' data on most providers. A message completes when its last piece does. Every fabric
// error becomes weft::error with the provider, fi_strerror's text, the provider's own detail,
// this rank and the peer; connection errors are errc::peer_lost, a message longer or shorter
// than its receive names both sizes.
#pragma once

#include "weft/error.hpp"
#include "weft/transport/ofi/engine.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <cerrno>
#include <cstddef>
#include <string>

namespace weft::ofi::detail {

// Reads the completion queue once (and retries deferred posts); true if anything happened.
inline bool engine::progress() {
  if (ep_ == nullptr) return false;
  fi_cq_tagged_entry entries[16];
  bool any = false;
  {  // counted as one call into the provider (drain_backlog counts its own)
    provider_call call(calls_);
    while (true) {
      const ssize_t count = fi_cq_read(cq_, entries, 16);
      if (count == -FI_EAGAIN) break;
      if (count == -FI_EAVAIL) {
        read_error();
        any = true;
        continue;
      }
      if (count < 0) fail_call("fi_cq_read", static_cast<int>(count));
      for (ssize_t i = 0; i < count; ++i) {
        auto* p = static_cast<piece*>(entries[i].op_context);
        if (p == &peek_piece_) {  // a peek that found a message
          peeked_tag_ = entries[i].tag;
          peek_state_ = peek_state::found;
          continue;
        }
        complete(p, &entries[i]);
      }
      any = any || count > 0;
      if (count < 16) break;
    }
  }
  if (!backlog_.empty()) drain_backlog();
  return any;
}

inline void engine::complete(piece* p, const fi_cq_tagged_entry* entry) {
  operation* op = p->owner;
  if (entry != nullptr && !op->is_send && entry->len != p->size && op->state != status::failed) {
    fail(op, errc::mismatch, size_mismatch(op->size, entry->len, op->tag));
  }
  if (++op->completed < op->pieces.size()) return;
  --in_flight_;
  if (op->state == status::posted) op->state = status::done;
  registrations_.release(op->memory);
  op->memory = nullptr;
  if (op->orphan) release(op);
}

inline void engine::read_error() {
  fi_cq_err_entry failure{};
  if (fi_cq_readerr(cq_, &failure, 0) < 0) return;
  auto* p = static_cast<piece*>(failure.op_context);
  if (p == nullptr) return;
  if (p == &peek_piece_) {  // a peek that found nothing (FI_ENOMSG), or could not look
    if (failure.err != FI_ENOMSG) can_peek_ = false;
    peek_state_ = peek_state::none;
    return;
  }
  operation* op = p->owner;
  if (failure.err == FI_ECANCELED) {
    complete(p, nullptr);
    return;
  }
  char detail_text[256] = {0};
  fi_cq_strerror(cq_, failure.prov_errno, failure.err_data, detail_text, sizeof detail_text);
  const bool connection = failure.err == FI_ECONNREFUSED || failure.err == FI_ECONNRESET ||
                          failure.err == FI_ECONNABORTED || failure.err == FI_ENOTCONN ||
                          failure.err == FI_EHOSTUNREACH || failure.err == FI_ETIMEDOUT ||
                          failure.err == EPIPE || failure.err == FI_EIO;
  if (failure.err == FI_ETRUNC || failure.err == FI_EMSGSIZE) {
    fail(op, errc::mismatch, size_mismatch(op->size, failure.olen + failure.len, op->tag));
  } else if (connection && (peer_gone(op->peer) || job_lost() >= 0)) {
    // The peer went (its process ended, or the job lost a rank): name the rank lost first, as
    // a wait on it would, not the provider's error.
    fail_gone(op);
  } else {
    fail(op, connection ? errc::peer_lost : errc::transport,
         who() + (op->is_send ? " could not send to rank " : " could not receive from rank ") +
             std::to_string(op->peer) + " over provider '" + provider_name() +
             "': " + text_of(failure.err) + " (" + detail_text + ")");
  }
  complete(p, nullptr);
}

inline void engine::fail(operation* op, errc code, const std::string& why, int culprit) {
  if (op->state == status::failed) return;
  peer_failed_ = true;
  op->state = status::failed;
  op->code = code;
  op->failure = why;
  op->culprit = culprit;
}

inline std::string engine::lost_message(const operation* op, int lost) const {
  const std::string what =
      who() + (op->is_send ? " could not send to rank " : " could not receive from rank ") +
      std::to_string(op->peer);
  if (lost == rank_)
    return what + ": the other ranks count this rank as lost (" + failures_->why() + ")";
  return what + ": rank " + std::to_string(lost) + " is lost (" + failures_->why() + ")";
}

inline void engine::fail_call(const char* what, int code) const {
  throw error(errc::transport, who() + ": " + what + " failed on provider '" + provider_name() +
                                   "': " + text_of(code));
}

inline std::string engine::size_mismatch(std::size_t expected, std::size_t got, tag_t tag) const {
  return who() + " expected " + std::to_string(expected) +
         " bytes from the peer but the message has " + std::to_string(got) + " bytes (tag " +
         std::to_string(tag) + ")";
}

inline std::string engine::gone_message(const operation* op) const {
  return who() + (op->is_send ? " could not send to rank " : " could not receive from rank ") +
         std::to_string(op->peer) + ": its process (pid " +
         std::to_string(watch_->pid_of(op->peer)) + " on this host) has ended";
}

}  // namespace weft::ofi::detail
