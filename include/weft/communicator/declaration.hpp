// weft/communicator/declaration.hpp — weft::communicator declared: its state and its short
// members. The longer members are defined beside it by concern (calls, consistency, groups,
// posts, waits); weft/communicator.hpp includes them all: include that one.
//
// The communicator owns what every collective needs besides the algorithm itself:
//   - the rank map (group rank -> transport rank), so split groups reuse one transport;
//   - the tag space: a 32-bit context id (distinct for every communicator derived by split or
//     dup) and a per-call sequence number, so back-to-back and concurrent communicators never
//     match each other's messages;
//   - scratch memory in the transport's memory space, allocated on first need and reused;
//   - options (timeout, chunk size, check mode) and error context: every wait has a deadline,
//     and a timeout names this rank, the peer, the collective, the algorithm and the step;
//   - the host layout (weft/hosts.hpp) and the groups derived from it: the ranks of this host,
//     the rails across hosts, and the cached groups hierarchical algorithms run their phases on.
#pragma once

#include "weft/call.hpp"
#include "weft/communicator/in_flight.hpp"
#include "weft/communicator/owner.hpp"
#include "weft/communicator/recorder_dump.hpp"
#include "weft/communicator/tags.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/error.hpp"
#include "weft/hosts.hpp"
#include "weft/options.hpp"
#include "weft/recorder.hpp"
#include "weft/transport.hpp"
#include "weft/tuning/cost_model.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weft {

template <transport T>
class communicator {
 public:
  using transport_type = T;
  using memory_type = memory_space_of<T>;
  using request_type = typename T::request;

  // One posted send or receive. Destroying it before it completes cancels it.
  class pending {
   public:
    pending() = default;
    bool active() const { return request_.has_value(); }

   private:
    friend class communicator;
    std::optional<request_type> request_;
    int peer_ = -1;
    bool is_send_ = false;
    std::size_t bytes_ = 0;
    // A reducing receive on a transport without one: combine on completion.
    const detail::reducer* combine_ = nullptr;
    detail::bytes target_;
    detail::const_bytes own_;
    detail::const_bytes staged_;
  };

