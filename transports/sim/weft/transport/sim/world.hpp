// weft/transport/sim/world.hpp — ranks in virtual time: what the simulated ranks share (the
// fabric's links, the messages and in-switch operations on them) and the turn-taking that makes
// a run deterministic. Each rank's transport and memory space: weft/transport/sim/endpoint.hpp.
//
// Every rank is a thread running the caller's function over weft::communicator<sim::transport>,
// the same algorithm code as on any transport, but only one rank runs at a time: the one whose
// virtual clock is lowest (ties to the lower rank). A rank runs until it waits for a message
// (its clock jumps to the message's completion, or it sleeps until the message's time is known)
// or computes (a combine or copy advances its clock by the memory traffic over the fabric's
// memory bandwidth); then the lowest clock runs next. So messages start in order of virtual
// time, a link is shared in that order (weft/transport/sim/fabric.hpp), and the same inputs
// give the same times, bytes and results on every run, whatever the threads' scheduling.
//
// A message: a send posted at time t starts when its route's links are free (>= t), holds them
// for bytes / bandwidth, and arrives the route's latency later; the send completes when its last
// byte has left (eager: the sender does not wait for the receive), the receive at the later of
// its own post and the arrival. When every rank waits and none can be woken the ranks deadlock
// (mismatched calls): each then throws errc::transport naming what it waits for. A rank whose
// function throws ends the run: the others' waits throw errc::peer_lost naming it.
//
// An in-switch operation (weft::in_switch, on a fabric whose switch reduces) starts once every
// member has posted and every member's port is free, holds each port for what it carries
// (weft/transport/sim/in_switch.hpp) at the switch's rate, and completes on every member the
// switch's latency after the last port is done. A call's launch overhead (the fabric's) is
// spent on each rank when the call begins.
#pragma once

#include "weft/detail/request_handle.hpp"
#include "weft/error.hpp"
#include "weft/hosts.hpp"
#include "weft/memory.hpp"
#include "weft/transport.hpp"
#include "weft/transport/sim/fabric.hpp"
#include "weft/transport/sim/in_switch.hpp"
#include "weft/transport/sim/phantom.hpp"
#include "weft/tuning/cost_model.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weft::sim {

// Real: bytes move and results can be checked. Phantom: buffers made with weft::sim::phantom
// (and the simulator's scratch) are never touched, only timed.
enum class payload { real, phantom };

class world;

namespace detail {

inline constexpr double never = std::numeric_limits<double>::infinity();

struct operation {
  int owner = 0;
  int source = 0;
  int destination = 0;
  tag_t tag = 0;
  bool is_send = false;
  const std::byte* send_data = nullptr;
  std::byte* recv_data = nullptr;
  std::size_t size = 0;
  double posted_at = 0;
  double arrives_at = 0;          // a send's arrival at its receiver
  double done_at = never;         // when it completes, once known
  bool queued = false;            // in the receiver's unmatched list
  bool released = false;          // its request was dropped (a send that completed stays queued)
  std::vector<std::byte> staged;  // an unmatched send's bytes (real payload)
  std::optional<std::string> failure;  // the two sides' sizes differ
  switch_meeting* meeting = nullptr;   // an in-switch part whose meeting is not complete
};

}  // namespace detail

class memory;
class transport;

// What a run measured.
struct report {
  std::string fabric;
  int ranks = 0;
  double seconds = 0;                // the last rank's clock at its end
  std::vector<double> rank_seconds;  // each rank's clock at its end
  std::vector<double> link_bytes;    // per fabric link: the bytes that crossed it
  // Bytes of the messages that stayed in a scale-up domain, and of those that crossed any
  // scale-out link (each message counted once, whatever the links it crossed).
  double scale_up_bytes = 0;
  double scale_out_bytes = 0;
  // Bytes sent from rank a to rank b at [a * ranks + b]; kept up to 1024 ranks (empty above).
  std::vector<double> traffic;
  std::size_t messages = 0;
};

