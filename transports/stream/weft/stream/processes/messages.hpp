// weft/stream/processes/messages.hpp — sends and receives between stream-ordered
// processes: the envelope, the match, the transfer on the receiver's carrier, and the staging of
// a send from outside the pool (whole, or in pieces). Members of weft::stream::process_rank
// (weft/stream/processes/process_rank.hpp).
#pragma once

#include "weft/stream/processes/process_rank.hpp"

namespace weft::stream {

// A send: announced in the receiver's region once its data is in the pool (read in place), or
// staged there by this rank's stream (whole, up to a piece's size), or by a staging carrier in
// pieces through two areas the receiver empties in turn.
template <sharing_backend Backend>
auto process_rank<Backend>::post_send(int peer, tag_t tag, const std::byte* data, std::size_t size)
    -> operation* {
  std::unique_lock lock(mutex_);
  refuse_if_aborted();
  wait_for_room(lock, peer, views_[static_cast<std::size_t>(peer)]);
  const bool in_place = size == 0 || memory_->in_pool(data, size);
  const bool in_pieces = !in_place && size > config_.stage_piece_bytes;
  const std::byte* where = data;
  std::byte* staged = nullptr;
  if (!in_place && !in_pieces) {
    staged = stage(lock, size);
    memory_->copy({staged, size}, {data, size});
    where = staged;
  }
  operation* op = acquire(true, rank_, peer, tag, size);
  op->send_data = data;
  op->done = flags_->take();
  op->settled = true;
  flags_->give_back(op->done, true);  // the receiver's transfer writes it
  if (staged != nullptr) staged_.push_back({op->done, staged, size});
  announced e;
  e.tag = tag;
  e.bytes = size;
  e.where = size == 0 ? 0 : static_cast<std::uint64_t>(where - pool_->data());
  e.posted = op->posted;
  e.flag = static_cast<std::uint32_t>(op->done.word - mine().flags());
  e.value = op->done.value;
  if (in_pieces) stage_in_pieces(*op, e, lock);
  publish(peer, e, nullptr);
  return op;
}

// A send of more than a piece from outside the pool: two areas of a piece each, filled in turn
// by a staging carrier (after this rank's stream reaches the post; area i % 2 once the receiver
// has read piece i - 2), each piece announced by the `ready` flag and given back by `consumed`.
template <sharing_backend Backend>
void process_rank<Backend>::stage_in_pieces(operation& op, announced& e,
                                            std::unique_lock<std::mutex>& lock) {
  const std::size_t piece = config_.stage_piece_bytes;
  const auto pieces = static_cast<std::uint32_t>((op.size + piece - 1) / piece);
  std::byte* areas[2] = {stage(lock, piece), stage(lock, piece)};
  staged_.push_back({op.done, areas[0], piece});
  staged_.push_back({op.done, areas[1], piece});
  const flag_ticket ready = flags_->take(pieces);
  const flag_ticket consumed = flags_->take(pieces);
  flags_->give_back(ready, true);
  flags_->give_back(consumed, true);
  // A carrier of its own while another still stages (its waits are on the receiver's progress).
  auto& staging_carriers = carriers_[static_cast<std::size_t>(size_) + 1];
  auto idle = std::find_if(staging_carriers.begin(), staging_carriers.end(),
                           [](const auto& l) { return l->last.word == nullptr || l->last.done(); });
  if (idle == staging_carriers.end()) {
    const stream_type s = backend_.make_stream(device_);
    staging_carriers.push_back(std::make_unique<carrier>(
        carrier{s, memory_type(backend_.memory_on(device_, s), allocator_.get()), {}, {}}));
    idle = std::prev(staging_carriers.end());
  }
  carrier& l = **idle;
  backend_.wait_flag(l.stream, mine().posted(), op.posted);
  for (std::uint32_t i = 0; i < pieces; ++i) {
    const std::size_t offset = std::size_t{i} * piece;
    const std::size_t bytes = std::min(piece, op.size - offset);
    if (i >= 2) backend_.wait_flag(l.stream, consumed.word, consumed.value + i - 2);
    l.memory.copy({areas[i % 2], bytes}, {op.send_data + offset, bytes});
    backend_.write_flag(l.stream, ready.word, ready.value + i);
  }
  l.last = {ready.word, ready.value + pieces - 1};
  e.where = static_cast<std::uint64_t>(areas[0] - pool_->data());
  e.out_where = static_cast<std::uint64_t>(areas[1] - pool_->data());
  e.out_bytes = piece;
  e.pieces = pieces;
  e.ready = static_cast<std::uint32_t>(ready.word - mine().flags());
  e.ready_value = ready.value;
  e.consumed = static_cast<std::uint32_t>(consumed.word - mine().flags());
  e.consumed_value = consumed.value;
}

template <sharing_backend Backend>
auto process_rank<Backend>::post_recv(int peer, tag_t tag, std::byte* data, std::size_t size,
                                      const weft::detail::reducer* combine, const std::byte* own)
    -> operation* {
  std::lock_guard lock(mutex_);
  refuse_if_aborted();
  operation* op = acquire(false, peer, rank_, tag, size);
  op->recv_data = data;
  if (combine != nullptr) op->combine.emplace(*combine);
  op->own = own;
  op->done = flags_->take();
  const auto p = static_cast<std::size_t>(peer);
  drain(peer);
  auto& waiting = arrived_[p];
  const auto found = std::find_if(waiting.begin(), waiting.end(),
                                  [&](const announced& e) { return e.tag == tag; });
  if (found == waiting.end()) {
    pending_[p].push_back(op);
    return op;
  }
  const announced e = *found;
  waiting.erase(found);
  transfer(*op, e);
  if (op->failed) throw error(errc::mismatch, mismatch_message(*op));
  return op;
}

// Waits (the lock released) until the receiver's FIFO from this rank has room.
template <sharing_backend Backend>
void process_rank<Backend>::wait_for_room(std::unique_lock<std::mutex>& lock, int peer,
                                          const region_view& to) {
  const auto p = static_cast<std::size_t>(peer);
  stall_until(
      lock,
      [&] {
        return sent_[p] - to.tail(rank_)->value.load(std::memory_order_acquire) < shape_.envelopes;
      },
      [&] {
        return "rank " + std::to_string(peer) + " has not read the last " +
               std::to_string(shape_.envelopes) + " messages this rank sent it";
      });
}

// Room in the pool for a staged message, once the messages staged earlier are read.
template <sharing_backend Backend>
auto process_rank<Backend>::stage(std::unique_lock<std::mutex>& lock, std::size_t bytes)
    -> std::byte* {
  if (bytes > config_.pool_bytes) {
    throw error(
        errc::invalid_argument,
        who() + ": a message of " + std::to_string(bytes) +
            " bytes from outside the pool cannot be staged "
            "through a pool of " +
            std::to_string(config_.pool_bytes) +
            " bytes; allocate the buffer from comm.memory() (read in place, one copy) or raise the "
            "pool's size; nothing was sent");
  }
  std::byte* area = nullptr;
  stall_until(
      lock,
      [&] {
        reclaim_staging();
        area = allocator_->take(bytes);
        return area != nullptr;
      },
      [&] {
        return "the pool (" + std::to_string(config_.pool_bytes) +
               " bytes) stayed full of messages not yet received";
      });
  return area;
}

// Locked. Until ready(), looks again every 100 us with the lock released; throws errc::timeout
// saying what() after the stall timeout, or what aborted this rank meanwhile.
template <sharing_backend Backend>
template <class Ready, class What>
void process_rank<Backend>::stall_until(std::unique_lock<std::mutex>& lock, Ready ready,
                                        What what) {
  const auto deadline = deadline_clock::now() + config_.stall_timeout;
  while (!ready()) {
    if (deadline_clock::now() >= deadline) {
      throw error(errc::timeout, who() + ": " + what() + " for " +
                                     std::to_string(config_.stall_timeout.count()) + " ms");
    }
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    lock.lock();
    refuse_if_aborted();
  }
}

template <sharing_backend Backend>
void process_rank<Backend>::reclaim_staging() {
  std::erase_if(staged_, [&](const staging& s) {
    if (!s.done.done()) return false;
    allocator_->give_back(s.data, s.bytes);
    return true;
  });
}

// Reads the envelopes `sender` published since the last look; matches each with the oldest
// unmatched receive of its tag, or keeps it.
template <sharing_backend Backend>
void process_rank<Backend>::drain(int sender) {
  const auto s = static_cast<std::size_t>(sender);
  const region_view here = mine();
  while (true) {
    envelope& e = *here.slot(sender, read_[s]);
    if (e.sequence.load(std::memory_order_acquire) != read_[s] + 1) return;
    const announced copy{e.tag,    e.bytes,       e.where,    e.out_bytes,     e.out_where,
                         e.posted, e.flag,        e.value,    e.kind,          e.pieces,
                         e.ready,  e.ready_value, e.consumed, e.consumed_value};
    here.tail(sender)->value.store(++read_[s], std::memory_order_release);
    if (copy.kind != 0) {
      arrive_part(sender, copy);
      continue;
    }
    auto& queue = pending_[s];
    const auto found = std::find_if(queue.begin(), queue.end(),
                                    [&](const operation* op) { return op->tag == copy.tag; });
    if (found == queue.end()) {
      arrived_[s].push_back(copy);
      continue;
    }
    operation* op = *found;
    queue.erase(found);
    transfer(*op, copy);
  }
}

// The carrier's work for a matched receive: wait for both posts, copy or combine from the
// sender's pool, write both done flags.
template <sharing_backend Backend>
void process_rank<Backend>::transfer(operation& op, const announced& e) {
  const auto p = static_cast<std::size_t>(op.source);
  const region_view from = views_[p];
  std::uint32_t* sender_done = from.flags() + e.flag;
  if (e.bytes != op.size) {
    op.failed = true;
    op.other_size = static_cast<std::size_t>(e.bytes);
    store_flag(sender_done, e.value);
    store_flag(op.done.word, op.done.value);
    settle(&op, false);
    abort_locked(mismatch_message(op), errc::mismatch);
    return;
  }
  highest_post_[p] = std::max(highest_post_[p], e.posted, [](std::uint32_t a, std::uint32_t b) {
    return static_cast<std::int32_t>(a - b) < 0;
  });
  const std::uint32_t posts[] = {e.posted, op.posted};
  carrier& l = weft::stream::detail::carrier_after(
      backend_, carriers_[p], device_, posts, [&](int d, stream_type s) {
        return memory_type(backend_.memory_on(d, s), allocator_.get());
      });
  const flag_wait waits[] = {{from.posted(), e.posted}, {mine().posted(), op.posted}};
  weft::stream::detail::enqueue_waits(backend_, l.stream, std::span<const flag_wait>(waits));
  const std::size_t n = op.size;
  // Whole from the pool, or piece by piece from the two areas the sender's staging carrier fills.
  const std::size_t piece = e.pieces > 1 ? static_cast<std::size_t>(e.out_bytes) : n;
  for (std::uint32_t i = 0; i < e.pieces && n != 0; ++i) {
    const std::size_t offset = std::size_t{i} * piece;
    const std::size_t bytes = std::min(piece, n - offset);
    const std::byte* source = pool_bases_[p] + (i % 2 == 0 ? e.where : e.out_where);
    if (e.pieces > 1) backend_.wait_flag(l.stream, from.flags() + e.ready, e.ready_value + i);
    if (op.combine) {
      op.combine->apply_in(l.memory, {op.recv_data + offset, bytes}, {op.own + offset, bytes},
                           {source, bytes});
    } else {
      l.memory.copy({op.recv_data + offset, bytes}, {source, bytes});
    }
    if (e.pieces > 1)
      backend_.write_flag(l.stream, from.flags() + e.consumed, e.consumed_value + i);
  }
  backend_.write_flag(l.stream, op.done.word, op.done.value);
  backend_.write_flag(l.stream, sender_done, e.value);
  l.last = op.done;
  settle(&op, true);
}

}  // namespace weft::stream