  // The world communicator of a transport. Two communicators over one transport that are used
  // at the same time need distinct context ids (or derive one from the other with dup/split).
  explicit communicator(T& transport, options settings = options::from_environment(),
                        std::uint32_t context = 1)
      : transport_(&transport), settings_(settings), context_(context) {
    ranks_.resize(static_cast<std::size_t>(transport.size()));
    for (int i = 0; i < transport.size(); ++i) ranks_[static_cast<std::size_t>(i)] = i;
    rank_ = transport.rank();
    if constexpr (requires(const T& t) {
                    { t.hosts() } -> std::same_as<const host_layout*>;
                  }) {
      if (const host_layout* known = transport.hosts()) {
        hosts_ = std::make_shared<const host_layout>(*known);
      }
    }
  }

  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;
  communicator(communicator&& other) noexcept { swap(other); }
  communicator& operator=(communicator&& other) noexcept {
    if (this != &other) {
      release_scratch();
      swap(other);
    }
    return *this;
  }
  ~communicator() {
    in_flight_
        .reset();  // cancels the calls still in flight: they use this communicator's transport
    release_scratch();
  }

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(ranks_.size()); }
  int transport_rank(int rank) const { return ranks_[static_cast<std::size_t>(rank)]; }
  // Every rank's transport rank, in this communicator's rank order.
  std::span<const int> transport_ranks() const { return ranks_; }
  std::uint32_t context() const { return context_; }
  const options& settings() const { return settings_; }
  void set_settings(const options& settings) { settings_ = settings; }
  T& underlying_transport() { return *transport_; }
  memory_type& memory() { return transport_->memory(); }

  // ---- what algorithms use -----------------------------------------------------------------

  // Posts a send of `data` to group rank `peer`. `channel` (0..253) separates message streams
  // of one call that the two sides could post in different orders.
  pending send(int peer, detail::const_bytes data, int channel = 0) {
    return post_send(peer, data, call_tag(channel));
  }

  pending recv(int peer, detail::bytes data, int channel = 0) {
    return post_recv(peer, data, call_tag(channel));
  }

  // Posts a receive from `peer` that leaves target = own op incoming (elementwise; target may be
  // `own`). A transport that models reducing_transport combines as the message arrives, straight
  // from the sender's buffer; otherwise the message lands in `staging` (target.size() bytes,
  // scratch of the caller's) and is combined when the receive is waited for.
  pending recv_reduce(int peer, detail::bytes target, detail::const_bytes own,
                      const detail::reducer& combine, detail::bytes staging, int channel = 0);

  // Posts this rank's part of the whole current call to a transport that runs collectives
  // itself (collective_transport; weft::fused): allreduce, reduce_scatter or allgather of
  // `in` into `out`, `combine` null for allgather. Waiting for it orders this rank after the
  // whole collective. Needs the transport's whole world in rank order: throws
  // errc::invalid_argument, before anything is posted, on a group of it.
  pending post_collective(detail::const_bytes in, detail::bytes out,
                          const detail::reducer* combine) requires collective_transport<T>;

  // Posts this rank's part of the current call to the switch the group's ranks hang off
  // (in_switch_transport; weft::in_switch): allreduce, reduce_scatter or allgatherv of `in`
  // into `out` among this communicator's ranks, `combine` null for allgatherv.
  pending post_in_switch(detail::const_bytes in, detail::bytes out,
                         const detail::reducer* combine) requires in_switch_transport<T>;

  // Blocks until `operation` completes; throws errc::timeout after settings().timeout.
  void wait(pending& operation);

  // True once `operation` has completed (it is then done with, as after wait); never blocks.
  bool test(pending& operation);

  template <class... Pending>
  void wait_all(Pending&... operations) {
    (wait(operations), ...);
  }

  // Marks the start of the next communication step (reported, and named in errors).
  void next_step() { ++step_; }
  int step() const { return step_; }

  void copy(detail::bytes dst, detail::const_bytes src) {
    if (!src.empty() && dst.data() != src.data()) memory().copy(dst, src);
  }

  // Scratch in the transport's memory space, at least `size` bytes; valid until the next call
  // of scratch(). Grows when a call needs more and is reused otherwise.
  detail::bytes scratch(std::size_t size) {
    if (size > scratch_size_) {
      release_scratch();
      scratch_ = memory().allocate(size);
      scratch_size_ = size;
    }
    return {scratch_, size};
  }

  // Host-side index arrays (displacements) for the current call: slots 0..3 for algorithms,
  // 4..5 for the facade.
  std::span<std::size_t> indices(int slot, std::size_t count) {
    auto& storage = indices_[static_cast<std::size_t>(slot)];
    if (storage.size() < count) storage.resize(count);
    return {storage.data(), count};
  }

  // `parts` blocks of `block_bytes` each, one after another; displacements kept in index `slot`.
  detail::layout equal_blocks(int slot, int parts, std::size_t block_bytes) {
    auto displs = indices(slot, static_cast<std::size_t>(parts) + 1);
    for (std::size_t i = 0; i < displs.size(); ++i) displs[i] = i * block_bytes;
    return detail::layout{displs};
  }

  // `count` empty pending operations for algorithms that post many at once; reused across calls.
  // Valid until the next call of requests().
  std::span<pending> requests(std::size_t count) {
    if (request_pool_.size() < count) request_pool_.resize(count);
    // Rebuilt in place rather than assigned a fresh pending{}: the defaults stay in pending's
    // own definition, and GCC 12 warned (-Wmaybe-uninitialized, under ASan) about the
    // move-assignment of the empty optional.
    for (std::size_t i = 0; i < count; ++i) {
      std::destroy_at(&request_pool_[i]);
      std::construct_at(&request_pool_[i]);
    }
    return {request_pool_.data(), count};
  }

  // Cancels every operation still pending in the pool of requests(): a call that throws does
  // so before its buffers go away, so nothing is received into them afterwards.
  void cancel_requests() {
    for (auto& operation : request_pool_) operation.request_.reset();
  }

  template <class Range>
  void wait_each(Range&& operations) {
    for (auto& operation : operations) wait(operation);
  }

  // Bytes per piece of a pipelined reduction, rounded down to whole elements (at least one):
  // options::reduce_chunk_bytes, else the transport's measured size, else options::chunk_bytes.
  std::size_t reduce_chunk_bytes(std::size_t element_size) const {
    std::size_t bytes = settings_.reduce_chunk_bytes;
    if (bytes == 0) bytes = tuning::rows_of(*transport_).second.reduce_chunk_bytes;
    if (bytes == 0) bytes = settings_.chunk_bytes;
    const std::size_t elements = std::max<std::size_t>(1, bytes / element_size);
    return elements * element_size;
  }

  // Staging for two pieces of a pipelined reduction whose targets hold at most `largest` bytes
  // (a piece is never larger than its target, whatever the piece size asked for).
  std::size_t reduce_staging_bytes(std::size_t element_size, std::size_t largest) const {
    return 2 * std::min(reduce_chunk_bytes(element_size), largest);
  }

  // Blocks of at least this many bytes wait for their receiver's word (options::handshake_bytes,
  // else the transport's measured size); 0: none do.
  std::size_t handshake_bytes() const {
    return settings_.handshake_bytes.value_or(tuning::rows_of(*transport_).second.handshake_bytes);
  }

  // The piece size the cost model charges a pipelined `kind` with.
  std::size_t pipeline_bytes(collective kind) const {
    const bool reduces = kind == collective::allreduce || kind == collective::reduce ||
                         kind == collective::reduce_scatter;
    return reduces ? reduce_chunk_bytes(1) : settings_.chunk_bytes;
  }

  // ---- what the facade uses ----------------------------------------------------------------

  // The call in progress on this communicator; ends when destroyed (however the call ends, as
  // its flight record says). Defined in weft/communicator/calls.hpp.
  class call_scope {
   public:
    explicit call_scope(communicator& owner) noexcept
        : owner_(&owner), exceptions_(std::uncaught_exceptions()) {}
    call_scope(call_scope&& other) noexcept
        : owner_(std::exchange(other.owner_, nullptr)), exceptions_(other.exceptions_) {}
    call_scope(const call_scope&) = delete;
    call_scope& operator=(const call_scope&) = delete;
    call_scope& operator=(call_scope&&) = delete;
    ~call_scope();

   private:
    communicator* owner_;
    int exceptions_;
  };

  // Starts a collective call: refuses a second thread while one is inside a call (a
  // communicator serves one thread at a time: its sequence numbers, scratch and requests are
  // the call's), refuses if an earlier call failed, takes a new sequence number and opens the
  // call's flight record (with `asked`, the call's arguments, where the facade has them).
  [[nodiscard]] call_scope begin(collective kind, std::string_view algorithm,
                                 const call_signature* asked = nullptr);

  // The call's failure, recorded and written (weft/recorder.hpp).
  void record_failure(const error& failure) { recorder_.failed(failure, step_, bytes_sent_); }
  // This communicator's flight recorder (nullptr when WEFT_RECORDER=0, or before its first call).
  const flight_recorder* recorder() const { return recorder_.get(); }

  // The end of a call that succeeded here: fails with errc::mismatch if a message that arrived
  // early shows that another rank's call differs (weft/communicator/consistency.hpp).
  void end_call() {
    if (settings_.detect_mismatch) look_for_other_calls(true);
  }

  // The call ended here by an exception that is not weft's (a user reduction threw, memory ran
  // out): every rank hears it as this rank's own exception, with `what` (the others' calls fail
  // with peer_lost quoting it, not at their timeouts), and this communicator refuses later calls.
  void end_by_own_exception(std::string_view what);
  // Calls this rank will not make that the others make (`what`: which, and why): every rank's
  // calls fail with errc::mismatch saying so, and this communicator refuses later calls
  // (weft/communicator/consistency.hpp). A weft::group left by an exception says this.
  void skip_calls(const std::string& what);

  report finish() const { return report{to_string(collective_), algorithm_, step_, bytes_sent_}; }

  // Point-to-point messages with a user tag (0 <= tag < 2^31) share no tags with collectives.
  // A call in flight sends them in its communicator's tag space, so they match blocking ones.
  tag_t user_tag(int tag) const {
    return detail::tags::of_user(user_context_.value_or(context_), tag);
  }
  pending send_user(int peer, detail::const_bytes data, int tag) {
    return post_send(peer, data, user_tag(tag));
  }
  pending recv_user(int peer, detail::bytes data, int tag) {
    return post_recv(peer, data, user_tag(tag));
  }

  // Sends mine[j] to rank j and receives from rank i into all[i] (host memory, `each` bytes),
  // inside the call in progress: how ranks compare their calls (check mode,
  // weft/dispatch/check_mode.hpp), split, and learn the host layout.
  void exchange_statements(detail::const_bytes mine, detail::bytes all, std::size_t each) {
    refuse_on_streams("an exchange on the host (check mode, split, the host layout)");
    exchange(mine, all, each);
  }

  // ---- what nonblocking calls use (weft/nonblocking.hpp) ------------------------------------

  // Makes this communicator the one a call in flight of `parent` runs on: the parent's transport,
  // ranks, options and host layout; a tag space of its own (`context`); its own scratch and
  // requests (kept from call to call); and waits that give way to the other calls (`lane`).
  void become_lane(const communicator& parent, std::uint32_t context, detail::lane_yield* lane);

  // The tag space of the next call issued in flight: every rank issues them in the same order.
  std::uint32_t next_lane_context() { return mix_context(0x6c616e65u ^ (++issued_ << 8)); }

  detail::calls_in_flight* calls_in_flight() const { return in_flight_.get(); }
  void keep_calls_in_flight(std::unique_ptr<detail::calls_in_flight> calls) {
    in_flight_ = std::move(calls);
  }

  // ---- derived communicators -----------------------------------------------------------------

  // Collective over this communicator: ranks with the same color form a new communicator,
  // ordered by key (ties by rank here). color must be >= 0.
  communicator split(int color, int key);

  // A communicator with the same ranks and its own tag space. Every rank must call dup in the
  // same order; no message is exchanged.
  communicator dup() {
    complete_calls_in_flight();
    refuse_if_broken("dup");
    communicator child(*transport_, settings_, derive_context(0xffffffffu));
    child.ranks_ = ranks_;
    child.rank_ = rank_;
    child.hosts_ = hosts_;
    return child;
  }

  // ---- recovery (weft/recovery.hpp) ---------------------------------------------------------

  // Ends, on every rank, every call in progress or to come on this communicator and on every
  // other one over its transport (split, dup, the calls in flight): they fail with errc::revoked,
  // whether or not their rank noticed a failure. What is left of the job goes on by weft::shrink.
  // Called by the thread that uses the communicator (after a call failed, or to give up on one).
  void revoke();

  // The session whose world this communicator is (it can shrink it); null for any other.
  detail::world_owner<communicator>* owner() const { return owner_; }
  void set_owner(detail::world_owner<communicator>* owner) { owner_ = owner; }

  // ---- hosts ---------------------------------------------------------------------------------

  // Which of this communicator's ranks share a host. Known from the transport where it knows
  // (weft/hosts.hpp); otherwise learned the first time it is asked, by one exchange of host names
  // among the ranks, so every rank must ask at the same point (as inside a collective call).
  const host_layout& hosts();

  // The layout if this communicator knows it already (no exchange), else null.
  const host_layout* known_hosts() const { return hosts_.get(); }

  // The ranks of this rank's host, in rank order. Every rank calls it (in the same order as
  // split and dup); no message is exchanged once the layout is known.
  communicator split_by_host();

  // The rail of this rank: the ranks of every host whose place on their host is this rank's
  // (local_index), in rank order. Every rank calls it, as split_by_host.
  communicator split_by_rail();

  // The group of `members` (ranks of this communicator, ascending, this rank among them), kept
  // for the next call that asks for the same members: how an algorithm runs a phase on part of
  // the ranks (weft::hierarchical). Only the members call it; its tag space comes from the
  // members, so no message is exchanged. Check mode is off in it (the call was checked here).
  communicator& group(std::span<const int> members);

  // Adds what a phase run on a group (group()) did to this call's report.
  void count_phase(const report& phase) {
    step_ += phase.steps;
    bytes_sent_ += phase.bytes_sent;
  }

  // A phase run on a group failed: this communicator fails with it (later calls refuse), and
  // the message says in which collective and algorithm here the phase ran.
  [[noreturn]] void fail_phase(const error& failure) {
    fail(failure.code(), detail::strip_prefix(failure.what()) + ", in " + where());
  }

 private:
  // A communicator of `members` (ranks here, in the order they take there) over this transport.
  communicator derived_group(std::span<const int> members, std::uint32_t context);

  std::uint32_t mix_context(std::uint32_t salt) const {
    return detail::tags::derived_context(context_, salt);
  }

  // One exchange of host names (their 64-bit digests) among the ranks, inside a call.
  void learn_hosts();

  pending post_send(int peer, detail::const_bytes data, tag_t tag);
  // This rank's part of a whole collective the transport runs: post(tag) posts it.
  template <class Post>
  pending post_part(detail::const_bytes in, detail::bytes out, Post&& post);
  pending post_recv(int peer, detail::bytes data, tag_t tag);

  // A transport that reports what its streams wait for (a stream-ordered one) is told which call
  // and step each message belongs to.
  void note_call() {
    if constexpr (requires(T & t) { t.note_call(collective::barrier, std::string_view{}, 0); }) {
      transport_->note_call(collective_, algorithm_, step_);
    }
  }

  // Split and check mode read what the ranks exchanged on the host as soon as it is waited for;
  // a stream-ordered transport has it only once the stream has run.
  void refuse_on_streams(std::string_view what) const {
    if constexpr (requires { T::stream_ordered; }) {
      throw error(
          errc::invalid_argument,
          describe_rank() + ": " + std::string(what) +
              " needs a transport that completes on the host; this communicator's collectives "
              "only enqueue work on streams (make a communicator for each group instead); "
              "nothing was sent");
    }
  }

  // A message's tag in this call (weft/communicator/tags.hpp: the layout, and why the call is in
  // it).
  static constexpr int statement_channel = detail::tags::statement_channel;
  static constexpr int waiting_channel = detail::tags::waiting_channel;
  tag_t call_tag(int channel) const {
    return detail::tags::of_call(context_, collective_, digest_, sequence_, channel);
  }

  // Messages that arrived early and belong to no call this rank makes now or later: a call of
  // the same number that differs (another collective or digest), or an earlier call's that no
  // receive here took. Fails the communicator with errc::mismatch naming the sender when it
  // finds one (weft/communicator/consistency.hpp).
  void look_for_other_calls(bool at_call_end = false);
  // What arrived early, as (peer, tag), into `found`; how many.
  std::size_t messages_arrived_early(std::span<early_message> found, bool at_call_end);
  // Tells `peer` (once in a wait) that this rank waits for it in this call.
  void say_waiting_for(int peer);
  // Takes in a "waiting" message that shows nothing (one of this call, or of a call ended).
  void take_waiting(int transport_peer, tag_t tag);
  [[noreturn]] void fail_other_call(int peer, collective theirs, std::uint32_t their_number,
                                    bool earlier);

  std::uint32_t derive_context(std::uint32_t salt) {
    ++derived_;
    return mix_context((derived_ << 16) ^ salt);
  }

  // Sends mine[j] to rank j and receives from rank i into all[i] (host memory, `each` bytes).
  void exchange(detail::const_bytes mine, detail::bytes all, std::size_t each);

  // A wait failed for want of `peer`: a transport that can tell every rank (abort) does, so the
  // others stop at once instead of at their own timeouts.
  void tell_others(int peer, const std::string& reason);
  // The same for `culprit`, numbered as the transport numbers its ranks.
  void tell_others_of(int culprit, const std::string& reason);

  // A wait inside a call in flight: polls, giving way to the other calls in between, and blocks
  // on its own request only for as long as the lanes allow.
  bool wait_in_lane(request_type& request, deadline_clock::time_point deadline);

  // Before a blocking call, split or dup: the calls in flight complete, and a failure of theirs
  // fails this communicator.
  void complete_calls_in_flight();

  // Runs the transport's wait or test on `operation`; a transport error fails the communicator
  // (and tells the other ranks) with this call's context added.
  template <class Ask>
  bool ask_transport(pending& operation, Ask&& ask);

  // A completed operation: drop its request, and combine a staged reducing receive.
  void complete(pending& operation);

  // After a timeout or a lost peer, every later call and dup throw what the failure threw.
  void refuse_if_broken(std::string_view what) const {
    if (broken_) {
      throw error(broken_code_, describe_rank() + " refuses " + std::string(what) +
                                    ": this communicator failed earlier (" + broken_message_ +
                                    (broken_code_ == errc::revoked
                                         ? "); weft::shrink makes one of the ranks still running"
                                         : "); build a new communicator"));
    }
  }

  [[noreturn]] void fail(errc code, const std::string& message, int culprit = -1) {
    broken_ = true;
    broken_code_ = code;
    broken_message_ = message;
    const error failure(code, message, culprit);
    record_failure(failure);
    throw failure;
  }

  // Rank `r` of this communicator as the job numbers it (its transport's rank: the world's), with
  // its number here in parentheses when that differs: "rank 3 (rank 1 of this communicator)".
  // Every message names every rank this way, so numbers from two worlds never mix.
  std::string describe_rank(int r) const {
    std::string text = "rank " + std::to_string(transport_rank(r));
    if (transport_rank(r) != r) text += " (rank " + std::to_string(r) + " of this communicator)";
    return text;
  }
  std::string describe_rank() const { return describe_rank(rank_); }

  std::string where() const {
    return std::string(to_string(collective_)) + ", algorithm " + std::string(algorithm_) +
           ", step " + std::to_string(step_);
  }

  void release_scratch() {
    if (scratch_ != nullptr) memory().deallocate(scratch_, scratch_size_);
    scratch_ = nullptr;
    scratch_size_ = 0;
  }

  void swap(communicator& other) noexcept {
    using std::swap;
    swap(transport_, other.transport_);
    swap(settings_, other.settings_);
    swap(context_, other.context_);
    swap(ranks_, other.ranks_);
    swap(rank_, other.rank_);
    swap(sequence_, other.sequence_);
    swap(derived_, other.derived_);
    swap(scratch_, other.scratch_);
    swap(scratch_size_, other.scratch_size_);
    swap(indices_, other.indices_);
    swap(request_pool_, other.request_pool_);
    swap(collective_, other.collective_);
    swap(algorithm_, other.algorithm_);
    swap(step_, other.step_);
    swap(bytes_sent_, other.bytes_sent_);
    swap(broken_, other.broken_);
    swap(broken_code_, other.broken_code_);
    swap(broken_message_, other.broken_message_);
    swap(hosts_, other.hosts_);
    swap(groups_, other.groups_);
    swap(lane_, other.lane_);
    swap(user_context_, other.user_context_);
    swap(issued_, other.issued_);
    swap(in_flight_, other.in_flight_);
    swap(recorder_, other.recorder_);
    swap(asked_, other.asked_);
    swap(digest_, other.digest_);
    swap(waiting_said_, other.waiting_said_);
    swap(peek_next_, other.peek_next_);
    swap(owner_, other.owner_);
  }

  T* transport_ = nullptr;
  const call_signature* asked_ = nullptr;  // the call in progress, as the facade described it
  std::vector<std::optional<request_type>> waiting_said_;  // say_waiting_for's sends, until done
  int peek_next_ = 0;        // the peer messages_arrived_early looked at last (peeking transports)
  std::uint8_t digest_ = 0;  // the call's digest, in its tags (call_tag)
  options settings_;
  std::uint32_t context_ = 0;
  std::vector<int> ranks_;
  int rank_ = 0;
  std::uint32_t sequence_ = 0;
  std::uint32_t derived_ = 0;
  std::byte* scratch_ = nullptr;
  std::size_t scratch_size_ = 0;
  std::array<std::vector<std::size_t>, 6> indices_;
  std::vector<pending> request_pool_;
  collective collective_ = collective::barrier;
  std::string_view algorithm_;
  int step_ = 0;
  std::uint64_t bytes_sent_ = 0;
  bool broken_ = false;
  std::atomic<bool> in_call_{false};  // a thread is inside a call (begin's call_scope)
  errc broken_code_ = errc::transport;
  std::string broken_message_;
  std::shared_ptr<const host_layout> hosts_;  // null until known
  std::vector<std::pair<std::vector<int>, std::unique_ptr<communicator>>> groups_;  // group()
  detail::lane_yield* lane_ = nullptr;         // set when this communicator runs a call in flight
  std::uint32_t issued_ = 0;                   // calls issued in flight so far
  std::optional<std::uint32_t> user_context_;  // a lane's: its parent's, for user tags
  std::unique_ptr<detail::calls_in_flight> in_flight_;  // null until the first is issued
  detail::recorder_handle recorder_;  // made at the first call; a lane shares its parent's
  detail::world_owner<communicator>* owner_ = nullptr;  // the session, on its world communicator
};

}  // namespace weft
