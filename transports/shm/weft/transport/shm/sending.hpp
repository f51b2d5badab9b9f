// weft/transport/shm/sending.hpp — how the shared-memory transport sends: pieces published in the
// peer's FIFO from this rank, or a send from the pool lent in one slot.
#pragma once

#include "weft/transport/shm/engine.hpp"
#include "weft/transport/shm/region.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

namespace weft::shm::detail {

// A send goes behind this peer's others, and out as far as the peer's FIFO has room.
inline void engine::start_send(operation* op) {
  peers_[static_cast<std::size_t>(op->peer)].sends.push_back(op);
  push(op->peer);
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

}  // namespace weft::shm::detail