class world {
 public:
  static constexpr int traffic_matrix_limit = 1024;

  world(fabric machine, payload mode) : fabric_(std::move(machine)), mode_(mode) {
    const auto p = static_cast<std::size_t>(fabric_.ranks());
    ranks_.reserve(p);
    for (std::size_t r = 0; r < p; ++r) ranks_.push_back(std::make_unique<rank_state>());
    link_free_.assign(fabric_.links().size(), 0.0);
    link_bytes_.assign(fabric_.links().size(), 0.0);
    if (fabric_.ranks() <= traffic_matrix_limit) traffic_.assign(p * p, 0.0);
    for (int r = 0; r < fabric_.ranks(); ++r) runnable_.insert({0.0, r});
    hosts_ = host_layout::from_keys(std::span<const int>(fabric_.nodes()));
    // A route within rank 0's node and one out of it (the same on a machine of one tier).
    const auto& node = fabric_.nodes();
    int near = -1, far = -1;
    for (int r = 1; r < fabric_.ranks(); ++r) {
      if (near < 0 && node[static_cast<std::size_t>(r)] == node[0]) near = r;
      if (far < 0 && node[static_cast<std::size_t>(r)] != node[0]) far = r;
    }
    network_ = constants_of_route(far >= 0 ? far : near);
    local_ = near >= 0 ? constants_of_route(near) : network_;
  }
  world(const world&) = delete;
  world& operator=(const world&) = delete;
  ~world() {  // sends that completed and were never received
    for (auto& r : ranks_) {
      for (detail::operation* op : r->unmatched) {
        if (op->released) delete op;
      }
    }
  }

  int size() const { return fabric_.ranks(); }
  const sim::fabric& machine() const { return fabric_; }
  std::pair<tuning::link_constants, tuning::link_constants> cost_constants() const {
    return {local_, network_};
  }
  const host_layout& hosts() const { return hosts_; }
  payload mode() const { return mode_; }

  // The rank's thread calls begin() before its function and end() after (or on failure); in
  // between it runs only in its turns.
  void begin(int rank) {
    std::unique_lock lock(mutex_);
    if (!started_) {  // the first thread here starts the lowest rank, at time 0
      started_ = true;
      pass_turn(-1, lock);
    }
    wait_for_turn(rank, lock);
  }
  void end(int rank, const std::string* failure) {
    std::unique_lock lock(mutex_);
    set_ready(rank, detail::never);
    at(rank).finished = true;
    if (failure != nullptr && !failed_)
      failed_ = "rank " + std::to_string(rank) + " failed: " + *failure;
    if (running_ == rank || (running_ < 0 && started_)) pass_turn(rank, lock);
  }

  double now(int rank) const {
    std::lock_guard lock(mutex_);
    return at(rank).now;
  }

  // Spends `seconds` of the rank's time computing; lower clocks run first.
  void advance(int rank, double seconds) {
    if (!(seconds > 0)) return;
    std::unique_lock lock(mutex_);
    set_ready(rank, at(rank).now + seconds);
    yield(rank, lock);
  }

  report results() const {
    std::lock_guard lock(mutex_);
    report out;
    out.fabric = fabric_.name();
    out.ranks = size();
    for (const auto& r : ranks_) {
      out.rank_seconds.push_back(r->now);
      out.seconds = std::max(out.seconds, r->now);
    }
    out.link_bytes = link_bytes_;
    out.scale_up_bytes = scale_up_bytes_;
    out.scale_out_bytes = scale_out_bytes_;
    out.traffic = traffic_;
    out.messages = messages_;
    return out;
  }

 private:
  friend class transport;
  friend class memory;

  struct rank_state {
    std::condition_variable turn;
    double now = 0;
    double ready = 0;  // when it runs next; never: waits for a message whose time is unknown
    detail::operation* waiting = nullptr;
    bool finished = false;
    std::deque<detail::operation*> unmatched;  // sends to this rank and its receives, unmatched
  };

