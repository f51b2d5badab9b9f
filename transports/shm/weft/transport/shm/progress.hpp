// weft/transport/shm/progress.hpp — posting, moving pieces through the FIFOs, and what ends an
// operation: completion, a peer's end, the job's failure notice.
#pragma once

#include "weft/error.hpp"
#include "weft/transport.hpp"
#include "weft/transport/shm/engine.hpp"
#include "weft/transport/shm/region.hpp"

#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace weft::shm::detail {

inline operation* engine::post(bool is_send, int peer, std::byte* data, std::size_t size, tag_t tag,
                               const std::byte* own, const weft::detail::reducer* combine) {
  weft::detail::check_peer(rank_, size_, peer, is_send ? "send to" : "receive from");
  operation* op = pool_.acquire();
  op->is_send = is_send;
  op->peer = peer;
  op->tag = tag;
  op->data = data;
  op->size = size;
  op->moved = 0;
  op->own = own;
  op->combine = combine;
  op->matched = false;
  op->orphan = false;
  op->loan = 0;
  op->declined = false;
  op->state = status::posted;
  op->code = errc::transport;
  op->failure.clear();
  if (closed_) {
    fail(op, errc::transport, direction(op) + ": this rank closed its transport");
    return op;
  }
  auto& state = peers_[static_cast<std::size_t>(peer)];
  if (is_send) {
    state.sends.push_back(op);
    push(peer);
    return op;
  }
  for (auto message = state.early.begin(); message != state.early.end(); ++message) {
    if (message->tag != tag || message->claimed != nullptr) continue;
    op->matched = true;
    if (message->received < message->total ||
        (state.arriving && state.to_early && state.incoming_early == message)) {
      message->claimed = op;  // the rest is still arriving
    } else {
      deliver_early(op, *message);
      state.early.erase(message);
    }
    return op;
  }
  state.receives.push_back(op);
  return op;
}

inline bool engine::progress() {
  bool any = false;
  for (int peer = 0; peer < size_; ++peer) {
    if (peers_[static_cast<std::size_t>(peer)].region == nullptr) continue;
    any = drain(peer) || any;
    any = push(peer) || any;
  }
  return any;
}

// Publishes pieces of the sends to `peer`, in order, while its FIFO from this rank has room; a
// send from the pool is lent in one slot, and holds the pair until the peer gives it back.
inline bool engine::push(int peer) {
  auto& state = peers_[static_cast<std::size_t>(peer)];
  if (state.sends.empty() || state.region == nullptr) return false;
  bool any = false;
  if (const std::uint64_t lent = state.sends.front()->loan; lent != 0) {
    const lent_counters* counters = lent_to(own_.base(), shape_, peer);
    if (counters->given_back.load(std::memory_order_acquire) < lent) return false;
    operation* op = state.sends.front();
    taken_over(op->data);
    if (counters->declined.load(std::memory_order_relaxed) ==
        lent) {  // unread: through the slots instead
      op->loan = 0;
      op->moved = 0;
      op->declined = true;
    } else {
      state.sends.pop_front();
      complete(op);
    }
    any = true;
  }
  const fifo out = fifo_in(state.region, shape_, rank_);
  // Room for one more slot; the peer's tail is read only when the FIFO is full as last seen.
  const auto room = [&] {
    if (state.published - state.consumed >= out.count)
      state.consumed = out.tail->value.load(std::memory_order_acquire);
    return state.published - state.consumed < out.count;
  };
  while (!state.sends.empty() && room()) {
    operation* op = state.sends.front();
    slot_header* piece = out.header(state.published);
    piece->tag = op->tag;
    piece->total = op->size;
    const bool whole =
        op->moved == 0 && op->kept.empty() && op->size > inline_bytes && !op->declined;
    const bool pooled =
        whole && op->size >= settings_.lend_bytes && memory_.in_pool(op->data, op->size);
    if (pooled ||
        (whole && settings_.cma_bytes != 0 && op->size >= settings_.cma_bytes &&
         lent_to(own_.base(), shape_, peer)->reads_memory.load(std::memory_order_acquire) != 0)) {
      const loan lent{
          pooled ? buffers_->offset_of(op->data) : reinterpret_cast<std::uintptr_t>(op->data),
          ++state.loans, pooled ? 1u : 0u};
      piece->offset = lent_piece;
      piece->bytes = op->size;
      std::memcpy(piece->inline_payload, &lent, sizeof lent);
      op->loan = lent.number;
      op->moved = op->size;
      handed_over(op->data);
      piece->sequence.store(++state.published, std::memory_order_release);
      any = true;
      break;  // the next send to this peer waits until this one is given back
    }
    const std::size_t bytes = std::min(shape_.slot_bytes, op->size - op->moved);
    piece->offset = op->moved;
    piece->bytes = bytes;
    if (bytes != 0) {
      const std::byte* source =
          op->kept.empty() ? op->data + op->moved : op->kept.data() + (op->moved - op->kept_from);
      std::memcpy(out.payload(state.published, bytes), source, bytes);
    }
    op->moved += bytes;
    piece->sequence.store(++state.published, std::memory_order_release);
    any = true;
    if (op->moved == op->size) {
      state.sends.pop_front();
      complete(op);
    }
  }
  if (any && peer != rank_) ring(control_of(state.region));
  return any;
}

