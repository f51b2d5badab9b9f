// weft/stream/processes/process_rank.hpp — one rank of a stream-ordered job whose ranks are
// processes of one host: the protocol of weft/stream/processes.hpp. The class is declared here;
// its members are defined by concern beside it (meeting.hpp, messages.hpp, watch.hpp,
// whole.hpp), and weft/stream/processes.hpp includes them all: include that one.
//
// A send's post enqueues, on the rank's stream, the staging copy (for a buffer outside the pool)
// and the write of its `posted` word, then publishes an envelope in the receiver's region (tag,
// size, where in the pool, the post, the done flag to write) and rings the receiver's doorbell.
// A receive's post enqueues its own `posted` write. The receiver matches the two on its host:
// at the receive's post when the envelope is there, else on its progress thread when the
// envelope comes (messages of one pair and tag match in posting order). The match enqueues
// the transfer on a carrier of the receiver's device: wait for both posts, copy (or combine) from
// the sender's pool into the receive buffer, write the receive's done flag and, in the
// sender's region, the send's. A wait on either side only enqueues a wait for its done flag on
// the rank's stream, so collectives only enqueue, as in one process (weft/stream/local_ranks.hpp).
//
// Faults. A peer's process that ends (its pidfd) or a peer that aborts (its region says so)
// aborts this rank: every flag its streams may wait on is written, so they run to their end;
// the next synchronize throws peer_lost naming the peer (or the peer's reason) after the carriers
// are idle, and every later call throws.
#pragma once

#include "weft/bootstrap/failure_watch.hpp"
#include "weft/bootstrap/store.hpp"
#include "weft/detail/operation_pool.hpp"
#include "weft/error.hpp"
#include "weft/stream/backend.hpp"
#include "weft/stream/carriers.hpp"
#include "weft/stream/flags.hpp"
#include "weft/stream/operations.hpp"
#include "weft/stream/processes/region.hpp"
#include "weft/stream/processes/sharing.hpp"
#include "weft/transport/shm/pool.hpp"
#include "weft/transport/shm/wiring.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace weft::stream {

using weft::stream::detail::mismatch_message;

// What a rank is made with (weft::stream::process_config says where each comes from).
struct process_settings {
  std::string prefix = "weft";
  std::string secret;
  std::chrono::milliseconds connect_timeout{std::chrono::minutes(5)};
  std::chrono::milliseconds stall_timeout{std::chrono::minutes(5)};  // a full FIFO, a full pool
  std::size_t pool_bytes = std::size_t{256} << 20;
  std::size_t stage_piece_bytes =
      std::size_t{4} << 20;     // a send from outside the pool larger than this goes in pieces
  std::size_t envelopes = 256;  // per pair and direction
  std::size_t flags = 16 * flag_chunk;
};

template <sharing_backend Backend>
class process_rank {
 public:
  using stream_type = typename Backend::stream_type;
  using memory_type = pooled_memory<typename Backend::memory_type>;
  using operation = weft::stream::detail::operation;