  rank_state& at(int rank) { return *ranks_[static_cast<std::size_t>(rank)]; }
  const rank_state& at(int rank) const { return *ranks_[static_cast<std::size_t>(rank)]; }

  // --- turns -------------------------------------------------------------------------------

  void wait_for_turn(int rank, std::unique_lock<std::mutex>& lock) {
    rank_state& me = at(rank);
    me.turn.wait(lock, [&] { return running_ == rank || (stopped_ && me.waiting != nullptr); });
    if (running_ == rank) me.now = std::max(me.now, me.ready);  // picked: its ready time is finite
  }

  // A rank that is not running gets a new ready time (never: it waits for a message whose time
  // is unknown); the runnable set holds every rank that can run next, by (ready, rank).
  void set_ready(int rank, double ready) {
    rank_state& s = at(rank);
    if (s.ready != detail::never) runnable_.erase({s.ready, rank});
    s.ready = ready;
    if (ready != detail::never && !s.finished) runnable_.insert({ready, rank});
  }

  // This rank stops running (its ready time is set); the next one runs; this one waits for
  // its turn again. Throws when no rank can run any more.
  void yield(int rank, std::unique_lock<std::mutex>& lock) {
    pass_turn(rank, lock);
    wait_for_turn(rank, lock);
    if (running_ != rank) throw stopped_error(rank);
  }

  void pass_turn(int rank, std::unique_lock<std::mutex>&) {
    if (!runnable_.empty()) {
      const int next = runnable_.begin()->second;
      runnable_.erase(runnable_.begin());
      running_ = next;
      if (next != rank) at(next).turn.notify_one();
      return;
    }
    running_ = -1;
    bool someone_waits = false;
    for (const auto& r : ranks_) someone_waits = someone_waits || !r->finished;
    if (!someone_waits) return;  // everyone finished
    stopped_ = true;             // every unfinished rank waits on a message that cannot come
    for (auto& r : ranks_) r->turn.notify_all();
  }

  error stopped_error(int rank) {
    const rank_state& me = at(rank);
    if (failed_) return error(errc::peer_lost, "rank " + std::to_string(rank) + ": " + *failed_);
    std::string what = "the simulated ranks deadlocked: rank " + std::to_string(rank);
    if (const detail::operation* op = me.waiting) {
      what += op->is_send ? " waits to send " : " waits to receive ";
      what += std::to_string(op->size) + " bytes (tag " + std::to_string(op->tag) + ") " +
              (op->is_send ? "to rank " + std::to_string(op->destination)
                           : "from rank " + std::to_string(op->source));
    }
    return error(errc::transport, what + "; no rank can run: the ranks made different calls");
  }

  // --- messages ----------------------------------------------------------------------------

  detail::operation* post(int rank, bool is_send, int peer, const std::byte* out, std::byte* in,
                          std::size_t size, tag_t tag) {
    std::unique_lock lock(mutex_);
    if (stopped_ || failed_) throw stopped_error(rank);
    rank_state& me = at(rank);
    auto owned = std::make_unique<detail::operation>();  // the request's, once returned
    detail::operation* op = owned.get();
    op->owner = rank;
    op->source = is_send ? rank : peer;
    op->destination = is_send ? peer : rank;
    op->tag = tag;
    op->is_send = is_send;
    op->send_data = out;
    op->recv_data = in;
    op->size = size;
    op->posted_at = me.now;
    if (is_send) start_transfer(*op);
    auto& queue = at(op->destination).unmatched;
    const auto partner = std::find_if(queue.begin(), queue.end(), [&](const detail::operation* o) {
      return o->is_send != is_send && o->source == op->source && o->tag == tag;
    });
    if (partner == queue.end()) {
      if (is_send && size > 0 && !is_phantom(out)) op->staged.assign(out, out + size);
      op->queued = true;
      queue.push_back(op);
      return owned.release();
    }
    detail::operation* other = *partner;
    queue.erase(partner);
    other->queued = false;
    // A send whose request was dropped once it completed is the world's: gone once delivered.
    std::unique_ptr<detail::operation> orphan(other->released ? other : nullptr);
    detail::operation& sent = is_send ? *op : *other;
    detail::operation& received = is_send ? *other : *op;
    if (sent.size != received.size) {
      const std::string why = "rank " + std::to_string(sent.source) + " sends " +
                              std::to_string(sent.size) + " bytes to rank " +
                              std::to_string(sent.destination) + ", whose receive holds " +
                              std::to_string(received.size) + " bytes (tag " + std::to_string(tag) +
                              "): the ranks made different calls, or with different counts";
      sent.failure = received.failure = why;
      complete(received, sent.arrives_at);
      throw error(errc::mismatch, why);
    }
    deliver(sent, received);
    complete(received, std::max(received.posted_at, sent.arrives_at));
    return owned.release();
  }

