// weft/transport/tcp/receiving.hpp — how the TCP transport reads.
//
// Frames are read from the socket as they come: a posted receive's payload straight into its
// buffer (large payloads read in place, small ones through the 64 KiB inbox that also holds the
// next headers); a message that arrives first waits among the early messages
// (tcp/early_queues.hpp) until a receive is posted; past their limit the connection stops
// reading until one is.
#pragma once

#include "weft/transport/tcp/engine.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <span>

namespace weft::tcp::detail {

inline operation* engine::post_recv(int peer, std::span<std::byte> data, tag_t tag) {
  operation* op = start(false, peer, tag, data.size());
  op->in = data.data();
  if (peer == rank_) {
    auto found = std::find_if(self_sends_.begin(), self_sends_.end(),
                              [&](operation* sent) { return sent->tag == tag; });
    if (found != self_sends_.end()) {
      operation* sent = *found;
      self_sends_.erase(found);
      complete_pair_locally(sent, op);
    } else {
      posted_[static_cast<std::size_t>(peer)].push_back(op);
    }
    return op;
  }
  // An early message of this tag from this peer comes first.
  auto& early = early_.from(peer);
  for (auto it = early.begin(); it != early.end(); ++it) {
    message* m = it->get();
    if (m->tag != tag || m->claimed != nullptr) continue;
    connection* arriving = connections_[static_cast<std::size_t>(peer)].get();
    if (m->complete) {
      deliver_early(op, m);
      early_.forget(peer, it);
      resume_paused();
    } else if (arriving != nullptr && arriving->early == m && m->size == op->size) {
      // It is coming in right now: move what has come into the receive and read the rest
      // straight there (a large message that arrived a moment early is not copied twice).
      if (arriving->filled > 0) std::memcpy(op->in, m->bytes(), arriving->filled);
      arriving->early = nullptr;
      arriving->target = op;
      arriving->sink = op->in;
      op->state = status::active;
      early_.forget(peer, it);
      resume_paused();
    } else {
      m->claimed = op;
      op->source = m;
      op->state = status::active;
    }
    return op;
  }
  connection& c = *connections_[static_cast<std::size_t>(peer)];
  if (!c.open) {
    op->state = status::failed;
    return op;
  }
  posted_[static_cast<std::size_t>(peer)].push_back(op);
  if (c.paused && c.tag == tag) resume(c);  // its message was held back for want of room
  return op;
}

// Reads what the socket has; arms the next wakeup. Arming needs no read after it: a wait
// started on a registered socket re-arms its epoll entry (EPOLL_CTL_MOD), and the kernel then
// reports bytes already there as well as bytes still to come.
inline void engine::read_ready(connection& c) {
  drain(c);
  if (!c.open || c.paused || c.read_armed) return;
  c.read_armed = true;
  c.socket.async_wait(tcp::socket::wait_read, [this, &c](boost::system::error_code failure) {
    c.read_armed = false;
    if (failure == asio::error::operation_aborted || !c.open) return;
    read_ready(c);
  });
}

// Reads into `into`; 0 when the socket has nothing now (or the connection just ended). A read
// shorter than asked for emptied the socket: it sets `emptied`, and from then on this drain
// reads nothing more (rather than spend a system call to be told so), leaving what comes next
// to the armed wait.
inline std::size_t engine::receive(connection& c, std::span<std::byte> into, bool& emptied) {
  if (emptied) return 0;
  boost::system::error_code failure;
  const std::size_t got = c.socket.read_some(asio::buffer(into.data(), into.size()), failure);
  emptied = got < into.size();
  if (failure == asio::error::would_block || failure == asio::error::try_again) return 0;
  if (failure) {
    lose(c, failure == asio::error::eof ? std::string("end of stream") : failure.message());
    return 0;
  }
  return got;
}

inline void engine::drain(connection& c) {
  bool emptied = false;
  while (c.open && !c.paused) {
    if (!c.in_payload) {
      if (c.end - c.begin >= header_bytes) {
        if (!parse_header(c)) return;
        continue;
      }
      if (c.begin > 0) {  // keep the partial header at the front
        std::memmove(c.inbox.data(), c.inbox.data() + c.begin, c.end - c.begin);
        c.end -= c.begin;
        c.begin = 0;
      }
      const std::size_t got = receive(c, std::span(c.inbox).subspan(c.end), emptied);
      if (got == 0) return;
      c.end += got;
      continue;
    }
    const std::size_t remaining = c.length - c.filled;
    if (c.end > c.begin) {
      const std::size_t take = std::min(remaining, c.end - c.begin);
      if (c.sink != nullptr) std::memcpy(c.sink + c.filled, c.inbox.data() + c.begin, take);
      c.begin += take;
      c.filled += take;
    } else if (c.sink != nullptr && remaining >= direct_read_bytes) {
      const std::size_t got = receive(c, {c.sink + c.filled, remaining}, emptied);  // in place
      if (got == 0) return;
      c.filled += got;
    } else {
      c.begin = c.end = 0;
      const std::size_t got = receive(c, c.inbox, emptied);
      if (got == 0) return;
      c.end = got;
      continue;
    }
    if (c.filled == c.length) finish_payload(c);
  }
}

// Starts the frame whose header is at the front of the inbox; false when it must wait.
inline bool engine::parse_header(connection& c) {
  const std::byte* in = c.inbox.data() + c.begin;
  const std::uint32_t kind = get32(in);
  c.tag = get64(in + 8);
  c.length = static_cast<std::size_t>(get64(in + 16));
  if (get32(in + 4) != 0 || kind < 1 || kind > 3 ||
      (kind != static_cast<std::uint32_t>(frame::data) && c.length > max_abort_bytes)) {
    lose(c, "it sent a malformed frame header");
    return false;
  }
  c.kind = static_cast<frame>(kind);
  c.filled = 0;
  c.target = nullptr;
  c.early = nullptr;
  c.sink = nullptr;
  if (c.kind == frame::data) {
    if (!route(c)) {
      c.paused = true;  // header stays in the inbox until a receive or room arrives
      return false;
    }
  } else {
    c.control.resize(c.length);
    c.sink = c.control.data();
  }
  c.begin += header_bytes;
  c.in_payload = true;
  if (c.length == 0) finish_payload(c);
  return true;
}

// Picks where a data frame's payload goes: its posted receive, else an early message.
inline bool engine::route(connection& c) {
  if (closing_) return true;  // the payload is read and dropped
  if (operation* op = take_posted(c.peer, c.tag)) {
    if (op->size != c.length) {
      op->size_mismatch = true;
      op->other_size = c.length;
      op->state = status::failed;  // the payload is read and dropped
    } else {
      op->state = status::active;
      c.target = op;
      c.sink = op->in;
    }
    return true;
  }
  if (!early_.has_room(c.length)) return false;
  c.early = early_.hold(c.peer, c.tag, c.length);
  c.sink = c.early->bytes();
  return true;
}

inline void engine::finish_payload(connection& c) {
  c.in_payload = false;
  if (c.kind == frame::goodbye) {
    c.goodbye = true;
  } else if (c.kind == frame::abort) {
    if (c.control.size() >= 4) {
      const int failed = static_cast<int>(get32(c.control.data()));
      const std::string reason(reinterpret_cast<const char*>(c.control.data()) + 4,
                               c.control.size() - 4);
      if (failed == rank_ && given_up_reason_.empty()) {
        // This rank was too slow, or stopped, past another's timeout: what it is in the middle
        // of has already failed there, so it must not complete here.
        given_up_reason_ = "rank " + std::to_string(c.peer) + " gave up on it: " + reason;
      } else if (failed != rank_ && lost_rank_ < 0 && failed >= 0 && failed < size_) {
        lost_rank_ = failed;
        lost_reason_ = "reported by rank " + std::to_string(c.peer) + ": " + reason;
      }
    }
  } else if (c.target != nullptr) {
    c.target->state = status::done;
  } else if (c.early != nullptr) {
    message* m = c.early;
    m->complete = true;
    if (operation* waiting = m->claimed) {
      waiting->source = nullptr;
      deliver_early(waiting, m);
      early_.forget(c.peer, m);
      resume_paused();
    }
  }
  c.target = nullptr;
  c.early = nullptr;
  c.sink = nullptr;
}

// Copies a complete early message into its receive (early_queues::forget then frees the room
// it held).
inline void engine::deliver_early(operation* op, message* m) {
  if (m->size != op->size) {
    op->size_mismatch = true;
    op->other_size = m->size;
    op->state = status::failed;
    return;
  }
  if (m->size > 0) std::memcpy(op->in, m->bytes(), m->size);
  op->state = status::done;
}

inline void engine::resume(connection& c) {
  c.paused = false;
  read_ready(c);
}

inline void engine::resume_paused() {
  for (auto& owned : connections_) {
    if (owned && owned->open && owned->paused) resume(*owned);
  }
}

inline operation* engine::take_posted(int peer, tag_t tag) {
  auto& queue = posted_[static_cast<std::size_t>(peer)];
  auto found =
      std::find_if(queue.begin(), queue.end(), [&](operation* op) { return op->tag == tag; });
  if (found == queue.end()) return nullptr;
  operation* op = *found;
  queue.erase(found);
  return op;
}

inline void engine::complete_pair_locally(operation* sent, operation* receive) {
  if (sent->size != receive->size) {
    receive->size_mismatch = true;
    receive->other_size = sent->size;
    receive->state = status::failed;
    sent->state = status::done;
    return;
  }
  if (sent->size != 0) std::memcpy(receive->in, sent->out, sent->size);
  sent->state = status::done;
  receive->state = status::done;
}

}  // namespace weft::tcp::detail
