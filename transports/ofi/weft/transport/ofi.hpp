// weft/transport/ofi.hpp — every libfabric fabric through one code path: InfiniBand and RoCE
// (verbs), EFA, Slingshot (cxi), shared memory (shm), TCP (tcp;ofi_rxm), and any future RDM
// provider such as Ultra Ethernet's.
//
//   auto job = weft::ofi::session::from_environment();   // provider from WEFT_OFI_PROVIDER
//   weft::allreduce(job.comm(), std::span<float>(data), weft::sum{});
//
// What it asks of the provider: a reliable datagram endpoint (FI_EP_RDM) with tagged messages
// matched by source (FI_TAGGED | FI_DIRECTED_RECV), in send order (FI_ORDER_SAS). It honours
// what fi_getinfo returns and nothing else: memory registration when the provider wants it
// (FI_MR_LOCAL, FI_MR_ENDPOINT, provider keys), the largest message (longer ones go in pieces),
// operation contexts (FI_CONTEXT2), and manual progress — a waiting rank keeps reading its
// completion queue, which is also what moves its peers' data on most providers.
//
// Ranks meet through the bootstrap store: each publishes its endpoint name, then inserts every
// peer's into an address vector. Posts that meet -FI_EAGAIN wait in a queue, in order, and are
// retried as the completion queue drains, so per-tag order never changes.
//
// Failure. Every fabric error becomes weft::error with the provider, fi_strerror's text, the
// provider's own detail, this rank and the peer; connection errors are peer_lost. A peer process
// on this host is watched (ofi/peer_watch.hpp): when it ends, every wait on it ends with
// peer_lost naming it, at once, and nothing more is posted to it. A peer on another host that
// dies without an error on this side (connectionless fabrics cannot tell dead from slow) ends
// every wait on it with the communicator's timeout.
//
// Files: ofi/config.hpp (settings and their variables), ofi/wire.hpp (what is kept per posted
// operation and registration), ofi/engine.hpp (what a transport owns; wait, test, cancel),
// ofi/meeting.hpp (opening, meeting the peers, closing), ofi/failure.hpp, as every network
// transport names them; the provider moves the bytes, so moving them is ofi/posting.hpp (posts)
// and ofi/completion.hpp (what finished); and libfabric's own: ofi/registration_cache.hpp,
// ofi/peer_watch.hpp and ofi/shm_region.hpp (peers on this host). This header is the transport
// and its session.
#pragma once

#include "weft/bootstrap/session.hpp"
#include "weft/bootstrap/store.hpp"
#include "weft/detail/engine_facade.hpp"
#include "weft/memory.hpp"
#include "weft/transport.hpp"
#include "weft/transport/ofi/completion.hpp"
#include "weft/transport/ofi/config.hpp"
#include "weft/transport/ofi/engine.hpp"
#include "weft/transport/ofi/failure.hpp"
#include "weft/transport/ofi/meeting.hpp"
#include "weft/transport/ofi/posting.hpp"

#include <rdma/fabric.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace weft::ofi {

// The transport: a movable handle on the engine that owns the endpoint; rank, size, send, recv,
// wait, test, progress and abort are forwarded to it (weft/detail/engine_facade.hpp).
class transport : public weft::detail::engine_facade<detail::engine> {
 public:
  static constexpr std::string_view tuning_key = "ofi";
  using config_type = config;

  // Opens an endpoint on the chosen provider and meets the other ranks through `meeting` (not
  // needed for one rank). Rank 0 logs what was chosen (describe()) unless config::log is off.
  transport(int rank, int size, bootstrap::store* meeting,
            const config& settings = config::from_environment())
      : engine_facade(new detail::engine(rank, size, meeting, settings)) {
    if (rank == 0 && settings.log) std::fprintf(stderr, "weft: %s\n", describe().c_str());
  }

  // What was chosen, as logged by rank 0 at start-up: provider, fabric, domain, largest message,
  // inject size, progress model, registration.
  std::string describe() const {
    const fi_info& info = engine().info();
    const bool manual = info.domain_attr->data_progress == FI_PROGRESS_MANUAL;
    return "libfabric " + std::to_string(FI_MAJOR(fi_version())) + "." +
           std::to_string(FI_MINOR(fi_version())) + ", provider " + provider() + " on fabric " +
           fabric() + " (domain " + (info.domain_attr->name ? info.domain_attr->name : "?") +
           "), " + std::to_string(size()) + " ranks, largest message " +
           std::to_string(max_message()) + " B, inject " +
           std::to_string(info.tx_attr->inject_size) + " B, " + (manual ? "manual" : "automatic") +
           " progress, " +
           (registers_memory() ? "registers buffers (FI_MR_LOCAL)" : "no buffer registration");
  }

  host_memory& memory() { return engine().memory(); }

  // The tag of the oldest message from `peer` that arrived before its receive and matches `tag`
  // outside `ignore`, where the provider can look (FI_PEEK): weft::peeking_transport.
  std::optional<tag_t> peek(int peer, tag_t tag, tag_t ignore) {
    return engine().peek(peer, tag, ignore);
  }

  // The provider and fabric fi_getinfo chose, e.g. "shm" on "shm", "tcp;ofi_rxm" on "192.0.2.0/24".
  std::string provider() const { return engine().info().fabric_attr->prov_name; }
  std::string fabric() const {
    const char* name = engine().info().fabric_attr->name;
    return name ? name : "";
  }
  std::size_t max_message() const { return engine().max_message(); }
  bool registers_memory() const { return engine().registers_memory(); }
  // Memory registrations made so far (the cache makes repeated calls on one buffer register once).
  std::uint64_t registrations() const { return engine().registrations_made(); }
};

static_assert(weft::transport<transport>);
static_assert(weft::peeking_transport<transport>);

// A ready job from the launcher's environment over libfabric (weft/bootstrap/session.hpp): rank
// 0's TCP store, or the file store at WEFT_STORE_PATH, to exchange fabric addresses.
using session = basic_session<transport, config>;

}  // namespace weft::ofi
