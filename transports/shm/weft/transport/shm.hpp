// weft/transport/shm.hpp — the shared-memory transport: the ranks of one host, each a process
// (or a thread), through memory they share. Meson: dependency('weft-shm'); POSIX (Linux) only.
//
//   auto job = weft::shm::session::from_environment();   // weft-run, mpirun, srun, torchrun
//   weft::allreduce(job.comm(), std::span<float>(data), weft::sum{});
//
// Every rank makes one region (memfd: no name in /dev/shm or on disk, gone with the last rank
// that maps it) holding a FIFO of slots from each peer, and hands it to the others over a Unix
// socket (shm/wiring.hpp). A message is copied into the receiver's FIFO in slot-sized pieces
// and out of it by the receiver, which combines reducing receives straight from the slot
// (weft::reducing_transport). A peer whose process ends is peer_lost naming it on every rank
// waiting on it (a pidfd each); a rank the communicator gives up on is reported to the whole
// job through the bootstrap store. Tuning: docs/tuning.md (WEFT_SHM_*).
#pragma once

#include "weft/bootstrap/session.hpp"
#include "weft/detail/request_handle.hpp"
#include "weft/transport.hpp"
#include "weft/transport/shm/config.hpp"
#include "weft/transport/shm/engine.hpp"
#include "weft/transport/shm/meeting.hpp"
#include "weft/transport/shm/progress.hpp"

#include <span>
#include <string>
#include <string_view>

namespace weft::shm {

class transport {
 public:
  static constexpr std::string_view tuning_key = "shm";
  using config_type = config;

  // Cancels its operation when dropped before it completed (weft/detail/request_handle.hpp).
  using request = weft::detail::request_handle<detail::engine, detail::operation>;

  // Makes this rank's region and meets the other ranks of its host through `meeting` (not
  // needed for one rank).
  transport(int rank, int size, bootstrap::store* meeting,
            const config& settings = config::from_environment())
      : engine_(new detail::engine(rank, size, meeting, settings)) {}

  int rank() const { return engine_->rank(); }
  int size() const { return engine_->size(); }
  // Host memory from this rank's pool, which its peers map (shm/pool.hpp): sends of it are lent.
  pool_memory& memory() { return engine_->memory(); }

  request send(int peer, std::span<const std::byte> data, tag_t tag) {
    return {
        engine_->post_request(true, peer, const_cast<std::byte*>(data.data()), data.size(), tag),
        engine_.get()};
  }
  request recv(int peer, std::span<std::byte> data, tag_t tag) {
    return {engine_->post_request(false, peer, data.data(), data.size(), tag), engine_.get()};
  }
  // target = combine(own, incoming), combined piece by piece straight from the FIFO's slots.
  request recv_reduce(int peer, std::span<std::byte> target, std::span<const std::byte> own,
                      tag_t tag, const weft::detail::reducer& combine) {
    return {
        engine_->post_request(false, peer, target.data(), target.size(), tag, own.data(), &combine),
        engine_.get()};
  }
  bool wait(request& operation, deadline_clock::time_point deadline) {
    return engine_->wait(operation.operation(), deadline);
  }
  bool test(request& operation) { return engine_->test(operation.operation()); }
  // Moves this rank's sends and receives as far as they go without blocking; throws peer_lost
  // once the job has heard a rank is lost (what a second transport's waits call: weft::tiered).
  void progress() { engine_->poll(); }
  // Messages that arrived before their receive (weft::early_message_transport).
  std::size_t early_messages(std::span<early_message> found) const {
    return engine_->early_messages(found);
  }

  // Called by the communicator when one of its waits fails: every rank hears of it.
  void abort(int culprit, std::string_view reason) {
    if (engine_) engine_->report_lost(culprit, reason);
  }

  // What rank 0 logs at start-up, and what a user asks: slots, their size, which messages cross
  // in one copy (lent from the pool; read from other memory by process_vm_readv, and from how
  // many peers this rank may), peers watched.
  std::string describe() const {
    const auto& settings = engine_->settings();
    const std::string cma = settings.cma_bytes == 0
                                ? "off (WEFT_SHM_CMA_BYTES=0)"
                                : "from " + std::to_string(settings.cma_bytes) +
                                      " B, readable on " +
                                      std::to_string(engine_->readable_peers()) + " of " +
                                      std::to_string(size() - 1) + " peers";
    return "shared memory, " + std::to_string(size()) + " ranks, " +
           std::to_string(settings.slots) + " slots of " + std::to_string(settings.slot_bytes) +
           " B per pair, single copy: lent from the pool (" +
           std::to_string(settings.pool_bytes >> 20) + " MiB) from " +
           std::to_string(settings.lend_bytes) + " B, process_vm_readv " + cma + ", " +
           std::to_string(engine_->watched()) + " peer processes watched";
  }

 private:
  weft::detail::engine_ptr<detail::engine> engine_;
};

static_assert(weft::transport<transport>);
static_assert(weft::early_message_transport<transport>);
static_assert(weft::reducing_transport<transport>);

// A ready job from the launcher's environment over shared memory (weft/bootstrap/session.hpp):
// rank 0's TCP store, or the file store at WEFT_STORE_PATH, to hand out the regions.
using session = basic_session<transport, config>;

}  // namespace weft::shm
