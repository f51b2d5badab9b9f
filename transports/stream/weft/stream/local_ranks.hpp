// weft/stream/local_ranks.hpp — ranks of one process whose collectives only enqueue work on
// streams: the shape of weft's GPU path (weft/transport/cuda/communicators.hpp), written once over
// a backend that supplies streams, flags and a memory space bound to a stream
// (weft/stream/host_streams.hpp runs it on CPU threads, for tests and for programs written for
// GPUs on a machine without one).
//
//   weft::stream::local_ranks<Backend> ranks(backend, devices); // one rank per entry of `devices`
//   weft::communicator comm0(ranks.endpoint(0)), comm1(ranks.endpoint(1));
//   weft::allreduce(comm0, data0, weft::sum{});                // enqueues, returns at once
//   weft::allreduce(comm1, data1, weft::sum{});                // one host thread may issue both
//   ranks.synchronize(0, 10s);  ranks.synchronize(1, 10s);     // results there; or a timeout
//
// How a message moves. Every buffer of the process is addressable by every stream, so every
// message is one copy, from the send buffer straight into the receive buffer (or one combine,
// for a reducing receive). A send and its receive are matched on the host when the second of
// the two is posted; that post enqueues the transfer on a carrier: a stream of the receiver's
// device that waits until both ranks' streams have reached their posts (each post writes the
// rank's "posted" flag), copies, and writes the transfer's "done" flag. A rank's wait on a
// request enqueues, on its own stream, a wait for that done flag and returns: it orders the
// stream and never blocks the host (weft::transport's rule: wait establishes order). So a wait
// may be enqueued before the peer has posted at all, which is what lets one thread issue a
// collective on every rank in turn. A transfer waits for nothing but its two posts (the
// progress rule of two-sided nonblocking messages, so no order of posts and waits that
// completes on a host transport deadlocks here): each pair of ranks has a carrier, and a transfer
// queues behind another on it only when that one was posted earlier on both sides; one that
// the two ranks posted in different orders gets a carrier of its own.
//
// Whole collectives (weft::fused: allreduce, reduce_scatter, allgather). Every rank posts
// its part with the call's tag; the last post enqueues on one carrier of each device a wait for
// every rank's post, that device's share of the work straight from every input into every
// output, and the device's done flag (weft/stream/whole_collective.hpp); each rank's wait is
// a wait for each device's flag. No messages, no scratch.
//
// Faults. No stream waits for ever: synchronize(rank, timeout) throws errc::timeout naming the
// rank, the peer, the collective and step whose transfer has not come (a rank that never
// issued its call, say); abort(reason) writes every flag a stream may wait on, so every stream
// runs to its end, and poisons every rank: every later post, wait and synchronize throws.
#pragma once