  // Reserves the route's links from the send's post on; sets its end and arrival.
  void start_transfer(detail::operation& send) {
    fabric_.route(send.source, send.destination, route_);
    double start = send.posted_at;
    for (const int l : route_) start = std::max(start, link_free_[static_cast<std::size_t>(l)]);
    const auto [latency, slowest] = speed_of(route_);
    const double transfer =
        route_.empty() || send.size == 0 ? 0.0 : static_cast<double>(send.size) / slowest;
    bool leaves_scale_up = false;
    for (const int l : route_) {
      link_free_[static_cast<std::size_t>(l)] = start + transfer;
      link_bytes_[static_cast<std::size_t>(l)] += static_cast<double>(send.size);
      leaves_scale_up =
          leaves_scale_up || fabric_.links()[static_cast<std::size_t>(l)].tier == tier::scale_out;
    }
    if (!route_.empty())
      (leaves_scale_up ? scale_out_bytes_ : scale_up_bytes_) += static_cast<double>(send.size);
    if (!traffic_.empty()) {
      traffic_[static_cast<std::size_t>(send.source) * static_cast<std::size_t>(size()) +
               static_cast<std::size_t>(send.destination)] += static_cast<double>(send.size);
    }
    ++messages_;
    send.done_at = start + transfer;
    send.arrives_at = start + transfer + latency;
  }

  void deliver(const detail::operation& sent, detail::operation& received) {
    if (sent.size == 0 || is_phantom(received.recv_data) || is_phantom(sent.send_data)) return;
    const std::byte* from = sent.staged.empty() ? sent.send_data : sent.staged.data();
    std::memcpy(received.recv_data, from, sent.size);
  }

  // The operation's completion time is known: its rank, if it waits for it, can run then.
  void complete(detail::operation& op, double at_time) {
    op.done_at = at_time;
    rank_state& owner = at(op.owner);
    if (owner.waiting == &op) set_ready(op.owner, std::max(owner.now, at_time));
  }

  bool wait(int rank, detail::operation* op) {
    std::unique_lock lock(mutex_);
    rank_state& me = at(rank);
    if (op->failure) throw error(errc::mismatch, *op->failure);
    if (stopped_ || failed_) throw stopped_error(rank);
    me.waiting = op;
    set_ready(rank, op->done_at == detail::never ? detail::never : std::max(me.now, op->done_at));
    try {
      yield(rank, lock);
    } catch (...) {
      me.waiting = nullptr;
      throw;
    }
    me.waiting = nullptr;
    if (op->failure) throw error(errc::mismatch, *op->failure);
    return true;
  }

  bool test(int rank, detail::operation* op) {
    std::lock_guard lock(mutex_);
    if (op->failure) throw error(errc::mismatch, *op->failure);
    return op->done_at != detail::never && op->done_at <= at(rank).now;
  }