  process_rank(Backend backend, int rank, int size, int device, bootstrap::store* meeting,
               const process_settings& config)
      : backend_(std::move(backend)),
        rank_(rank),
        size_(size),
        device_(device),
        config_(config),
        shape_{static_cast<std::size_t>(size), config.envelopes,
               (config.flags + flag_chunk - 1) / flag_chunk * flag_chunk} {
    if (size < 1 || rank < 0 || rank >= size) {
      throw error(errc::invalid_argument, "stream-ordered transport: rank " + std::to_string(rank) +
                                              " of " + std::to_string(size));
    }
    if (size > 1 && meeting == nullptr) {
      throw error(errc::invalid_argument, "stream-ordered transport: " + std::to_string(size) +
                                              " ranks need a bootstrap store to meet through");
    }
    if (config_.pool_bytes < shm::detail::page_bytes || config_.envelopes < 2) {
      throw error(errc::invalid_argument,
                  "stream-ordered transport: a pool of at least 4096 bytes and at least "
                  "2 envelopes per pair");
    }
    pool_.emplace(
        backend_.make_pool(device_, config_.pool_bytes));  // binds the backend to the device
    own_ = shm::detail::create_region(shape_.total());
    backend_.register_host(own_.base(), own_.bytes());
    registered_.push_back(own_.base());
    views_.assign(static_cast<std::size_t>(size), region_view{nullptr, &shape_});
    views_[static_cast<std::size_t>(rank)].base = own_.base();
    allocator_ = std::make_unique<shm::detail::pool>(pool_->data(), config_.pool_bytes);
    pool_bases_.assign(static_cast<std::size_t>(size), nullptr);
    pool_bases_[static_cast<std::size_t>(rank)] = pool_->data();
    peer_pools_.resize(static_cast<std::size_t>(size));
    pids_.assign(static_cast<std::size_t>(size), 0);
    pidfds_.assign(static_cast<std::size_t>(size), -1);
    stream_ = backend_.make_stream(device_);
    memory_.emplace(backend_.memory_on(device_, stream_), allocator_.get());
    flag_memory_.emplace(mine().flags(), shape_.flags);
    flags_.emplace(*flag_memory_);
    sent_.assign(static_cast<std::size_t>(size), 0);
    read_.assign(static_cast<std::size_t>(size), 0);
    arrived_.resize(static_cast<std::size_t>(size));
    pending_.resize(static_cast<std::size_t>(size));
    carriers_.resize(static_cast<std::size_t>(size) +
                     2);  // per sender, the whole collectives, the staging
    highest_post_.assign(static_cast<std::size_t>(size), 0);
    try {
      if (size > 1) meet(*meeting);
    } catch (...) {
      failures_.reset();
      teardown();
      throw;
    }
    watching_ = true;
    progress_ = std::thread([this] { progress(); });
  }
  process_rank(const process_rank&) = delete;
  process_rank& operator=(const process_rank&) = delete;
  ~process_rank() {
    drain_or_abort();
    failures_.reset();  // an orderly end: the lifeline is withdrawn
    stopping_ = true;
    shm::detail::ring(mine().control());
    if (progress_.joinable()) progress_.join();
    mine().control()->closed.store(1, std::memory_order_seq_cst);
    teardown();
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  stream_type stream() const { return stream_; }
  memory_type& memory() { return *memory_; }
  std::string_view pool_way() const { return pool_->way(); }
  std::size_t pool_bytes() const { return config_.pool_bytes; }
  int watched() const {
    return static_cast<int>(
        std::count_if(pidfds_.begin(), pidfds_.end(), [](int fd) { return fd >= 0; }));
  }

  // Waits until everything enqueued on this rank's stream has run; throws errc::timeout after
  // `timeout` naming what the stream waits for. After an abort it also waits for the carriers
  // (they may touch this rank's buffers), then throws what aborted this rank.
  void synchronize(int rank, std::chrono::milliseconds timeout) {
    if (rank != rank_) {
      throw error(errc::invalid_argument, "rank " + std::to_string(rank_) +
                                              " cannot synchronize rank " + std::to_string(rank) +
                                              ", a rank of another process");
    }
    const auto deadline = deadline_clock::now() + timeout;
    auto late = [&] { return timed_out(timeout); };
    weft::stream::detail::poll_until([&] { return backend_.idle(stream_); }, deadline, late);
    if (aborted())
      weft::stream::detail::poll_until([&] { return carriers_idle(); }, deadline, late);
    std::lock_guard lock(mutex_);
    waits_.clear();
    refuse_if_aborted();
  }

  // Releases every stream of this rank and tells the peers (they abort too); later calls throw.
  void abort(const std::string& reason) {
    std::lock_guard lock(mutex_);
    abort_locked(reason.empty() ? "aborted by the caller" : reason, errc::transport);
  }
  // The communicator gave up on `culprit`: this rank aborts, and the whole job hears of it
  // through the bootstrap store (ranks on other hosts of a larger job too).
  void report_lost(int culprit, const std::string& reason) {
    abort(reason);
    if (failures_) failures_->report(culprit, reason);
  }

  bool aborted() const {
    std::lock_guard lock(mutex_);
    return aborted_.has_value();
  }

  void note_call(weft::stream::detail::call_note note) {
    std::lock_guard lock(mutex_);
    note_ = note;
  }

  // A send or a receive (weft/stream/processes/messages.hpp).
  operation* post_send(int peer, tag_t tag, const std::byte* data, std::size_t size);
  operation* post_recv(int peer, tag_t tag, std::byte* data, std::size_t size,
                       const weft::detail::reducer* combine, const std::byte* own);

  // Orders this rank's stream after the operation's transfer; never blocks the host.
  bool enqueue_wait(operation* op) {
    std::lock_guard lock(mutex_);
    if (op->failed) throw error(errc::mismatch, mismatch_message(*op));
    refuse_if_aborted();
    if (op->waited) return true;
    while (!waits_.empty() && waits_.front().done.done()) waits_.pop_front();
    if (op->whole != nullptr) {
      wait_whole(op);
      return true;
    }
    backend_.wait_flag(stream_, op->done.word, op->done.value);
    op->waited = true;
    waits_.push_back(
        {op->done, op->is_send ? op->destination : op->source, op->is_send, op->size, op->note});
    return true;
  }

  // The request is dropped: an unmatched receive nobody waited for is withdrawn; any other
  // side not waited for is waited for now, so this rank's later work comes after its transfer.
  void release(operation* op) {
    std::lock_guard lock(mutex_);
    op->released = true;
    if (op->whole != nullptr) {
      if (!op->waited && !aborted_) wait_whole(op);
      static_cast<whole_group*>(op->whole)->released = 1;
      forget_finished_wholes();
      ops_.release(op);
      return;
    }
    if (!op->settled && !op->waited) {
      auto& queue = pending_[static_cast<std::size_t>(op->source)];
      queue.erase(std::find(queue.begin(), queue.end(), op));
      settle(op, false);
      return;
    }
    if (!op->waited && !aborted_) {
      backend_.wait_flag(stream_, op->done.word, op->done.value);
      op->waited = true;
    }
    if (op->settled) ops_.release(op);
  }

  // This rank's part of a whole collective (weft::fused; weft/stream/processes/whole.hpp).
  operation* post_collective(collective kind, std::span<const std::byte> in,
                             std::span<std::byte> out, const weft::detail::reducer* combine,
                             tag_t tag);

 private:
  // An envelope as read from this rank's FIFO.
  struct announced {
    std::uint64_t tag = 0, bytes = 0, where = 0, out_bytes = 0, out_where = 0;
    std::uint32_t posted = 0, flag = 0, value = 0, kind = 0;
    std::uint32_t pieces = 1, ready = 0, ready_value = 0, consumed = 0, consumed_value = 0;
  };
  // A whole collective (weft::fused): every rank's part, as mapped here, and what each rank's
  // share raises when done (weft/stream/processes/whole.hpp).
  struct whole_group : weft::stream::detail::whole_call {
    std::vector<announced> from;                   // by rank
    std::optional<weft::detail::reducer> combine;  // this rank's, once it posted
    flag_ticket complete;                          // this rank's: every share is done
    std::byte* user_out = nullptr;                 // where a staged output goes at the wait
    std::byte* staged_out = nullptr;
    bool mine = false;  // this rank posted its part
  };
  struct staging {
    flag_ticket done;  // the send's done flag: the area is free again once it is written
    std::byte* data;
    std::size_t bytes;
  };
  using carrier = weft::stream::detail::carrier<Backend, memory_type>;

  region_view mine() const { return views_[static_cast<std::size_t>(rank_)]; }
  std::string who() const { return "rank " + std::to_string(rank_); }

  operation* acquire(bool is_send, int source, int destination, tag_t tag, std::size_t size) {
    operation* op = ops_.acquire();
    *op = operation{};
    op->source = source;
    op->destination = destination;
    op->tag = tag;
    op->size = size;
    op->is_send = is_send;
    op->note = note_;
    op->posted = ++posted_;
    backend_.write_flag(stream_, mine().posted(), op->posted);
    return op;
  }

  // Messages (weft/stream/processes/messages.hpp).
  void wait_for_room(std::unique_lock<std::mutex>& lock, int peer, const region_view& to);
  template <class Ready, class What>
  void stall_until(std::unique_lock<std::mutex>& lock, Ready ready, What what);
  std::byte* stage(std::unique_lock<std::mutex>& lock, std::size_t bytes);
  void stage_in_pieces(operation& op, announced& e, std::unique_lock<std::mutex>& lock);
  void reclaim_staging();
  void drain(int sender);
  void transfer(operation& op, const announced& e);

  void settle(operation* op, bool written) {
    if (op->settled) return;
    op->settled = true;
    flags_->give_back(op->done, written);
    if (op->released) ops_.release(op);
  }

  void refuse_if_aborted() const {
    if (!aborted_) return;
    throw error(
        code_ == errc::mismatch ? errc::transport : code_,
        who() + ": this stream-ordered transport was aborted (" + *aborted_ + "); make a new one");
  }

  // The progress thread, what it watches, and what a fault does
  // (weft/stream/processes/watch.hpp).
  void abort_locked(const std::string& reason, errc code);
  error timed_out(std::chrono::milliseconds timeout);
  void progress();
  bool news() const;
  void watch_peers();
  bool waits_on(int peer) const;

  bool carriers_idle() {
    std::lock_guard lock(mutex_);
    return weft::stream::detail::carriers_idle(backend_, carriers_);
  }

  // The destructor's bounded wait for the streams; what is left after 10 s is released by abort.
  void drain_or_abort() noexcept {
    weft::stream::detail::drain_or_abort(
        [&] { return !backend_.idle(stream_) || !carriers_idle(); },
        [&] { abort("rank " + std::to_string(rank_) + " was closed with work in flight"); });
  }

  // Whole collectives (weft/stream/processes/whole.hpp).
  whole_group& group_of(tag_t tag);
  void join(whole_group& g, int rank, const announced& part);
  void arrive_part(int sender, const announced& part);
  void enqueue_whole(whole_group& g);
  void wait_whole(operation* op);
  void forget_finished_wholes();
  void publish(int peer, const announced& part, std::unique_lock<std::mutex>* lock);

  // Meeting the ranks of the host (weft/stream/processes/meeting.hpp).
  void meet(bootstrap::store& meeting);
  void attach(int peer, shm::detail::fetched got);

  void teardown() noexcept {
    weft::stream::detail::destroy_carriers(backend_, carriers_);
    if (stream_ != stream_type{}) backend_.destroy_stream(stream_);
    stream_ = stream_type{};
    for (std::byte* base : registered_) backend_.unregister_host(base);
    registered_.clear();
    for (int& fd : pidfds_) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }

  Backend backend_;
  int rank_;
  int size_;
  int device_;
  process_settings config_;
  layout shape_;
  shm::detail::mapping own_;
  std::vector<shm::detail::mapping> peer_regions_;
  std::vector<region_view> views_;      // every rank's region, this rank's included
  std::vector<std::byte*> registered_;  // host regions registered with the backend
  std::optional<typename Backend::pool_type> pool_;
  std::unique_ptr<shm::detail::pool> allocator_;  // over pool_
  std::vector<std::optional<typename Backend::mapped_type>> peer_pools_;
  std::vector<std::byte*> pool_bases_;  // every rank's pool as mapped here
  std::vector<pid_t> pids_;
  std::vector<int> pidfds_;
  stream_type stream_{};
  std::optional<memory_type> memory_;
  std::optional<region_flags> flag_memory_;
  std::optional<flag_pool<region_flags>> flags_;

  mutable std::mutex mutex_;
  std::uint32_t posted_ = 0;                    // the last value this rank's `posted` word is given
  std::vector<std::uint64_t> sent_;             // per receiver: envelopes published to it
  std::vector<std::uint64_t> read_;             // per sender: envelopes read from it
  std::vector<std::deque<announced>> arrived_;  // per sender: envelopes not yet matched
  std::vector<std::deque<operation*>> pending_;  // per sender: receives not yet matched
  // per sender, then the whole collectives' (carriers_[size]), then the staging carriers
  // (carriers_[size + 1])
  std::vector<weft::stream::detail::carrier_set<Backend, memory_type>> carriers_;
  std::vector<std::uint32_t> highest_post_;  // per sender: the latest post a carrier waits for
  std::deque<weft::stream::detail::wait_record> waits_;
  std::deque<staging> staged_;
  std::vector<std::unique_ptr<whole_group>> wholes_;  // whole collectives not yet forgotten
  weft::stream::detail::call_note note_;
  weft::detail::operation_pool<operation> ops_;
  std::optional<std::string> aborted_;
  errc code_ = errc::transport;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> watching_{false};  // the job's notices abort this rank (after start-up)
  std::unique_ptr<bootstrap::failure_watch> failures_;
  std::thread progress_;
};

}  // namespace weft::stream
