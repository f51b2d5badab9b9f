// weft/transport/tcp/sending.hpp — how the TCP transport writes.
//
// A send is queued on its connection and tried at once (a small one often completes before the
// post returns); queued frames are written several per system call (writev) until the queue is
// empty or the socket full, and then the event loop waits for room. A send whose request is
// dropped after part of it went out keeps its own copy of the rest (the stream must stay whole).
#pragma once

#include "weft/transport/tcp/engine.hpp"

#include <algorithm>
#include <array>
#include <span>
#include <vector>

namespace weft::tcp::detail {

inline operation* engine::post_send(int peer, std::span<const std::byte> data, tag_t tag) {
  operation* op = start(true, peer, tag, data.size());
  op->out = data.data();
  if (peer == rank_) {
    if (operation* receive = take_posted(rank_, tag)) {
      complete_pair_locally(op, receive);
    } else {
      self_sends_.push_back(op);
    }
    return op;
  }
  connection& c = *connections_[static_cast<std::size_t>(peer)];
  if (!c.open) {
    op->state = status::failed;
    return op;
  }
  write_header(*op, frame::data, tag, data.size());
  c.sends.push_back(op);
  if (c.sends.size() == 1) flush(c);  // try at once: small sends finish before we return
  return op;
}

inline void engine::write_header(operation& op, frame kind, tag_t tag, std::size_t length) {
  put32(op.header.data(), static_cast<std::uint32_t>(kind));
  put32(op.header.data() + 4, 0);
  put64(op.header.data() + 8, tag);
  put64(op.header.data() + 16, length);
}

// Queues a frame the transport sends on its own (abort, goodbye).
inline void engine::queue_control(connection& c, frame kind, std::vector<std::byte> payload) {
  operation* op = pool_.acquire();
  op->is_send = true;
  op->peer = c.peer;
  op->owned = std::move(payload);
  op->out = op->owned.data();
  op->size = op->owned.size();
  op->orphan = true;
  op->state = status::posted;
  write_header(*op, kind, 0, op->size);
  c.sends.push_back(op);
  if (c.sends.size() == 1) flush(c);
}

// Writes queued frames, several per system call, until the queue is empty or the socket full.
inline void engine::flush(connection& c) {
  while (c.open && !c.sends.empty()) {
    std::array<asio::const_buffer, 32> pieces;
    std::size_t count = 0;
    for (auto it = c.sends.begin(); it != c.sends.end() && count + 2 <= pieces.size(); ++it) {
      operation& op = **it;
      if (op.offset < header_bytes) {
        pieces[count++] = asio::buffer(op.header.data() + op.offset, header_bytes - op.offset);
      }
      const std::size_t done = op.offset > header_bytes ? op.offset - header_bytes : 0;
      if (op.size > done) pieces[count++] = asio::buffer(op.out + done, op.size - done);
    }
    boost::system::error_code failure;
    std::size_t written = c.socket.write_some(std::span(pieces.data(), count), failure);
    if (failure == asio::error::would_block || failure == asio::error::try_again) {
      arm_write(c);
      return;
    }
    if (failure) return lose_after_reading(c, failure.message());
    while (written > 0 && !c.sends.empty()) {
      operation* op = c.sends.front();
      const std::size_t left = header_bytes + op->size - op->offset;
      const std::size_t take = std::min(left, written);
      op->offset += take;
      written -= take;
      if (op->offset < header_bytes + op->size) break;
      c.sends.pop_front();
      if (op->orphan) {
        release(op);
      } else {
        op->state = status::done;
      }
    }
  }
}

inline void engine::arm_write(connection& c) {
  if (c.write_armed) return;
  c.write_armed = true;
  c.socket.async_wait(tcp::socket::wait_write, [this, &c](boost::system::error_code failure) {
    c.write_armed = false;
    if (failure == asio::error::operation_aborted || !c.open) return;
    flush(c);
  });
}

// A partly written send whose request is gone keeps its own copy of the rest.
inline void engine::orphan(operation* op) {
  const std::size_t done = op->offset > header_bytes ? op->offset - header_bytes : 0;
  op->owned.assign(op->out + done, op->out + op->size);
  op->out = op->owned.data();
  op->size -= done;
  op->offset = std::min(op->offset, header_bytes);
  op->orphan = true;
}

}  // namespace weft::tcp::detail