  // The request is dropped. A send that completed (its bytes have left) stays queued for its
  // receive; any other unmatched side is withdrawn.
  void release(detail::operation* op) {
    std::lock_guard lock(mutex_);
    if (detail::switch_meeting* meeting = op->meeting) {  // an in-switch part, withdrawn
      for (auto& part : meeting->parts) {
        if (part.op == op) {
          part = {};
          --meeting->arrived;
        }
      }
      delete op;
      return;
    }
    if (op->queued && op->is_send && op->done_at <= at(op->owner).now) {
      op->released = true;
      return;
    }
    if (op->queued) {
      auto& queue = at(op->destination).unmatched;
      queue.erase(std::find(queue.begin(), queue.end(), op));
    }
    delete op;
  }

  // --- in-switch operations ----------------------------------------------------------------

  // The first switch that reduces and that every member hangs off, or null.
  const reducing_switch* switch_of(std::span<const int> members) const {
    for (const auto& hub : fabric_.switches()) {
      bool all = !members.empty();
      for (const int r : members)
        all = all && std::binary_search(hub.ranks.begin(), hub.ranks.end(), r);
      if (all) return &hub;
    }
    return nullptr;
  }

  // An in-switch operation's time (seconds) on `hub` for a call whose largest buffer is `bytes`.
  static double switch_seconds(const reducing_switch& hub, collective kind, int members,
                               double bytes) {
    const auto [up, down] = detail::switch_traffic(kind, members, bytes, bytes / members);
    return std::max(up, down) / hub.bytes_per_s + hub.latency_s;
  }

  // A member's part: once every member has posted under the tag, the switch starts when every
  // member has posted and its ports are free, holds each port for the larger of what it carries
  // up and down, and every part completes when the last port is done and the latency has passed.
  // Returns the part, and when it was the last, the finished meeting (its result not yet
  // written: the caller writes it, outside the lock).
  std::pair<detail::operation*, std::optional<detail::switch_meeting>> post_in_switch(
      int rank, collective kind, std::span<const int> members, std::span<const std::byte> in,
      std::span<std::byte> out, const weft::detail::reducer* combine, tag_t tag) {
    std::unique_lock lock(mutex_);
    const reducing_switch* hub = switch_of(members);  // refused on every rank, whatever the others
    const auto position = std::find(members.begin(), members.end(), rank) - members.begin();
    if (hub == nullptr || position == std::ssize(members)) {
      throw error(errc::invalid_argument,
                  "rank " + std::to_string(rank) + ": weft::in_switch needs ranks that hang off " +
                      "one switch that reduces, and the " + std::to_string(members.size()) +
                      " ranks of this call on " + fabric_.name() +
                      " do not (weft/transport/sim/machines.hpp: switch_efficiency); nothing "
                      "was sent");
    }
    if (stopped_ || failed_) throw stopped_error(rank);
    const int k = static_cast<int>(members.size());
    auto key = std::make_pair(tag, std::vector<int>(members.begin(), members.end()));
    detail::switch_meeting& meeting = meetings_[key];
    if (meeting.parts.empty()) {
      meeting.kind = kind;
      meeting.parts.resize(members.size());
    }
    auto owned = std::make_unique<detail::operation>();
    detail::operation* op = owned.get();
    op->owner = op->source = op->destination = rank;
    op->tag = tag;
    op->is_send = true;
    op->size = out.size();
    op->posted_at = at(rank).now;
    op->meeting = &meeting;
    meeting.parts[static_cast<std::size_t>(position)] = {op, in, out, combine};
    if (++meeting.arrived < k) return {owned.release(), std::nullopt};

    auto finish = [&](double at_time) {
      for (auto& part : meeting.parts) {
        part.op->meeting = nullptr;
        complete(*part.op, at_time);
      }
    };
    if (auto why = detail::switch_mismatch(meeting, members)) {
      for (auto& part : meeting.parts) part.op->failure = *why;
      finish(at(rank).now);
      meetings_.erase(key);
      throw error(errc::mismatch, *why);
    }
    const double bytes = detail::largest_buffer(kind, meeting.parts.front());
    double start = 0;
    for (std::size_t i = 0; i < meeting.parts.size(); ++i) {
      const auto [out_link, in_link] = port_of(*hub, members[i]);
      start = std::max(
          {start, meeting.parts[i].op->posted_at, link_free_[out_link], link_free_[in_link]});
    }
    double longest = 0;
    for (std::size_t i = 0; i < meeting.parts.size(); ++i) {
      const auto [out_link, in_link] = port_of(*hub, members[i]);
      const auto [up, down] =
          detail::switch_traffic(kind, k, bytes, static_cast<double>(meeting.parts[i].in.size()));
      const double hold = std::max(up, down) / hub->bytes_per_s;
      link_free_[out_link] = link_free_[in_link] = start + hold;
      link_bytes_[out_link] += up;
      link_bytes_[in_link] += down;
      (fabric_.links()[out_link].tier == tier::scale_out ? scale_out_bytes_ : scale_up_bytes_) +=
          up;
      longest = std::max(longest, hold);
      ++messages_;
    }
    finish(start + longest + hub->latency_s);
    std::optional<detail::switch_meeting> done(std::move(meeting));
    meetings_.erase(key);
    return {owned.release(), std::move(done)};
  }

