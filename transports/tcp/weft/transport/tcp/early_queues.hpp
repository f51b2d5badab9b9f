// weft/transport/tcp/early_queues.hpp — the messages that arrive before their receive.
//
// A data frame with no posted receive is read into an early message of its own, queued by its
// sender in arrival order, until a receive of its tag takes it. Together they hold at most
// config::unexpected_limit bytes (the connection stops reading past it, and TCP's flow control
// holds the sender). A delivered message's buffer is kept for the next ones, up to
// config::early_buffer_cache bytes, the oldest going first.
#pragma once

#include "weft/transport.hpp"
#include "weft/transport/tcp/wire.hpp"

#include <cstddef>
#include <deque>
#include <memory>
#include <span>
#include <vector>

namespace weft::tcp::detail {

class early_queues {
 public:
  using queue = std::deque<std::unique_ptr<message>>;

  early_queues(int ranks, std::size_t limit, std::size_t cache)
      : by_peer_(static_cast<std::size_t>(ranks)), limit_(limit), cache_(cache) {}

  // The messages from `peer`, oldest first.
  queue& from(int peer) { return by_peer_[static_cast<std::size_t>(peer)]; }

  // Whether a message of `bytes` more fits under the limit.
  bool has_room(std::size_t bytes) const { return held_ + bytes <= limit_; }

  // A new message from `peer`, queued last; its buffer is the oldest kept one of a fitting size
  // (at least the payload and at most 4 times it), else a new one, not zeroed.
  message* hold(int peer, tag_t tag, std::size_t size) {
    auto kept = std::make_unique<message>(tag, size, buffer_for(size));
    message* m = kept.get();
    held_ += size;
    from(peer).push_back(std::move(kept));
    return m;
  }

  // Takes a delivered (or abandoned) message out of its queue, keeping its buffer: small
  // buffers are cheap to allocate and go back.
  void forget(int peer, queue::iterator it) {
    held_ -= (*it)->size;
    buffer b = std::move((*it)->storage);
    from(peer).erase(it);
    keep(std::move(b));
  }
  void forget(int peer, const message* m) {
    auto& q = from(peer);
    for (auto it = q.begin(); it != q.end(); ++it) {
      if (it->get() == m) return forget(peer, it);
    }
  }

  // The messages no receive has claimed (early_message_transport): fills `found` as far as it
  // goes, returns how many there are.
  std::size_t unclaimed(std::span<weft::early_message> found) const {
    std::size_t count = 0;
    for (std::size_t peer = 0; peer < by_peer_.size(); ++peer) {
      for (const auto& m : by_peer_[peer]) {
        if (m->claimed != nullptr) continue;
        if (count < found.size()) found[count] = {static_cast<int>(peer), m->tag};
        ++count;
      }
    }
    return count;
  }

  std::size_t held_bytes() const { return held_; }
  std::size_t kept_buffer_bytes() const { return kept_; }

 private:
  buffer buffer_for(std::size_t size) {
    // Kept buffers hold inbox_bytes or more, so a payload below a quarter of that fits none.
    for (auto it = spare_.begin(); size >= inbox_bytes / 4 && it != spare_.end(); ++it) {
      if (it->capacity >= size && it->capacity / 4 <= size) {
        buffer found = std::move(*it);
        kept_ -= found.capacity;
        spare_.erase(it);
        return found;
      }
    }
    return buffer{std::unique_ptr<std::byte[]>(new std::byte[size]), size};
  }

  void keep(buffer b) {
    if (b.capacity < inbox_bytes || b.capacity > cache_) return;
    while (kept_ + b.capacity > cache_) {
      kept_ -= spare_.front().capacity;
      spare_.erase(spare_.begin());
    }
    kept_ += b.capacity;
    spare_.push_back(std::move(b));
  }

  std::vector<queue> by_peer_;
  std::size_t held_ = 0;  // bytes of the messages queued
  std::size_t limit_;
  std::vector<buffer> spare_;  // of delivered messages, oldest first
  std::size_t kept_ = 0;
  std::size_t cache_;
};

}  // namespace weft::tcp::detail
