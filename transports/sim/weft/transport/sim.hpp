// weft/transport/sim.hpp — weft's algorithms on a simulated machine: the same code, any number
// of ranks, in virtual time (Meson: dependency('weft-sim')).
//
//   auto machine = weft::sim::cluster(4, weft::sim::hgx_h200(), weft::sim::ethernet(400));
//   auto measured = weft::sim::run(machine, [](weft::communicator<weft::sim::transport>& comm) {
//     weft::sim::phantom<float> gradients(std::size_t{1} << 26);      // 256 MiB, never touched
//     weft::allreduce(comm, gradients.span(), weft::sum{}, weft::ring{});
//   }, weft::sim::payload::phantom);
//   measured.seconds;   measured.scale_out_bytes;   measured.traffic;
//
// Ranks are threads that take turns in virtual time (weft/transport/sim/world.hpp: the model,
// and why the result does not depend on the threads' scheduling); messages cross the fabric's
// links (weft/transport/sim/fabric.hpp; the field's machines in weft/transport/sim/machines.hpp).
// With payload::real every byte moves and results can be checked against the other transports; with
// payload::phantom, buffers made with weft::sim::phantom and the algorithms' scratch take address
// space only.
#pragma once

#include "weft/communicator.hpp"
#include "weft/communicator/rank_threads.hpp"
#include "weft/options.hpp"
#include "weft/transport/sim/endpoint.hpp"
#include "weft/transport/sim/fabric.hpp"
#include "weft/transport/sim/machines.hpp"
#include "weft/transport/sim/phantom.hpp"
#include "weft/transport/sim/world.hpp"

#include <string>
#include <utility>

namespace weft::sim {

// Runs fn on one thread per rank of `machine` (fn takes the rank's
// weft::communicator<weft::sim::transport>&, or its weft::sim::transport&) and returns what the
// run measured. Rethrows the first exception a rank threw (the others then fail with
// errc::peer_lost naming it); ranks that wait on each other for good fail with errc::transport.
template <class Function>
report run(const fabric& machine, Function&& fn, payload mode = payload::real,
           options settings = options::from_environment()) {
  world shared(machine, mode);
  weft::detail::run_rank_threads(
      shared.size(), "weft::sim::run",
      [&](int rank) {
        shared.begin(rank);
        transport endpoint(&shared, rank);
        weft::detail::call_as_rank(fn, endpoint, settings);
      },
      [&](int rank, const std::string* failure) { shared.end(rank, failure); });
  return shared.results();
}

}  // namespace weft::sim