  static std::pair<std::size_t, std::size_t> port_of(const reducing_switch& hub, int rank) {
    const auto i = std::lower_bound(hub.ranks.begin(), hub.ranks.end(), rank) - hub.ranks.begin();
    const auto& [out_link, in_link] = hub.ports[static_cast<std::size_t>(i)];
    return {static_cast<std::size_t>(out_link), static_cast<std::size_t>(in_link)};
  }

  // --- compute -----------------------------------------------------------------------------

  // Time for `bytes` of memory traffic on a rank.
  double memory_seconds(double bytes) const {
    const double rate = fabric_.memory_bytes_per_s();
    return rate > 0 ? bytes / rate : 0.0;
  }
  // A route's summed latency (seconds) and its slowest link's bandwidth (bytes per second).
  std::pair<double, double> speed_of(const std::vector<int>& route) const {
    double latency = 0, slowest = detail::never;
    for (const int l : route) {
      latency += fabric_.links()[static_cast<std::size_t>(l)].latency_s;
      slowest = std::min(slowest, fabric_.links()[static_cast<std::size_t>(l)].bytes_per_s);
    }
    return {latency, slowest};
  }
  // The cost model's row for a message from rank 0 to `to`: its route's latency and slowest
  // link; a combine's three bytes of memory traffic for each byte reduced.
  tuning::link_constants constants_of_route(int to) const {
    tuning::link_constants row{"sim", 0, 0, 0, 0, 0, "the simulated fabric's links"};
    if (to < 0) return row;
    std::vector<int> route;
    fabric_.route(0, to, route);
    const auto [latency, slowest] = speed_of(route);
    row.alpha_us = latency * 1e6;
    row.beta_us_per_byte = route.empty() ? 0 : 1e6 / slowest;
    row.gamma_us_per_byte = memory_seconds(3.0) * 1e6;
    return row;
  }
  static bool skip_bytes(const void* a, const void* b = nullptr, const void* c = nullptr) {
    return is_phantom(a) || is_phantom(b) || is_phantom(c);
  }

  sim::fabric fabric_;
  host_layout hosts_;
  tuning::link_constants local_{"sim", 0, 0, 0, 0, 0, "the simulated fabric"};
  tuning::link_constants network_ = local_;
  payload mode_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<rank_state>> ranks_;
  std::set<std::pair<double, int>> runnable_;
  int running_ = -1;
  bool started_ = false;
  bool stopped_ = false;
  std::optional<std::string> failed_;
  std::vector<double> link_free_;
  std::vector<double> link_bytes_;
  double scale_up_bytes_ = 0;
  double scale_out_bytes_ = 0;
  std::vector<double> traffic_;
  std::size_t messages_ = 0;
  std::vector<int> route_;  // scratch
  std::map<std::pair<tag_t, std::vector<int>>, detail::switch_meeting> meetings_;
};

}  // namespace weft::sim
