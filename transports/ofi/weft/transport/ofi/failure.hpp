// weft/transport/ofi/failure.hpp — how a fabric error, a peer's end or the job's notice becomes
// an error.
//
// Every fabric error becomes weft::error with the provider, fi_strerror's text, the provider's
// own detail, this rank and the peer; connection errors are errc::peer_lost, a message longer or
// shorter than its receive names both sizes. A peer process on this host that ended
// (ofi/peer_watch.hpp) or a rank the job's notice names fails what needs it, naming the rank
// lost first.
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
