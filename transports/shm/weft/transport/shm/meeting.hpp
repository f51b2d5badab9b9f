// weft/transport/shm/meeting.hpp — making the engine: its region, meeting the ranks of its host
// through the bootstrap store (shm/wiring.hpp), and closing.
#pragma once

#include "weft/bootstrap/failure_watch.hpp"
#include "weft/bootstrap/store.hpp"
#include "weft/error.hpp"
#include "weft/transport/shm/engine.hpp"
#include "weft/transport/shm/region.hpp"
#include "weft/transport/shm/wiring.hpp"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace weft::shm::detail {

// How long a wait polls before it sleeps when the ranks outnumber the cores.
inline constexpr std::chrono::microseconds crowded_spin{50};

inline engine::engine(int rank, int size, bootstrap::store* meeting, const config& settings)
    : rank_(rank), size_(size), settings_(settings) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw error(errc::invalid_argument,
                "shm transport: rank " + std::to_string(rank) + " of " + std::to_string(size));
  }
  if (size > 1 && meeting == nullptr) {
    throw error(errc::invalid_argument,
                "shm transport: " + std::to_string(size) + " ranks need a bootstrap store");
  }
  if (settings_.slots < 2 || settings_.slot_bytes < cache_line) {
    throw error(errc::invalid_argument,
                "shm transport: at least 2 slots of at least 64 bytes (config::slots, "
                "config::slot_bytes)");
  }
  settings_.slot_bytes -= settings_.slot_bytes % cache_line;  // pieces stay element-aligned
  // More ranks than the cores this process may use: a waiting rank spins only briefly before it
  // sleeps, or it would hold the core the rank it waits for needs.
  cpu_set_t usable;
  CPU_ZERO(&usable);
  const int cores = ::sched_getaffinity(0, sizeof usable, &usable) == 0 ? CPU_COUNT(&usable) : 1;
  spin_ = size > cores ? std::min(settings_.spin, crowded_spin) : settings_.spin;
  shape_ = {static_cast<std::size_t>(size), settings_.slots, settings_.slot_bytes,
            settings_.pool_bytes / page_bytes * page_bytes};
  own_ = create_region(shape_.total());
  buffers_ = std::make_unique<pool>(own_.base() + shape_.pool_offset(), shape_.pool_bytes);
  memory_ = pool_memory(buffers_.get());
  control_of(own_.base())->self_address = reinterpret_cast<std::uintptr_t>(own_.base());
  peers_.resize(static_cast<std::size_t>(size));
  peers_[static_cast<std::size_t>(rank)].region = own_.base();
  if (size == 1) return;
  // Let the ranks of this host read this process's memory where Yama's ptrace scope would let
  // only an ancestor; whether they can is what their probe (probe_memory_reads) finds.
  if (settings_.cma_bytes != 0) ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  try {
    meet(*meeting);
  } catch (...) {  // no destructor runs for an engine never made
    close();
    throw;
  }
}

inline void engine::meet(bootstrap::store& meeting) {
  // Watched from the start: a rank killed while the others wait for it is a notice that ends
  // their wait (weft/bootstrap/failure_watch.hpp).
  failures_ = std::make_unique<bootstrap::failure_watch>(
      meeting, settings_.prefix, rank_, serving_rank(), bootstrap::failure_watch::handler{},
      job_rank(rank_));
  try {
    const auto deadline = deadline_clock::now() + settings_.connect_timeout;
    const std::string key = settings_.prefix + "/shm/";
    bootstrap::claim_rank(meeting, settings_.prefix + "/shm-rank/" + std::to_string(rank_), rank_);
    region_server server(settings_.secret, region_handover(own_.descriptor(), shape_.total()),
                         size_ - 1);
    const std::string identity = host_identity();
    const std::string here = host_name();
    meeting.set(key + std::to_string(rank_),
                identity + "|" + here + "|" + server.name() + "|" + std::to_string(shape_.slots) +
                    "|" + std::to_string(shape_.slot_bytes) + "|" +
                    std::to_string(shape_.pool_bytes) + "|" + std::to_string(size_));
    std::string missing;
    bool store_gone = false;
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      std::optional<std::string> value;
      try {
        if (!store_gone)
          value = meeting.get(key + std::to_string(peer),
                              missing.empty() ? deadline : deadline_clock::now());
      } catch (const error& failure) {
        // Rank 0 gave up waiting at the same time as this rank (its start-up began a moment
        // earlier) and took its store along: this rank timed out too, on the ranks still missing.
        if (failure.code() != errc::peer_lost ||
            deadline_clock::now() + std::chrono::seconds(2) < deadline)
          throw;
        store_gone = true;
      }
      if (!value) {
        missing += (missing.empty() ? "" : ", ") + name(peer);
        continue;
      }
      std::vector<std::string> field;
      std::size_t start = 0;
      for (std::size_t bar; (bar = value->find('|', start)) != std::string::npos; start = bar + 1)
        field.push_back(value->substr(start, bar - start));
      field.push_back(value->substr(start));
      if (field.size() != 7)
        throw error(errc::transport,
                    "shm transport: rank " + name(peer) + " published '" + *value + "'");
      if (field[6] != std::to_string(size_)) {  // the job cannot start: every rank hears why
        const std::string why = weft::detail::sizes_differ(who(), std::to_string(size_),
                                                           "rank " + name(peer), field[6]);
        failures_->report(peer, why);
        throw error(errc::mismatch, who() + " could not start: " + why);
      }
      if (field[0] != identity) {
        throw error(errc::invalid_argument,
                    "shm transport: " + who() + " runs on host " + here + " and rank " +
                        name(peer) + " on host " + field[1] +
                        " (or in another network namespace): the shm transport joins "
                        "the ranks of one host; between hosts use the tcp or ofi transport");
      }
      if (field[3] != std::to_string(shape_.slots) ||
          field[4] != std::to_string(shape_.slot_bytes) ||
          field[5] != std::to_string(shape_.pool_bytes)) {
        throw error(errc::invalid_argument,
                    "shm transport: rank " + name(peer) + " has " + field[3] + " slots of " +
                        field[4] + " bytes and a pool of " + field[5] + " bytes, " + who() + " " +
                        std::to_string(shape_.slots) + " of " + std::to_string(shape_.slot_bytes) +
                        " and " + std::to_string(shape_.pool_bytes) +
                        ": WEFT_SHM_SLOTS, WEFT_SHM_SLOT_BYTES and WEFT_SHM_POOL_BYTES must be the "
                        "same on every rank");
      }
      auto link = fetch_region(field[2], settings_.secret, peer, deadline);
      if (link.region.bytes() != shape_.total()) {
        throw error(errc::transport, "shm transport: rank " + name(peer) + "'s region has " +
                                         std::to_string(link.region.bytes()) + " bytes, not " +
                                         std::to_string(shape_.total()));
      }
      auto& state = peers_[static_cast<std::size_t>(peer)];
      state.region = link.region.base();
      state.link = std::move(link);
    }
    if (!missing.empty()) {
      throw error(errc::timeout,
                  who() + " timed out after " + std::to_string(settings_.connect_timeout.count()) +
                      " ms at start-up: no address from rank(s) " + missing + " (not started?)");
    }
    if (!server.finish(deadline)) {
      throw error(errc::timeout,
                  who() + " timed out at start-up: not every rank fetched its region");
    }
    own_.forget_descriptor();
    if (settings_.cma_bytes != 0) probe_memory_reads();
  } catch (const error& failure) {
    failures_->await_notice(failure);
    failures_->rethrow_if_lost(who());
    throw;
  }
  failures_->started();
}