#include "weft/call.hpp"
#include "weft/communicator.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/detail/operation_pool.hpp"
#include "weft/detail/request_handle.hpp"
#include "weft/error.hpp"
#include "weft/stream/backend.hpp"
#include "weft/stream/carriers.hpp"
#include "weft/stream/flags.hpp"
#include "weft/stream/local_transport.hpp"
#include "weft/stream/operations.hpp"
#include "weft/stream/whole_collective.hpp"
#include "weft/transport.hpp"

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace weft::stream {

template <backend Backend>
class local_ranks {
 public:
  using stream_type = typename Backend::stream_type;
  using memory_type = typename Backend::memory_type;

  // One rank per entry of `devices` (a device may appear more than once: ranks sharing it).
  // `streams`, when given (one per rank), are the caller's and stay alive while these ranks
  // do; otherwise local_ranks makes a stream per rank and destroys it at the end.
  local_ranks(Backend backend, std::vector<int> devices, std::vector<stream_type> streams = {})
      : backend_(std::move(backend)), flags_(backend_) {
    if (devices.empty())
      throw error(errc::invalid_argument, "stream-ordered ranks: at least one rank is needed");
    if (!streams.empty() && streams.size() != devices.size()) {
      throw error(errc::invalid_argument,
                  "stream-ordered ranks: " + std::to_string(devices.size()) + " ranks was given " +
                      std::to_string(streams.size()) + " streams");
    }
    ranks_.reserve(devices.size());
    try {
      for (std::size_t i = 0; i < devices.size(); ++i) {
        const bool own = streams.empty();
        const stream_type s = own ? backend_.make_stream(devices[i]) : streams[i];
        ranks_.push_back(
            std::make_unique<rank_state>(devices[i], s, own, backend_.memory_on(devices[i], s)));
        ranks_.back()->posted = flags_.take_permanent();
      }
      for (std::size_t i = 0; i < devices.size(); ++i)
        endpoints_.emplace_back(this, static_cast<int>(i));
      carriers_.resize(devices.size() * devices.size() +
                       devices.size());  // pairs, then each rank's whole collectives
      for (const int reader : devices) {
        for (const int owner : devices)
          reaches_all_ = reaches_all_ && backend_.direct_access(reader, owner);
      }
      std::vector<int> distinct;  // the devices, in order of their first rank
      for (std::size_t i = 0; i < devices.size(); ++i) {
        const auto at = static_cast<std::size_t>(
            std::find(distinct.begin(), distinct.end(), devices[i]) - distinct.begin());
        if (at == distinct.size()) {
          distinct.push_back(devices[i]);
          ranks_on_device_.emplace_back();
        }
        ranks_on_device_[at].push_back(static_cast<int>(i));
      }
    } catch (...) {
      destroy_streams();
      throw;
    }
  }
  local_ranks(const local_ranks&) = delete;
  local_ranks& operator=(const local_ranks&) = delete;
  // Waits (bounded) for every stream to finish what it was given, then frees them: destroying
  // ranks with work still enqueued would leave its streams waiting on flags that are gone.
  ~local_ranks() {
    abort_if_busy();
    destroy_streams();
  }

  int size() const { return static_cast<int>(ranks_.size()); }
  local_transport<Backend>& endpoint(int rank) {
    return endpoints_[static_cast<std::size_t>(rank)];
  }
  memory_type& memory(int rank) { return ranks_[static_cast<std::size_t>(rank)]->memory; }
  stream_type stream(int rank) const { return ranks_[static_cast<std::size_t>(rank)]->stream; }
  int device(int rank) const { return ranks_[static_cast<std::size_t>(rank)]->device; }

  // Waits until everything enqueued on `rank`'s stream has run. Throws errc::timeout after
  // `timeout`, naming what the stream waits for. After an abort it also waits for every transfer
  // still in flight (they may touch any rank's buffers), then throws what poisoned the ranks.
  void synchronize(int rank, std::chrono::milliseconds timeout) {
    rank_state& r = *ranks_[static_cast<std::size_t>(rank)];
    const auto deadline = deadline_clock::now() + timeout;
    auto late = [&] { return timed_out(rank, timeout); };
    detail::poll_until([&] { return backend_.idle(r.stream); }, deadline, late);
    // The aborted streams no longer wait for their transfers: wait for every carrier as well, so
    // that the caller may free the buffers once this returns.
    if (aborted()) detail::poll_until([&] { return carriers_idle(); }, deadline, late);
    std::lock_guard lock(mutex_);
    r.waits.clear();
    refuse_if_aborted(rank);
  }

  // Releases every stream of these ranks (every flag a stream may wait on is written) and
  // poisons it: later posts, waits and synchronizes throw errc::transport with `reason`.
  // Results of the calls in flight are undefined; the streams still run to their end, so the
  // caller synchronizes them before freeing buffers they use.
  void abort(const std::string& reason) {
    std::lock_guard lock(mutex_);
    if (!aborted_) aborted_ = reason.empty() ? std::string("aborted by the caller") : reason;
    flags_.release_all();
    for (auto& r : ranks_) {
      for (detail::operation* op : r->unmatched) settle(op, false);
      r->unmatched.clear();
    }
  }

  bool aborted() const {
    std::lock_guard lock(mutex_);
    return aborted_.has_value();
  }

 private:
  friend class local_transport<Backend>;

  using carrier = detail::carrier<Backend>;

  struct rank_state {
    rank_state(int d, stream_type s, bool own, memory_type m)
        : device(d), stream(s), owns_stream(own), memory(std::move(m)) {}
    int device;
    stream_type stream;
    bool owns_stream;
    memory_type memory;
    flag_ticket posted;  // written by this rank's stream at each post
    std::deque<detail::operation*>
        unmatched;  // sends to this rank and receives of this rank, not yet matched
    std::deque<detail::wait_record> waits;  // this stream's waits on transfers, oldest first
    detail::call_note note;
  };

  void note_call(int rank, detail::call_note note) {
    std::lock_guard lock(mutex_);
    ranks_[static_cast<std::size_t>(rank)]->note = note;
  }

  // Posts one side of a transfer from `source` to `destination`; `send_data` set for a send.
  detail::operation* post(bool is_send, int source, int destination, tag_t tag,
                          const std::byte* send_data, std::byte* recv_data, std::size_t size,
                          const weft::detail::reducer* combine, const std::byte* own) {
    std::lock_guard lock(mutex_);
    const int poster = is_send ? source : destination;
    refuse_if_aborted(poster);
    rank_state& mine = *ranks_[static_cast<std::size_t>(poster)];
    detail::operation* op = pool_.acquire();
    *op = detail::operation{};
    op->source = source;
    op->destination = destination;
    op->tag = tag;
    op->send_data = send_data;
    op->recv_data = recv_data;
    op->size = size;
    op->is_send = is_send;
    if (combine != nullptr) op->combine.emplace(*combine);
    op->own = own;
    op->note = mine.note;
    op->posted = ++mine.posted.value;
    backend_.write_flag(mine.stream, mine.posted.word, op->posted);

    // Both sides' queues live with the receiver; match the oldest of the other kind, same pair
    // and tag (messages of one pair and tag match in posting order).
    auto& queue = ranks_[static_cast<std::size_t>(destination)]->unmatched;
    const auto other = std::find_if(queue.begin(), queue.end(), [&](const detail::operation* o) {
      return o->is_send != is_send && o->source == source && o->tag == tag;
    });
    if (other == queue.end()) {
      op->done = flags_.take();
      queue.push_back(op);
      return op;
    }
    detail::operation* partner = *other;
    queue.erase(other);
    op->done = partner->done;
    detail::operation* sent = is_send ? op : partner;
    detail::operation* received = is_send ? partner : op;
    if (sent->size != received->size) {
      sent->other_size = received->size;
      received->other_size = sent->size;
      sent->failed = received->failed = true;
      const std::string why = detail::mismatch_message(*op);
      aborted_ = why;
      // The side that waits already must not wait for ever: its done flag is written now.
      store_flag(op->done.word, op->done.value);
      settle(partner, true);
      settle(op, true);
      throw error(errc::mismatch, why);
    }
    enqueue_transfer(*sent, *received);
    settle(partner, true);
    settle(op, true);
    return op;
  }

  // The carrier's work for a matched pair: wait for both posts, copy or combine, write done.
  void enqueue_transfer(const detail::operation& sent, const detail::operation& received) {
    rank_state& from = *ranks_[static_cast<std::size_t>(sent.source)];
    rank_state& to = *ranks_[static_cast<std::size_t>(received.destination)];
    const std::uint32_t posts[] = {sent.posted, received.posted};
    carrier& l = carrier_after(carriers_[static_cast<std::size_t>(sent.source) * ranks_.size() +
                                         static_cast<std::size_t>(received.destination)],
                               to.device, posts);
    if (&from != &to) {
      const flag_wait posts[] = {{from.posted.word, sent.posted},
                                 {to.posted.word, received.posted}};
      wait_flags(l.stream, posts);
    } else {  // a send to self: the later of the two posts
      backend_.wait_flag(l.stream, to.posted.word,
                         reached(sent.posted, received.posted) ? sent.posted : received.posted);
    }
    const std::size_t n = sent.size;
    if (received.combine) {
      std::span<std::byte> target(received.recv_data, n);
      std::span<const std::byte> own(received.own, n);
      if (backend_.direct_access(to.device, from.device)) {
        received.combine->apply_in(l.memory, target, own, {sent.send_data, n});
      } else if (n != 0) {  // the peer's memory is not readable from here: stage it on this device
        std::byte* staged = l.memory.allocate(n);
        l.memory.copy({staged, n}, {sent.send_data, n});
        received.combine->apply_in(l.memory, target, own, {staged, n});
        l.memory.deallocate(staged, n);
      }
    } else if (n != 0) {
      l.memory.copy({received.recv_data, n}, {sent.send_data, n});
    }
    backend_.write_flag(l.stream, sent.done.word, sent.done.value);
    l.last = sent.done;
  }

  carrier& carrier_after(detail::carrier_set<Backend>& mine, int device,
                         std::span<const std::uint32_t> posts) {
    return detail::carrier_after(backend_, mine, device, posts,
                                 [&](int d, stream_type s) { return backend_.memory_on(d, s); });
  }

  bool runs_collectives() const { return reaches_all_; }

  // Rank `rank`'s part of a whole collective (transport::post_collective).
  detail::operation* post_collective(int rank, collective kind, std::span<const std::byte> in,
                                     std::span<std::byte> out, const weft::detail::reducer* combine,
                                     tag_t tag) {
    std::lock_guard lock(mutex_);
    refuse_if_aborted(rank);
    const std::string who = "rank " + std::to_string(rank) + ": " + std::string(to_string(kind));
    if (!reaches_all_) {
      throw error(errc::invalid_argument,
                  who +
                      " run whole (fused) needs every rank's device to reach every "
                      "other's memory (peer access), and these devices do not; choose "
                      "another algorithm; nothing was sent");
    }
    if ((kind != collective::allgather && combine == nullptr) ||
        (kind != collective::allreduce && kind != collective::reduce_scatter &&
         kind != collective::allgather)) {
      throw error(errc::invalid_argument,
                  who +
                      " cannot be run whole (only allreduce, reduce_scatter and "
                      "allgather, the first two with a reduction); nothing was sent");
    }
    const std::size_t p = ranks_.size();
    auto open = std::find_if(wholes_.begin(), wholes_.end(),
                             [&](const auto& g) { return !g->enqueued && g->tag == tag; });
    if (open == wholes_.end()) {
      auto made = std::make_unique<detail::whole_call>();
      made->tag = tag;
      made->kind = kind;
      made->parts.resize(p);
      for (std::size_t d = 0; d < ranks_on_device_.size(); ++d) made->done.push_back(flags_.take());
      wholes_.push_back(std::move(made));
      open = std::prev(wholes_.end());
    }
    detail::whole_call& g = **open;
    detail::whole_call::part& mine = g.parts[static_cast<std::size_t>(rank)];
    rank_state& r = *ranks_[static_cast<std::size_t>(rank)];
    if (auto message =
            detail::conflict(g, rank, kind, in.size(), out.size(), r.note.kind, r.note.step)) {
      aborted_ = *message;
      for (const auto& done : g.done) store_flag(done.word, done.value);  // nobody waits for ever
      throw error(errc::mismatch, *message);
    }
    mine = {in.data(), out.data(), in.size(), out.size(), ++r.posted.value, true};
    backend_.write_flag(r.stream, r.posted.word, mine.posted);
    detail::operation* op = pool_.acquire();
    *op = detail::operation{};
    op->source = op->destination = rank;
    op->tag = tag;
    op->size = in.size();
    op->is_send = true;
    op->posted = mine.posted;
    op->note = r.note;
    op->whole = &g;
    op->settled = true;
    if (++g.arrived == static_cast<int>(p)) enqueue_whole(g, combine);
    return op;
  }

  // Every rank has posted: a carrier of each device waits for every post, runs the device's
  // passes, and writes the device's done flag (a device with nothing to do is done at once).
  void enqueue_whole(detail::whole_call& g, const weft::detail::reducer* combine) {
    const std::size_t p = ranks_.size();
    const std::size_t element_size = combine != nullptr ? combine->element_size() : 1;
    for (std::size_t d = 0; d < ranks_on_device_.size(); ++d) {
      const auto passes =
          detail::share_of(g, d, ranks_on_device_.size(), ranks_on_device_[d], element_size);
      const flag_ticket done = g.done[d];
      if (passes.empty()) {
        store_flag(done.word, done.value);
        flags_.give_back(done, true);
        continue;
      }
      std::vector<std::uint32_t> posted;
      std::vector<flag_wait> posts;
      for (std::size_t i = 0; i < p; ++i) {
        posted.push_back(g.parts[i].posted);
        posts.push_back({ranks_[i]->posted.word, g.parts[i].posted});
      }
      carrier& l = carrier_after(
          carriers_[p * p + d],
          ranks_[static_cast<std::size_t>(ranks_on_device_[d].front())]->device, posted);
      wait_flags(l.stream, posts);
      for (const auto& work : passes) {
        if (combine != nullptr) {
          combine->apply_all_in(l.memory, work.outs, work.ins, work.bytes);
        } else {
          for (std::byte* out : work.outs)
            l.memory.copy({out, work.bytes}, {work.ins.front(), work.bytes});
        }
      }
      backend_.write_flag(l.stream, done.word, done.value);
      flags_.give_back(done, true);
      l.last = done;
    }
    g.enqueued = true;
    forget_finished_wholes();
  }

  // Whole collectives enqueued and no longer referred to by any request.
  void forget_finished_wholes() {
    std::erase_if(wholes_, [](const auto& g) { return g->enqueued && g->released == g->arrived; });
  }

  // A rank's wait on its part of a whole collective: on every device's done flag (a device is
  // named in the errors by its first rank).
  void enqueue_whole_wait(rank_state& r, detail::operation* op) {
    detail::whole_call& g = *op->whole;
    const auto& part = g.parts[static_cast<std::size_t>(op->source)];
    std::vector<flag_wait> dones;
    for (std::size_t d = 0; d < g.done.size(); ++d) {
      if (g.enqueued && g.done[d].done()) continue;
      dones.push_back({g.done[d].word, g.done[d].value});
      r.waits.push_back({g.done[d], ranks_on_device_[d].front(), false, part.in_size, op->note});
    }
    wait_flags(r.stream, dones);
  }

  void wait_flags(stream_type s, std::span<const flag_wait> waits) {
    detail::enqueue_waits(backend_, s, waits);
  }

  bool enqueue_wait(int rank, detail::operation* op) {
    std::lock_guard lock(mutex_);
    if (op->failed) throw error(errc::mismatch, detail::mismatch_message(*op));
    refuse_if_aborted(rank);
    if (op->waited) return true;
    rank_state& r = *ranks_[static_cast<std::size_t>(rank)];
    while (!r.waits.empty() && r.waits.front().done.done()) r.waits.pop_front();
    if (op->whole != nullptr) {
      enqueue_whole_wait(r, op);
      op->waited = true;
      return true;
    }
    backend_.wait_flag(r.stream, op->done.word, op->done.value);
    op->waited = true;
    r.waits.push_back(
        {op->done, op->is_send ? op->destination : op->source, op->is_send, op->size, op->note});
    return true;
  }

  // The request is dropped. A posted side nobody waited for is withdrawn if still unmatched;
  // one that was waited for stays queued (its stream waits on it) until its partner comes. A
  // side dropped unwaited after its transfer was enqueued is waited for now, so that the
  // poster's later work (freeing the buffer, say) comes after the transfer in stream order.
  void release(detail::operation* op) {
    std::lock_guard lock(mutex_);
    op->released = true;
    if (op->whole != nullptr) {  // never withdrawn: the other ranks' shares may read its buffers
      if (!op->waited && !aborted_)
        enqueue_whole_wait(*ranks_[static_cast<std::size_t>(op->source)], op);
      ++op->whole->released;
      forget_finished_wholes();
      pool_.release(op);
      return;
    }
    if (op->settled && !op->waited && !aborted_) {
      rank_state& poster =
          *ranks_[static_cast<std::size_t>(op->is_send ? op->source : op->destination)];
      backend_.wait_flag(poster.stream, op->done.word, op->done.value);
      op->waited = true;
    }
    if (!op->settled && !op->waited) {
      auto& queue = ranks_[static_cast<std::size_t>(op->destination)]->unmatched;
      queue.erase(std::find(queue.begin(), queue.end(), op));
      settle(op, false);
      return;
    }
    if (op->settled) pool_.release(op);
  }

  // `op` needs no more matching: its transfer is enqueued (`written`) or will never be.
  void settle(detail::operation* op, bool written) {
    if (op->settled) return;
    op->settled = true;
    if (op->is_send || !written) flags_.give_back(op->done, written);  // one give-back per transfer
    if (op->released) pool_.release(op);
  }

  void refuse_if_aborted(int rank) const {
    if (aborted_) {
      throw error(errc::transport, "rank " + std::to_string(rank) +
                                       ": these stream-ordered ranks were aborted (" + *aborted_ +
                                       "); make new ones");
    }
  }

  error timed_out(int rank, std::chrono::milliseconds timeout) {
    std::lock_guard lock(mutex_);
    rank_state& r = *ranks_[static_cast<std::size_t>(rank)];
    const std::string head = "rank " + std::to_string(rank) + " (device " +
                             std::to_string(r.device) + "): its stream did not finish within " +
                             std::to_string(timeout.count()) + " ms";
    for (const auto& g : wholes_) {  // a whole collective some rank has not posted its part of
      if (!g->enqueued && g->parts[static_cast<std::size_t>(rank)].arrived)
        return error(errc::timeout, head + detail::missing_parts(*g));
    }
    for (const auto& w : r.waits) {
      if (!w.done.done()) return error(errc::timeout, head + detail::waiting_for(w));
    }
    return error(errc::timeout,
                 head + "; it waits for no other rank: the device is still busy with its own work");
  }

  bool carriers_idle() {
    std::lock_guard lock(mutex_);
    return detail::carriers_idle(backend_, carriers_);
  }

  // The destructor's bounded wait: streams with work left after 10 s are released by abort.
  void abort_if_busy() noexcept {
    detail::drain_or_abort(
        [&] {
          for (auto& r : ranks_) {
            if (!backend_.idle(r->stream)) return true;
          }
          return !carriers_idle();
        },
        [&] { abort("the ranks were destroyed with work in flight"); });
  }

  void destroy_streams() noexcept {
    detail::destroy_carriers(backend_, carriers_);
    for (auto& r : ranks_) {
      if (r->owns_stream) backend_.destroy_stream(r->stream);
    }
  }

  Backend backend_;
  mutable std::mutex mutex_;
  flag_pool<Backend> flags_;
  std::vector<std::unique_ptr<rank_state>> ranks_;
  std::deque<local_transport<Backend>> endpoints_;
  // per pair: sender * size + receiver; then per rank: size * size + rank, its whole collectives
  std::vector<detail::carrier_set<Backend>> carriers_;
  std::vector<std::unique_ptr<detail::whole_call>> wholes_;  // whole collectives not yet forgotten
  bool reaches_all_ = true;  // every rank's device reaches every rank's memory
  std::vector<std::vector<int>> ranks_on_device_;  // by distinct device, in order of first rank
  weft::detail::operation_pool<detail::operation> pool_;
  std::optional<std::string> aborted_;
};

// Waits for `comm`'s stream (see local_ranks::synchronize).
template <backend Backend>
void synchronize(communicator<local_transport<Backend>>& comm, std::chrono::milliseconds timeout) {
  auto& t = comm.underlying_transport();
  t.shared().synchronize(t.rank(), timeout);
}

// Aborts every rank of the process `comm` belongs to (see local_ranks::abort).
template <backend Backend>
void abort(communicator<local_transport<Backend>>& comm,
           const std::string& reason = "aborted by the caller") {
  comm.underlying_transport().shared().abort(reason);
}

}  // namespace weft::stream
