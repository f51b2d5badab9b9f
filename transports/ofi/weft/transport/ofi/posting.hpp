// weft/transport/ofi/posting.hpp — how the libfabric transport posts sends and receives.
//
// A message longer than the provider's largest goes in pieces, each its own fi_tsend or
// fi_trecv under the message's tag (folded into the bits the provider leaves). Posts that meet
// -FI_EAGAIN wait in the backlog, in order, and are retried as the completion queue drains, so
// per-tag order never changes. A send to this rank itself meets its receive here (one copy, no
// fabric). Nothing is posted to a peer process on this host that has ended.
#pragma once

#include "weft/error.hpp"
#include "weft/transport/ofi/engine.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace weft::ofi::detail {

inline operation* engine::post(bool is_send, int peer, std::byte* data, std::size_t size,
                               tag_t tag) {
  weft::detail::check_peer(rank_, size_, peer, is_send ? "send to" : "receive from");
  auto* op = pool_.acquire();
  op->is_send = is_send;
  op->peer = peer;
  op->tag = tag;
  op->data = data;
  op->size = size;
  op->state = status::queued;
  if (peer == rank_) {
    post_self(op);
    return op;
  }
  if (broken_) {
    fail(op, errc::transport, broken_reason_);
    return op;
  }
  if (job_lost() == rank_) {  // the others gave up on this rank
    fail(op, errc::peer_lost, lost_message(op, rank_));
    return op;
  }
  if (peer_gone(peer)) {
    fail_gone(op);
    return op;
  }
  op->memory = registrations_.acquire(data, size);
  const std::size_t count = size == 0 ? 1 : (size + max_message_ - 1) / max_message_;
  op->pieces.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    auto& p = op->pieces[i];
    p.owner = op;
    p.data = data + i * max_message_;
    p.size = std::min(max_message_, size - std::min(size, i * max_message_));
    backlog_.push_back(&p);
  }
  ++in_flight_;
  op->state = status::posted;
  drain_backlog();
  return op;
}

inline std::optional<tag_t> engine::peek(int peer, tag_t tag, tag_t ignore) {
  // (a provider that keeps upper tag bits folds them into the lower ones: no mask survives that)
  if (!can_peek_ || ep_ == nullptr || broken_ || peer == rank_ || peer < 0 || peer >= size_ ||
      peer_gone(peer) || tag_mask_ != ~std::uint64_t{0} || peek_state_ == peek_state::posted) {
    return std::nullopt;
  }
  fi_msg_tagged message{};
  message.addr = addresses_[static_cast<std::size_t>(peer)];
  message.tag = tag;
  message.ignore = ignore;
  message.context = &peek_piece_.context;
  ssize_t code;
  {
    provider_call call(calls_);
    code = fi_trecvmsg(ep_, &message, FI_PEEK);
  }
  if (code == -FI_EAGAIN) return std::nullopt;  // the provider is busy: look next time
  if (code != 0) {                              // it cannot peek: the communicator waits as before
    can_peek_ = false;
    return std::nullopt;
  }
  peek_state_ = peek_state::posted;
  // The provider answers from its own queue of early messages: at once, in practice.
  const auto until = deadline_clock::now() + std::chrono::milliseconds(100);
  while (peek_state_ == peek_state::posted && deadline_clock::now() < until) progress();
  if (peek_state_ == peek_state::posted) {  // no answer: it stays posted, and no other is made
    can_peek_ = false;
    return std::nullopt;
  }
  const bool found = peek_state_ == peek_state::found;
  peek_state_ = peek_state::idle;
  if (!found) return std::nullopt;
  return peeked_tag_;
}

inline std::uint64_t engine::fabric_tag(tag_t tag) const {
  // Providers that reserve upper tag bits get them folded into the lower ones.
  return (tag & tag_mask_) ^ ((tag & ~tag_mask_) >> 32);
}

// A send to self meets its receive here: one copy, no fabric.
inline void engine::post_self(operation* op) {
  auto& others = op->is_send ? self_receives_ : self_sends_;
  auto match = std::find_if(others.begin(), others.end(),
                            [&](auto* other) { return other->tag == op->tag; });
  if (match == others.end()) {
    (op->is_send ? self_sends_ : self_receives_).push_back(op);
    return;
  }
  auto* other = *match;
  others.erase(match);
  auto* sent = op->is_send ? op : other;
  auto* received = op->is_send ? other : op;
  if (sent->size != received->size) {
    fail(received, errc::mismatch, size_mismatch(received->size, sent->size, received->tag));
    sent->state = status::done;
    return;
  }
  if (sent->size != 0) std::memcpy(received->data, sent->data, sent->size);
  sent->state = received->state = status::done;
}

// Posts queued pieces in order until the provider says -FI_EAGAIN.
inline void engine::drain_backlog() {
  while (!backlog_.empty()) {
    piece* p = backlog_.front();
    operation* op = p->owner;
    if (peer_gone(op->peer)) {  // its pieces still queued never reach the fabric
      fail_gone(op);
      if (withdraw_queued(op)) {
        --in_flight_;
        if (op->orphan) release(op);
      }
      continue;
    }
    void* desc = op->memory != nullptr ? fi_mr_desc(op->memory->mr) : nullptr;
    provider_call call(calls_);
    ssize_t code;
    if (op->is_send) {
      code = fi_tsend(ep_, p->data, p->size, desc, addresses_[static_cast<std::size_t>(op->peer)],
                      fabric_tag(op->tag), &p->context);
    } else {
      code = fi_trecv(ep_, p->data, p->size, desc, addresses_[static_cast<std::size_t>(op->peer)],
                      fabric_tag(op->tag), 0, &p->context);
    }
    if (code == -FI_EAGAIN) return;  // the caller reads the completion queue, then we retry
    backlog_.pop_front();
    if (code != 0) {
      withdraw_queued(op);
      op->completed = op->pieces.size();  // nothing of it is left with the fabric
      --in_flight_;
      if (watch_ && watch_->ended(op->peer)) {  // the post failed because the peer died
        fail_gone(op);
      } else {
        fail(op, errc::transport,
             who() + ": " + (op->is_send ? "fi_tsend to" : "fi_trecv from") + " rank " +
                 std::to_string(op->peer) + " failed on provider '" + provider_name() +
                 "': " + text_of(static_cast<int>(code)));
      }
      continue;
    }
    p->posted = true;
  }
}

// Takes the operation's pieces still waiting in the backlog back (they never reach the fabric)
// and counts them complete; true when the fabric holds nothing more of it.
inline bool engine::withdraw_queued(operation* op) {
  const std::size_t queued = backlog_.size();
  std::erase_if(backlog_, [op](const piece* p) { return p->owner == op; });
  op->completed += queued - backlog_.size();
  return op->completed == op->pieces.size();
}

}  // namespace weft::ofi::detail