// For each peer: may this rank read its memory by process_vm_readv? (A peer in this process:
// directly. Another: read the word where the peer says it maps its region, and compare; ptrace
// restrictions, a seccomp filter or another user make it fail.) A peer lends this rank messages
// from outside its pool only once the answer is yes.
inline void engine::probe_memory_reads() {
  for (int peer = 0; peer < size_; ++peer) {
    auto& state = peers_[static_cast<std::size_t>(peer)];
    if (peer == rank_ || state.region == nullptr) continue;
    const std::uint64_t address = control_of(state.region)->self_address;
    bool readable = state.link.pid == ::getpid();
    if (!readable && state.link.pid > 0) {
      std::uint64_t seen = 0;
      iovec local{&seen, sizeof seen};
      iovec remote{reinterpret_cast<void*>(static_cast<std::uintptr_t>(
                       address + offsetof(control_block, self_address))),
                   sizeof seen};
      readable = ::process_vm_readv(state.link.pid, &local, 1, &remote, 1, 0) ==
                     static_cast<ssize_t>(sizeof seen) &&
                 seen == address;
    }
    readable_peers_ += readable;
    if (readable)
      lent_to(state.region, shape_, rank_)->reads_memory.store(1, std::memory_order_release);
  }
}

inline int engine::watched() const {
  int count = 0;
  for (const auto& peer : peers_) count += peer.link.pidfd >= 0;
  return count;
}

inline void engine::close() {
  if (closed_) return;
  closed_ = true;
  if (owner_.forked()) {
    // A forked child's copy: the regions and the watch's thread are the parent's. Say nothing.
    static_cast<void>(failures_.release());
    return;
  }
  // What this rank had found lost, for the peers that see it close (a rank whose process
  // ended, or the job's notice, when no operation of its own failed for it).
  int lost = first_lost_;
  std::string reason = told_reason_;
  for (int peer = 0; peer < size_ && lost < 0; ++peer) {
    const auto& state = peers_[static_cast<std::size_t>(peer)];
    if (peer != rank_ && state.ended && !state.closed) lost = peer;
  }
  if (lost < 0 && failures_ && failures_->lost() >= 0 && failures_->lost() != rank_)
    lost = failures_->lost();
  if (reason.empty() && failures_ && failures_->lost() >= 0) reason = failures_->why();
  failures_.reset();  // an orderly end: its lifeline is withdrawn
  if (own_.base() != nullptr) {
    control_block* mine = control_of(own_.base());
    const std::size_t kept = std::min(reason.size(), sizeof(mine->close_reason) - 1);
    std::memcpy(mine->close_reason, reason.data(), kept);
    mine->close_reason[kept] = '\0';
    mine->closed_after_loss_of.store(static_cast<std::uint32_t>(lost + 1),
                                     std::memory_order_release);
    control_of(own_.base())->closed.store(1, std::memory_order_seq_cst);
    for (int peer = 0; peer < size_; ++peer) {  // a peer asleep waiting on this rank looks again
      auto& state = peers_[static_cast<std::size_t>(peer)];
      if (peer != rank_ && state.region != nullptr) ring(control_of(state.region));
    }
  }
  for (auto& state : peers_) {
    if (state.link.pidfd >= 0) ::close(state.link.pidfd);
    state.link.pidfd = -1;
    state.link.region.reset();
    state.region = nullptr;
  }
  // Its own region stays mapped until the engine goes: buffers from its pool are the caller's.
}

}  // namespace weft::shm::detail
