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
#include "weft/detail/engine_facade.hpp"
#include "weft/transport.hpp"
#include "weft/transport/shm/config.hpp"
#include "weft/transport/shm/engine.hpp"
#include "weft/transport/shm/failure.hpp"
#include "weft/transport/shm/meeting.hpp"
#include "weft/transport/shm/receiving.hpp"
#include "weft/transport/shm/sending.hpp"

#include <span>
#include <string>
#include <string_view>

// Set by Meson's dependency('weft-bootstrap-pmix'), which dependency('weft-shm') brings where
// found.
#if defined(WEFT_HAVE_PMIX)
#include "weft/bootstrap/pmix_meeting.hpp"
#endif

namespace weft::shm {

// The transport: a movable handle on the engine that owns the region; rank, size, send, recv,
// wait, test, progress, early_messages and abort are forwarded to it
// (weft/detail/engine_facade.hpp).
class transport : public weft::detail::engine_facade<detail::engine> {
 public:
  static constexpr std::string_view tuning_key = "shm";
  using config_type = config;

  // Makes this rank's region and meets the other ranks of its host through `meeting` (not
  // needed for one rank).
  transport(int rank, int size, bootstrap::store* meeting,
            const config& settings = config::from_environment())
      : engine_facade(new detail::engine(rank, size, meeting, settings)) {}

  // Host memory from this rank's pool, which its peers map (shm/pool.hpp): sends of it are lent.
  pool_memory& memory() { return engine().memory(); }

  // target = combine(own, incoming), combined piece by piece straight from the FIFO's slots.
  request recv_reduce(int peer, std::span<std::byte> target, std::span<const std::byte> own,
                      tag_t tag, const weft::detail::reducer& combine) {
    return {
        engine().post_request(false, peer, target.data(), target.size(), tag, own.data(), &combine),
        &engine()};
  }
  // What rank 0 logs at start-up, and what a user asks: slots, their size, which messages cross
  // in one copy (lent from the pool; read from other memory by process_vm_readv, and from how
  // many peers this rank may), peers watched.
  std::string describe() const {
    const auto& settings = engine().settings();
    const std::string cma = settings.cma_bytes == 0
                                ? "off (WEFT_SHM_CMA_BYTES=0)"
                                : "from " + std::to_string(settings.cma_bytes) +
                                      " B, readable on " +
                                      std::to_string(engine().readable_peers()) + " of " +
                                      std::to_string(size() - 1) + " peers";
    return "shared memory, " + std::to_string(size()) + " ranks, " +
           std::to_string(settings.slots) + " slots of " + std::to_string(settings.slot_bytes) +
           " B per pair, single copy: lent from the pool (" +
           std::to_string(settings.pool_bytes >> 20) + " MiB) from " +
           std::to_string(settings.lend_bytes) + " B, process_vm_readv " + cma + ", " +
           std::to_string(engine().watched()) + " peer processes watched";
  }
};

static_assert(weft::transport<transport>);
static_assert(weft::early_message_transport<transport>);
static_assert(weft::reducing_transport<transport>);

// A ready job from the launcher's environment over shared memory (weft/bootstrap/session.hpp):
// rank 0's TCP store, or the file store at WEFT_STORE_PATH, to hand out the regions.
using session = basic_session<transport, config>;

}  // namespace weft::shm
