// weft/stream/processes/whole.hpp — whole collectives (weft::fused) between stream-ordered
// processes: allreduce, reduce_scatter and allgather read every input and write every output
// once, with no messages. Members of weft::stream::process_rank
// (weft/stream/processes/process_rank.hpp).
//
// Each rank announces its part (its input and output as offsets in its pool, staged there by
// its stream when they lie elsewhere) to every other rank in an envelope. Once a rank knows
// every part, a carrier of its device waits for every rank's post, runs the rank's share
// (weft/stream/whole_collective.hpp cuts the work by rank here: an allreduce's vector in shares
// of at least 1 MiB, a reduce_scatter's or allgather's block per rank) straight from the
// peers' pools into the peers' pools, raises the rank's share flag, waits for every other
// rank's, and raises the flag this rank's stream waits on. A staged output is copied out by
// the rank's stream after that wait.
#pragma once

#include "weft/stream/processes/process_rank.hpp"

namespace weft::stream {

template <sharing_backend Backend>
auto process_rank<Backend>::post_collective(collective kind, std::span<const std::byte> in,
                                            std::span<std::byte> out,
                                            const weft::detail::reducer* combine, tag_t tag)
    -> operation* {
  std::unique_lock lock(mutex_);
  refuse_if_aborted();
  whole_group& g = group_of(tag);
  if (g.arrived == 0) g.kind = kind;
  if (auto message = weft::stream::detail::conflict(g, rank_, kind, in.size(), out.size(),
                                                    note_.kind, note_.step)) {
    abort_locked(*message, errc::mismatch);
    throw error(errc::mismatch, *message);
  }
  g.kind = kind;
  const flag_ticket complete = flags_->take();
  // In the pool, or staged there: the peers read the input and write the output in place. A
  // staging area is free again once the host sees the call complete.
  const bool in_place = in.data() == out.data();
  const std::byte* in_area = in.data();
  if (!in.empty() && !memory_->in_pool(in.data(), in.size())) {
    std::byte* area = stage(lock, in.size());
    memory_->copy({area, in.size()}, in);
    in_area = area;
    staged_.push_back({complete, area, in.size()});
  }
  std::byte* out_area = out.data();
  if (!out.empty() && !memory_->in_pool(out.data(), out.size())) {
    out_area = in_place ? const_cast<std::byte*>(in_area) : stage(lock, out.size());
    if (!in_place) staged_.push_back({complete, out_area, out.size()});
    g.user_out = out.data();
    g.staged_out = out_area;
  }
  operation* op = acquire(true, rank_, rank_, tag, in.size());
  g.complete = complete;
  const flag_ticket share = flags_->take();
  flags_->give_back(share, true);  // this rank's carrier raises it
  if (combine != nullptr) g.combine.emplace(*combine);
  g.mine = true;
  announced part;
  part.tag = tag;
  part.bytes = in.size();
  part.where = in.empty() ? 0 : static_cast<std::uint64_t>(in_area - pool_->data());
  part.out_bytes = out.size();
  part.out_where = out.empty() ? 0 : static_cast<std::uint64_t>(out_area - pool_->data());
  part.posted = op->posted;
  part.flag = static_cast<std::uint32_t>(share.word - mine().flags());
  part.value = share.value;
  part.kind = 1 + static_cast<std::uint32_t>(kind);
  op->whole = &g;
  op->done = g.complete;
  op->settled = true;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) publish(peer, part, &lock);
  }
  join(g, rank_, part);
  return op;
}

// The open group of `tag` (one a peer's part opened, or a new one).
template <sharing_backend Backend>
auto process_rank<Backend>::group_of(tag_t tag) -> whole_group& {
  for (auto& g : wholes_) {
    if (!g->enqueued && g->tag == tag) return *g;
  }
  auto made = std::make_unique<whole_group>();
  made->tag = tag;
  made->parts.resize(static_cast<std::size_t>(size_));
  made->from.resize(static_cast<std::size_t>(size_));
  wholes_.push_back(std::move(made));
  return *wholes_.back();
}

// Locked. Records `rank`'s part; the last part enqueues this rank's share.
template <sharing_backend Backend>
void process_rank<Backend>::join(whole_group& g, int rank, const announced& part) {
  const auto r = static_cast<std::size_t>(rank);
  g.parts[r] = {pool_bases_[r] + part.where,
                pool_bases_[r] + part.out_where,
                static_cast<std::size_t>(part.bytes),
                static_cast<std::size_t>(part.out_bytes),
                part.posted,
                true};
  g.from[r] = part;
  if (++g.arrived == size_ && g.mine) enqueue_whole(g);
}