// Takes the pieces `peer` published in this rank's FIFO from it.
inline bool engine::drain(int peer) {
  const fifo in = fifo_in(own_.base(), shape_, peer);
  std::uint64_t tail = in.tail->value.load(std::memory_order_relaxed);  // only this rank raises it
  bool any = false;
  for (slot_header* piece = in.header(tail);
       piece->sequence.load(std::memory_order_acquire) == tail + 1; piece = in.header(tail)) {
    take_piece(peer, *piece, in.payload(tail, piece->bytes));
    in.tail->value.store(++tail, std::memory_order_release);
    any = true;
  }
  if (any && peer != rank_)
    ring(control_of(peers_[static_cast<std::size_t>(peer)].region));  // it may wait for room
  return any;
}

// The first receive posted for `tag` from `peer`, taken out of the queue (a receive of the
// wrong size fails); nullptr when none is posted (`posted` false), or it failed.
inline operation* engine::match(int peer, tag_t tag, std::size_t total, bool& posted) {
  auto& state = peers_[static_cast<std::size_t>(peer)];
  const auto found = std::find_if(state.receives.begin(), state.receives.end(),
                                  [&](const operation* op) { return op->tag == tag; });
  posted = found != state.receives.end();
  if (!posted) return nullptr;
  operation* op = *found;
  state.receives.erase(found);
  op->matched = true;
  if (op->size == total) return op;
  fail(op, errc::mismatch,
       who() + " expected " + std::to_string(op->size) + " bytes from rank " + name(peer) +
           " but the message has " + std::to_string(total) + " bytes (tag " + std::to_string(tag) +
           ")");
  return nullptr;
}

// Reads the `bytes` of a loan from `peer` into target, or target = combine(own, them): from the
// mapping of its pool, from its memory when it is this process, else by process_vm_readv (a
// plain copy only: take_loan declines a reducing receive's). Empty, or what went wrong (`code`
// says which kind of failure).
inline std::string engine::read_loan(int peer, const loan& lent, std::size_t bytes,
                                     std::byte* target, const std::byte* own,
                                     const weft::detail::reducer* combine, errc& code) {
  code = errc::peer_lost;
  const auto& state = peers_[static_cast<std::size_t>(peer)];
  const std::byte* source = nullptr;
  if (lent.in_pool != 0) {
    if (lent.where > shape_.pool_bytes || bytes > shape_.pool_bytes - lent.where) {
      code = errc::transport;
      return "it lent a message outside its pool (offset " + std::to_string(lent.where) + ", " +
             std::to_string(bytes) + " bytes)";
    }
    source = state.region + shape_.pool_offset() + lent.where;
  } else if (peer == rank_ || state.link.pid == ::getpid()) {
    source = reinterpret_cast<const std::byte*>(static_cast<std::uintptr_t>(lent.where));
  }
  if (source != nullptr) {
    taken_over(source);
    if (combine != nullptr) {
      (*combine)({target, bytes}, {own, bytes}, {source, bytes});
    } else if (bytes != 0) {
      std::memcpy(target, source, bytes);
    }
    handed_over(source);
    return {};
  }
  if (combine != nullptr) {
    code = errc::transport;
    return "a reducing receive cannot read another process's memory";
  }
  for (std::size_t got = 0; got < bytes;) {
    iovec local{target + got, bytes - got};
    iovec remote{reinterpret_cast<void*>(static_cast<std::uintptr_t>(lent.where + got)),
                 bytes - got};
    const ssize_t read = ::process_vm_readv(state.link.pid, &local, 1, &remote, 1, 0);
    if (read < 0 && errno == EINTR) continue;
    if (read <= 0) {
      return read < 0 && errno == ESRCH
                 ? "its process (pid " + std::to_string(state.link.pid) + ") ended"
                 : std::string("reading its memory failed (process_vm_readv: ") +
                       (read < 0 ? std::strerror(errno) : "nothing read") + ")";
    }
    got += static_cast<std::size_t>(read);
  }
  return {};
}

