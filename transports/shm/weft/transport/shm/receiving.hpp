// weft/transport/shm/receiving.hpp — how the shared-memory transport receives: pieces taken from
// this rank's FIFOs into their receive (copied, or combined straight from the slot), a lent message
// read straight from the lender, and messages that come before their receive kept aside.
#pragma once

#include "weft/error.hpp"
#include "weft/transport/shm/engine.hpp"
#include "weft/transport/shm/region.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace weft::shm::detail {

// A receive takes the first unclaimed early message of its tag (whole, or the rest as it
// arrives), else waits in its peer's queue.
inline void engine::start_receive(operation* op) {
  auto& state = peers_[static_cast<std::size_t>(op->peer)];
  const tag_t tag = op->tag;
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
    return;
  }
  state.receives.push_back(op);
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

}  // namespace weft::shm::detail
