// weft/transport/shm/failure.hpp — what ends an operation that cannot finish: a peer process that
// ended, a peer that closed (blaming the rank lost first), the job's failure notice.
#pragma once

#include "weft/error.hpp"
#include "weft/transport/shm/engine.hpp"
#include "weft/transport/shm/region.hpp"

#include <poll.h>

#include <cstring>
#include <string>
#include <vector>

namespace weft::shm::detail {

inline bool engine::finished(operation* op) {
  // The job heard that `lost` was lost (weft/bootstrap/failure_watch.hpp). When the others gave
  // up on this rank, what completed fails too: they count the call as failed.
  const int lost = failures_ ? failures_->lost() : -1;
  if (lost == rank_ && (op->state == status::posted || op->state == status::done)) {
    op->state = status::posted;
    fail(op, errc::peer_lost,
         direction(op) + ": the other ranks count this rank as lost (" + failures_->why() + ")");
  }
  if (op->state == status::posted) {
    auto& state = peers_[static_cast<std::size_t>(op->peer)];
    if (state.ended || state.closed) {
      progress();  // what it published before it went is still read
      // A process that closed in order before it ended gave up; it did not die.
      if (!state.closed && state.region != nullptr &&
          control_of(state.region)->closed.load(std::memory_order_acquire) != 0) {
        state.closed = true;
      }
      if (op->state == status::posted && state.ended && !state.closed) {
        fail(op, errc::peer_lost,
             direction(op) + ": its process (pid " + std::to_string(state.link.pid) +
                 ") ended: it exited, crashed or was killed",
             op->peer);
      } else if (op->state == status::posted) {
        // A peer that closed in the middle of a call most likely gave up after a loss: name the
        // rank lost first (the one it says it lost, one whose process ended, the job's notice).
        const int root = root_of_close(op->peer, lost);
        std::string text = root == op->peer ? ": rank " + name(op->peer) + " closed its transport"
                                            : ": " + lost_text(root) + " (rank " + name(op->peer) +
                                                  " closed its transport after that)";
        // Why it gave up, as it said in its region, where the job's notice has not said it here
        // yet (a mismatch is then one here too).
        if (lost != root || root == op->peer) {
          const std::string said = close_reason_of(op->peer);
          if (!said.empty()) text += ": it said: " + said;
        }
        fail(op, errc::peer_lost, direction(op) + text, root);
      }
    }
  }
  if (lost >= 0 && op->state == status::posted) {
    fail(op, errc::peer_lost,
         direction(op) + ": rank " + name(lost) + " is lost (" + failures_->why() + ")", lost);
  }
  // This rank told the job of a failure (its communicator gave up, its own call threw, it revoked):
  // its operations fail from then on, even those whose bytes moved, as the others' do when they
  // hear it.
  if (!told_reason_.empty() && (op->state == status::posted || op->state == status::done)) {
    op->state = status::posted;
    fail(op, errc::peer_lost, direction(op) + ": " + told_reason_, told_culprit_);
  }
  if (op->state == status::done) return true;
  if (op->state == status::failed) {
    throw error(op->code, op->failure, op->culprit >= 0 ? job_rank(op->culprit) : -1);
  }
  return false;
}

inline void engine::fail(operation* op, errc code, std::string why, int culprit) {
  if (op->state != status::posted) return;
  withdraw(op);
  op->state = status::failed;
  op->code = code;
  op->failure = std::move(why);
  op->culprit = culprit;
  if (code == errc::peer_lost && culprit >= 0 && culprit != rank_ && first_lost_ < 0)
    first_lost_ = culprit;
  if (op->orphan) release(op);
}

inline std::string engine::lost_text(int root) const {
  const auto& state = peers_[static_cast<std::size_t>(root)];
  if (state.ended && !state.closed) {
    return "rank " + name(root) + "'s process (pid " + std::to_string(state.link.pid) +
           ") ended: it exited, crashed or was killed";
  }
  const int lost = failures_ ? failures_->lost() : -1;
  return "rank " + name(root) + " is lost" +
         (lost == root ? " (" + failures_->why() + ")" : std::string());
}

// Asks the pidfds whether peer processes ended, and (`closes`) the peers' regions whether they
// closed.
inline void engine::watch_peers(bool closes) {
  std::vector<pollfd> asked;
  std::vector<int> whose;
  for (int peer = 0; peer < size_; ++peer) {
    auto& state = peers_[static_cast<std::size_t>(peer)];
    if (peer == rank_ || state.region == nullptr) continue;
    if (closes && !state.closed &&
        control_of(state.region)->closed.load(std::memory_order_acquire) != 0)
      state.closed = true;
    if (!state.ended && state.link.pidfd >= 0) {
      asked.push_back({state.link.pidfd, POLLIN, 0});
      whose.push_back(peer);
    }
  }
  if (asked.empty() || ::poll(asked.data(), asked.size(), 0) <= 0) return;
  for (std::size_t i = 0; i < asked.size(); ++i)
    if (asked[i].revents != 0) peers_[static_cast<std::size_t>(whose[i])].ended = true;
}

inline std::string engine::close_reason_of(int closer) const {
  const std::byte* region = peers_[static_cast<std::size_t>(closer)].region;
  if (region == nullptr) return {};
  const control_block* block = control_of(const_cast<std::byte*>(region));
  if (block->closed.load(std::memory_order_acquire) == 0) return {};
  return std::string(block->close_reason,
                     strnlen(block->close_reason, sizeof(block->close_reason)));
}

inline int engine::root_of_close(int closer, int lost) {
  std::byte* region = peers_[static_cast<std::size_t>(closer)].region;
  const auto said = region == nullptr
                        ? 0
                        : control_of(region)->closed_after_loss_of.load(std::memory_order_acquire);
  if (said > 0 && static_cast<int>(said) - 1 < size_ && static_cast<int>(said) - 1 != rank_) {
    return static_cast<int>(said) - 1;
  }
  watch_peers();
  for (int peer = 0; peer < size_; ++peer) {
    const auto& state = peers_[static_cast<std::size_t>(peer)];
    if (peer != rank_ && state.ended && !state.closed) return peer;
  }
  if (lost >= 0 && lost != rank_) return lost;
  return closer;
}

}  // namespace weft::shm::detail