// A lent message: copied, or combined, straight from where the sender holds it; then given
// back. The sender may have withdrawn it while it was read (its call failed, and the buffer is
// its caller's again): looked at after reading (the fence orders the reads before the look), a
// withdrawal fails the receive instead of delivering bytes that may have changed.
inline void engine::take_loan(int peer, const slot_header& piece) {
  auto& state = peers_[static_cast<std::size_t>(peer)];
  loan lent{};
  std::memcpy(&lent, piece.inline_payload, sizeof lent);
  const std::size_t bytes = piece.bytes;
  bool posted = false;
  operation* op = match(peer, piece.tag, bytes, posted);
  lent_counters* counters = lent_to(state.region, shape_, rank_);
  if (op != nullptr && op->combine != nullptr && lent.in_pool == 0 && peer != rank_ &&
      state.link.pid != ::getpid()) {
    // Combining from another process's memory would go through a bounce buffer: a read and a
    // pass more on this rank than the slots' copy-in by the sender. Declined: it comes through
    // the slots, to the same receive.
    op->matched = false;
    state.receives.push_front(op);
    counters->declined.store(lent.number, std::memory_order_relaxed);
    counters->given_back.store(lent.number, std::memory_order_release);
    return;
  }
  std::string failure;
  errc code = errc::peer_lost;
  std::list<early_message>::iterator kept = state.early.end();
  if (op != nullptr) {
    failure = read_loan(peer, lent, bytes, op->data, op->own, op->combine, code);
  } else if (!posted) {
    early_message message;
    message.tag = piece.tag;
    message.total = bytes;
    message.received = bytes;
    message.data.resize(bytes);
    failure = read_loan(peer, lent, bytes, message.data.data(), nullptr, nullptr, code);
    state.early.push_back(std::move(message));
    kept = std::prev(state.early.end());
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  if (counters->withdrawn.load(std::memory_order_relaxed) ==
      lent.number) {  // the likelier cause of a failed read too
    failure = "it withdrew the message while it was read (its call failed)";
    code = errc::peer_lost;
  }
  counters->given_back.store(lent.number, std::memory_order_release);
  if (kept != state.early.end()) {
    kept->failure = std::move(failure);
    kept->failure_code = code;
  } else if (op != nullptr && !failure.empty()) {
    fail(op, code, direction(op) + ": " + failure);
  } else if (op != nullptr) {
    op->moved = bytes;
    complete(op);
  }
}

inline void engine::take_piece(int peer, const slot_header& piece, const std::byte* payload) {
  auto& state = peers_[static_cast<std::size_t>(peer)];
  if (piece.offset == lent_piece) {  // always a whole message, between the pieces of no other
    take_loan(peer, piece);
    return;
  }
  if (!state.arriving) {  // a message's first piece: its receive, or kept aside until one is posted
    state.arriving = true;
    state.incoming_left = piece.total;
    bool posted = false;
    if (operation* op = match(peer, piece.tag, piece.total, posted)) {
      state.incoming = op;
    } else if (posted) {  // its receive had the wrong size
      state.discarding = true;
    } else {
      early_message message;
      message.tag = piece.tag;
      message.total = piece.total;
      message.data.resize(piece.total);
      state.early.push_back(std::move(message));
      state.incoming_early = std::prev(state.early.end());
      state.to_early = true;
    }
  }
  const std::size_t bytes = piece.bytes;
  if (state.incoming != nullptr) {
    operation* op = state.incoming;
    if (bytes != 0) {
      if (op->combine != nullptr) {
        (*op->combine)({op->data + piece.offset, bytes}, {op->own + piece.offset, bytes},
                       {payload, bytes});
      } else {
        std::memcpy(op->data + piece.offset, payload, bytes);
      }
    }
    op->moved += bytes;
  } else if (state.to_early && bytes != 0) {
    std::memcpy(state.incoming_early->data.data() + piece.offset, payload, bytes);
  }
  if (state.to_early) state.incoming_early->received += bytes;
  state.incoming_left -= std::min<std::size_t>(bytes, state.incoming_left);
  if (state.incoming_left != 0) return;
  // The message is complete.
  if (state.incoming != nullptr) complete(state.incoming);
  if (state.to_early && state.incoming_early->claimed != nullptr) {
    operation* claimed = state.incoming_early->claimed;
    deliver_early(claimed, *state.incoming_early);
    state.early.erase(state.incoming_early);
  }
  state.incoming = nullptr;
  state.arriving = false;
  state.to_early = false;
  state.discarding = false;
}

inline void engine::deliver_early(operation* op, early_message& message) {
  if (!message.failure.empty()) {  // lent, and withdrawn or unreadable
    fail(op, message.failure_code, direction(op) + ": " + message.failure);
    return;
  }
  if (op->size != message.total) {
    fail(op, errc::mismatch,
         who() + " expected " + std::to_string(op->size) + " bytes from rank " + name(op->peer) +
             " but the message has " + std::to_string(message.total) + " bytes (tag " +
             std::to_string(op->tag) + ")");
    return;
  }
  if (op->size != 0) {
    if (op->combine != nullptr) {
      (*op->combine)({op->data, op->size}, {op->own, op->size}, {message.data.data(), op->size});
    } else {
      std::memcpy(op->data, message.data.data(), op->size);
    }
  }
  op->moved = op->size;
  complete(op);
}

inline void engine::complete(operation* op) {
  if (op->state != status::posted) return;
  op->state = status::done;
  if (op->orphan) release(op);
}

// Takes `op` out of every queue and arrival it is part of. A lent send not yet given back is
// withdrawn from the peer too (take_loan), before its buffer is the caller's again: the fence
// orders the mark before whatever the caller then writes.
inline void engine::withdraw(operation* op) {
  auto& state = peers_[static_cast<std::size_t>(op->peer)];
  if (op->is_send && op->loan != 0 && own_.base() != nullptr) {
    lent_counters* counters = lent_to(own_.base(), shape_, op->peer);
    if (counters->given_back.load(std::memory_order_acquire) < op->loan) {
      counters->withdrawn.store(op->loan, std::memory_order_seq_cst);
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
  }
  if (op->is_send) {
    state.sends.erase(std::remove(state.sends.begin(), state.sends.end(), op), state.sends.end());
    return;
  }
  state.receives.erase(std::remove(state.receives.begin(), state.receives.end(), op),
                       state.receives.end());
  if (state.incoming == op) {
    state.incoming = nullptr;
    state.discarding = true;
  }
  for (auto& message : state.early)
    if (message.claimed == op) message.claimed = nullptr;
}

inline void engine::fail(operation* op, errc code, std::string why, int culprit) {
  if (op->state != status::posted) return;
  withdraw(op);
  op->state = status::failed;
  op->code = code;
  op->failure = std::move(why);
  op->culprit = culprit;
  if (code == errc::peer_lost && culprit >= 0 && culprit != rank_ && first_lost_ < 0)
    first_lost_ = culprit;
  if (op->orphan) release(op);
}

inline std::string engine::lost_text(int root) const {
  const auto& state = peers_[static_cast<std::size_t>(root)];
  if (state.ended && !state.closed) {
    return "rank " + name(root) + "'s process (pid " + std::to_string(state.link.pid) +
           ") ended: it exited, crashed or was killed";
  }
  const int lost = failures_ ? failures_->lost() : -1;
  return "rank " + name(root) + " is lost" +
         (lost == root ? " (" + failures_->why() + ")" : std::string());
}

// Asks the pidfds whether peer processes ended, and the peers' regions whether they closed.
inline void engine::watch_peers() {
  std::vector<pollfd> asked;
  std::vector<int> whose;
  for (int peer = 0; peer < size_; ++peer) {
    auto& state = peers_[static_cast<std::size_t>(peer)];
    if (peer == rank_ || state.region == nullptr) continue;
    if (!state.closed && control_of(state.region)->closed.load(std::memory_order_acquire) != 0)
      state.closed = true;
    if (!state.ended && state.link.pidfd >= 0) {
      asked.push_back({state.link.pidfd, POLLIN, 0});
      whose.push_back(peer);
    }
  }
  if (asked.empty() || ::poll(asked.data(), asked.size(), 0) <= 0) return;
  for (std::size_t i = 0; i < asked.size(); ++i)
    if (asked[i].revents != 0) peers_[static_cast<std::size_t>(whose[i])].ended = true;
}

inline void engine::sleep_until_rung(deadline_clock::time_point until, operation* op) {
  control_block* me = control_of(own_.base());
  const std::uint32_t seen = me->doorbell.load(std::memory_order_seq_cst);
  me->sleeping.store(1, std::memory_order_seq_cst);
  std::atomic_thread_fence(
      std::memory_order_seq_cst);  // the last look below sees what ring() did not wake
  if (!progress() && op->state == status::posted)
    futex_wait(me->doorbell, seen, until - deadline_clock::now());
  me->sleeping.store(0, std::memory_order_seq_cst);
}

inline bool engine::finished(operation* op) {
  // The job heard that `lost` was lost (weft/bootstrap/failure_watch.hpp). When the others gave
  // up on this rank, what completed fails too: they count the call as failed.
  const int lost = failures_ ? failures_->lost() : -1;
  if (lost == rank_ && (op->state == status::posted || op->state == status::done)) {
    op->state = status::posted;
    fail(op, errc::peer_lost,
         direction(op) + ": the other ranks count this rank as lost (" + failures_->why() + ")");
  }
  if (op->state == status::posted) {
    auto& state = peers_[static_cast<std::size_t>(op->peer)];
    if (state.ended || state.closed) {
      progress();  // what it published before it went is still read
      // A process that closed in order before it ended gave up; it did not die.
      if (!state.closed && state.region != nullptr &&
          control_of(state.region)->closed.load(std::memory_order_acquire) != 0) {
        state.closed = true;
      }
      if (op->state == status::posted && state.ended && !state.closed) {
        fail(op, errc::peer_lost,
             direction(op) + ": its process (pid " + std::to_string(state.link.pid) +
                 ") ended: it exited, crashed or was killed",
             op->peer);
      } else if (op->state == status::posted) {
        // A peer that closed in the middle of a call most likely gave up after a loss: name the
        // rank lost first (the one it says it lost, one whose process ended, the job's notice).
        const int root = root_of_close(op->peer, lost);
        std::string text = root == op->peer ? ": rank " + name(op->peer) + " closed its transport"
                                            : ": " + lost_text(root) + " (rank " + name(op->peer) +
                                                  " closed its transport after that)";
        // Why it gave up, as it said in its region, where the job's notice has not said it here
        // yet (a mismatch is then one here too).
        if (lost != root || root == op->peer) {
          const std::string said = close_reason_of(op->peer);
          if (!said.empty()) text += ": it said: " + said;
        }
        fail(op, errc::peer_lost, direction(op) + text, root);
      }
    }
  }
  if (lost >= 0 && op->state == status::posted) {
    fail(op, errc::peer_lost,
         direction(op) + ": rank " + name(lost) + " is lost (" + failures_->why() + ")", lost);
  }
  if (op->state == status::done) return true;
  if (op->state == status::failed) {
    throw error(op->code, op->failure, op->culprit >= 0 ? job_rank(op->culprit) : -1);
  }
  return false;
}

inline std::string engine::close_reason_of(int closer) const {
  const std::byte* region = peers_[static_cast<std::size_t>(closer)].region;
  if (region == nullptr) return {};
  const control_block* block = control_of(const_cast<std::byte*>(region));
  if (block->closed.load(std::memory_order_acquire) == 0) return {};
  return std::string(block->close_reason,
                     strnlen(block->close_reason, sizeof(block->close_reason)));
}

inline int engine::root_of_close(int closer, int lost) {
  std::byte* region = peers_[static_cast<std::size_t>(closer)].region;
  const auto said = region == nullptr
                        ? 0
                        : control_of(region)->closed_after_loss_of.load(std::memory_order_acquire);
  if (said > 0 && static_cast<int>(said) - 1 < size_ && static_cast<int>(said) - 1 != rank_) {
    return static_cast<int>(said) - 1;
  }
  watch_peers();
  for (int peer = 0; peer < size_; ++peer) {
    const auto& state = peers_[static_cast<std::size_t>(peer)];
    if (peer != rank_ && state.ended && !state.closed) return peer;
  }
  if (lost >= 0 && lost != rank_) return lost;
  return closer;
}

inline void engine::cancel(operation* op) {
  if (take_back()) return;  // retired while this request lived
  if (op->state != status::posted) {
    release(op);
    return;
  }
  auto& state = peers_[static_cast<std::size_t>(op->peer)];
  if (op->loan != 0) {  // lent, not given back: withdrawn (the peer fails its receive)
    withdraw(op);
    release(op);
    return;
  }
  if (op->is_send && op->moved != 0) {
    // Part of it is in the peer's FIFO: the rest goes too, from a copy (the buffer is the
    // caller's again once the request is gone).
    const std::byte* rest =
        op->kept.empty() ? op->data + op->moved : op->kept.data() + (op->moved - op->kept_from);
    std::vector<std::byte> copy(rest, rest + (op->size - op->moved));
    op->kept = std::move(copy);
    op->kept_from = op->moved;
    op->orphan = true;
    return;
  }
  if (!op->is_send &&
      state.incoming == op) {  // part-way: the rest of the message is read into nothing
    state.incoming = nullptr;
    state.discarding = true;
  }
  withdraw(op);
  release(op);
}

}  // namespace weft::shm::detail