// Locked. A peer's part, from its envelope.
template <sharing_backend Backend>
void process_rank<Backend>::arrive_part(int sender, const announced& part) {
  whole_group& g = group_of(part.tag);
  const auto kind = static_cast<collective>(part.kind - 1);
  if (g.arrived == 0) g.kind = kind;
  if (auto message =
          weft::stream::detail::conflict(g, sender, kind, static_cast<std::size_t>(part.bytes),
                                         static_cast<std::size_t>(part.out_bytes), kind, 0)) {
    abort_locked(*message, errc::mismatch);
    return;
  }
  join(g, sender, part);
}

// Locked, every part known: this rank's share on a carrier, then the wait for every other share.
template <sharing_backend Backend>
void process_rank<Backend>::enqueue_whole(whole_group& g) {
  std::vector<std::uint32_t> posts;
  std::vector<flag_wait> waits;
  for (int r = 0; r < size_; ++r) {
    posts.push_back(g.parts[static_cast<std::size_t>(r)].posted);
    waits.push_back({views_[static_cast<std::size_t>(r)].posted(),
                     g.parts[static_cast<std::size_t>(r)].posted});
  }
  carrier& l = weft::stream::detail::carrier_after(
      backend_, carriers_[static_cast<std::size_t>(size_)], device_, posts,
      [&](int d, stream_type s) {
        return memory_type(backend_.memory_on(d, s), allocator_.get());
      });
  weft::stream::detail::enqueue_waits(backend_, l.stream, waits);
  const std::size_t element_size = g.combine ? g.combine->element_size() : 1;
  const int me[] = {rank_};
  for (const auto& work : weft::stream::detail::share_of(
           g, static_cast<std::size_t>(rank_), static_cast<std::size_t>(size_), me, element_size)) {
    if (g.combine) {
      g.combine->apply_all_in(l.memory, work.outs, work.ins, work.bytes);
    } else {
      for (std::byte* out : work.outs)
        l.memory.copy({out, work.bytes}, {work.ins.front(), work.bytes});
    }
  }
  const announced& mine = g.from[static_cast<std::size_t>(rank_)];
  backend_.write_flag(l.stream, this->mine().flags() + mine.flag, mine.value);
  std::vector<flag_wait> shares;
  for (int r = 0; r < size_; ++r) {
    const announced& part = g.from[static_cast<std::size_t>(r)];
    if (r != rank_)
      shares.push_back({views_[static_cast<std::size_t>(r)].flags() + part.flag, part.value});
  }
  weft::stream::detail::enqueue_waits(backend_, l.stream, shares);
  backend_.write_flag(l.stream, g.complete.word, g.complete.value);
  l.last = g.complete;
  flags_->give_back(g.complete, true);
  g.enqueued = true;
  forget_finished_wholes();
}

// Locked. The rank's stream waits for every share; a staged output is copied out after.
template <sharing_backend Backend>
void process_rank<Backend>::wait_whole(operation* op) {
  auto& g = *static_cast<whole_group*>(op->whole);
  backend_.wait_flag(stream_, op->done.word, op->done.value);
  if (g.staged_out != nullptr) {
    memory_->copy({g.user_out, g.parts[static_cast<std::size_t>(rank_)].out_size},
                  {g.staged_out, g.parts[static_cast<std::size_t>(rank_)].out_size});
  }
  op->waited = true;
}

// Whole collectives enqueued and no longer referred to by a request.
template <sharing_backend Backend>
void process_rank<Backend>::forget_finished_wholes() {
  std::erase_if(wholes_, [](const auto& g) { return g->enqueued && g->released != 0; });
}

// Locked. Writes `part` into `peer`'s FIFO from this rank (waiting, the lock released, while it
// is full) and rings the peer.
template <sharing_backend Backend>
void process_rank<Backend>::publish(int peer, const announced& part,
                                    std::unique_lock<std::mutex>* lock) {
  const auto p = static_cast<std::size_t>(peer);
  const region_view to = views_[p];
  if (lock != nullptr) wait_for_room(*lock, peer, to);
  envelope& e = *to.slot(rank_, sent_[p]);
  e.tag = part.tag;
  e.bytes = part.bytes;
  e.where = part.where;
  e.out_bytes = part.out_bytes;
  e.out_where = part.out_where;
  e.posted = part.posted;
  e.flag = part.flag;
  e.value = part.value;
  e.kind = part.kind;
  e.pieces = part.pieces;
  e.ready = part.ready;
  e.ready_value = part.ready_value;
  e.consumed = part.consumed;
  e.consumed_value = part.consumed_value;
  e.sequence.store(++sent_[p], std::memory_order_release);
  shm::detail::ring(to.control());
}

}  // namespace weft::stream
