// The simulator: results as on any transport (real payload), times as the cost model says on a
// machine without contention, contention worked out by hand, determinism, and the faults
// (deadlock, a failing rank, a size mismatch) as errors, never a hang.
#include "../collective_cases.hpp"
#include "../slice_in_flight.hpp"

#include <weft/transport/sim.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using comm_type = weft::communicator<weft::sim::transport>;
using weft::collective;

constexpr double alpha_us = 5.0;     // the uniform machine's latency
constexpr double gbit_per_s = 80.0;  // 10 GB/s: beta = 1e-4 us per byte
constexpr double beta_us = 8.0 / (gbit_per_s * 1e3);

weft::options one_piece() {
  weft::options settings;
  settings.chunk_bytes = std::size_t{1} << 40;  // every step one message: the cost model's steps
  settings.reduce_chunk_bytes = std::size_t{1} << 40;
  return settings;
}

// The collective `kind` with Algorithm on phantom buffers: `count` floats a message (a block,
// for the gathering collectives).
template <class Algorithm>
void call(comm_type& comm, collective kind, std::size_t count) {
  const auto P = static_cast<std::size_t>(comm.size());
  if constexpr (weft::detail::implements_v<
                    Algorithm, weft::detail::reduction_call<collective::allreduce, true>,
                    comm_type>) {
    if (kind == collective::allreduce) {
      weft::sim::phantom<float> data(count);
      weft::allreduce(comm, data.span(), weft::sum{}, Algorithm{});
    }
  }
  if constexpr (weft::detail::implements_v<Algorithm, weft::detail::broadcast_call, comm_type>) {
    if (kind == collective::broadcast) {
      weft::sim::phantom<float> data(count);
      weft::broadcast(comm, data.span(), 0, Algorithm{});
    }
  }
  if constexpr (weft::detail::implements_v<Algorithm, weft::detail::allgather_call, comm_type>) {
    if (kind == collective::allgather) {
      weft::sim::phantom<float> mine(count), all(count * P);
      weft::allgather(comm, std::span<const float>(mine.span()), all.span(), Algorithm{});
    }
  }
  if constexpr (weft::detail::implements_v<
                    Algorithm, weft::detail::reduction_call<collective::reduce_scatter, true>,
                    comm_type>) {
    if (kind == collective::reduce_scatter) {
      weft::sim::phantom<float> all(count * P), mine(count);
      weft::reduce_scatter(comm, std::span<const float>(all.span()), mine.span(), weft::sum{},
                           Algorithm{});
    }
  }
}

// The simulated time of one collective on every rank of a uniform machine (phantom payload),
// and what the algorithm's cost formula says it takes there (no compute cost), microseconds.
template <class Algorithm>
std::pair<double, double> simulated_and_modelled(collective kind, int p, std::size_t bytes) {
  const auto machine =
      weft::sim::fabric::uniform(p, {.gbit_per_s = gbit_per_s, .latency_us = alpha_us});
  const auto measured = weft::sim::run(
      machine, [&](comm_type& comm) { call<Algorithm>(comm, kind, bytes / sizeof(float)); },
      weft::sim::payload::phantom, one_piece());
  const auto c = Algorithm::cost(kind, p, static_cast<double>(bytes),
                                 static_cast<double>(std::size_t{1} << 40));
  return {measured.seconds * 1e6, alpha_us * c.steps + beta_us * c.bytes};
}

// Under WEFT_TEST_QUICK (the sanitizers, where every rank is an instrumented thread) the model
// is checked up to this many ranks.
constexpr int quick_ranks = 64;

template <class Algorithm>
void check_against_model(collective kind, std::initializer_list<int> ranks,
                         std::initializer_list<std::size_t> sizes) {
  for (const int p : ranks) {
    if (weft_test::quick() && p > quick_ranks) continue;
    for (const std::size_t bytes : sizes) {
      const auto [simulated, modelled] = simulated_and_modelled<Algorithm>(kind, p, bytes);
      INFO(std::string(weft::to_string(kind))
           << " " << Algorithm::name << " p=" << p << " bytes=" << bytes << ": simulated "
           << simulated << " us, modelled " << modelled << " us");
      CHECK(std::abs(simulated - modelled) <= 0.01 * modelled);
    }
  }
}

}  // namespace

TEST_CASE("real payload: the collective slice as 3 calls in flight at once", "[sim][nonblocking]") {
  for (const int p : {2, 3, 4}) {
    weft_test::failures sink;
    const auto machine = weft::sim::fabric::uniform(p, {.gbit_per_s = 400, .latency_us = 5});
    const std::size_t counts[] = {0, 1, 7, 1000};
    weft::sim::run(machine, [&](comm_type& comm) {
      weft_test::collective_slice_in_flight(comm, sink, counts);
    });
    INFO("p=" << p << ": " << sink.summary());
    CHECK(sink.empty());
  }
}

TEST_CASE("real payload: the collective slice gives the serial reference's results", "[sim]") {
  for (const int p : {1, 2, 3, 4, 5, 8}) {
    weft_test::failures sink;
    const auto machine = weft::sim::fabric::nodes(p % 2 == 0 ? 2 : 1, p % 2 == 0 ? p / 2 : p,
                                                  {.gbit_per_s = 7200, .latency_us = 0.5},
                                                  {.gbit_per_s = 400, .latency_us = 5}, 1);
    const std::size_t counts[] = {0, 1, 7, 1000};
    weft::sim::run(machine,
                   [&](comm_type& comm) { weft_test::collective_slice(comm, sink, counts); });
    INFO("p=" << p << ": " << sink.summary());
    CHECK(sink.empty());
  }
}

TEST_CASE("without contention, the simulated time is the algorithm's alpha-beta cost", "[sim]") {
  // Bytes per rank's block for the gathering collectives, per message for the others.
  check_against_model<weft::ring>(collective::allreduce, {2, 3, 4, 7, 8, 16, 33, 64, 200},
                                  {64, 65536, 1 << 20});
  check_against_model<weft::ring>(collective::allgather, {2, 3, 5, 8, 64}, {64, 65536});
  check_against_model<weft::ring>(collective::reduce_scatter, {2, 3, 5, 8, 64}, {64, 65536});
  check_against_model<weft::recursive_doubling>(collective::allreduce,
                                                {2, 4, 8, 64, 256, 1000, 1024}, {64, 65536});
  check_against_model<weft::recursive_doubling>(collective::allgather, {2, 4, 8, 64}, {64, 65536});
  check_against_model<weft::recursive_halving>(collective::allreduce, {2, 4, 8, 64, 256, 1024},
                                               {64, 65536, 1 << 20});
  // Off powers of two Rabenseifner's formula is an upper bound: the fold's messages overlap the
  // exchanges around them by up to four alphas (1000 ranks: 2-4 fewer than its 22).
  for (const std::size_t bytes : {std::size_t{64}, std::size_t{1} << 20}) {
    if (weft_test::quick()) break;
    const auto [simulated, modelled] =
        simulated_and_modelled<weft::recursive_halving>(collective::allreduce, 1000, bytes);
    INFO("recursive_halving p=1000 bytes=" << bytes << ": simulated " << simulated
                                           << " us, modelled " << modelled << " us");
    CHECK(simulated <= modelled * 1.0001);
    CHECK(simulated >= modelled - 4 * alpha_us - 1e-6);
  }
  check_against_model<weft::binomial_tree>(collective::broadcast, {2, 4, 8, 64, 256}, {64, 65536});
  // Off powers of two the cost model charges every step its own alpha; on the simulated port
  // (and on a real one) the root's sends of the last rounds overlap, so the tree finishes
  // sooner: the model is an upper bound there, by at most one alpha per missing level.
  for (const int p : {3, 5, 7, 100}) {
    for (const std::size_t bytes : {std::size_t{64}, std::size_t{65536}}) {
      const auto [simulated, modelled] =
          simulated_and_modelled<weft::binomial_tree>(collective::broadcast, p, bytes);
      INFO("broadcast binomial_tree p=" << p << " bytes=" << bytes << ": simulated " << simulated
                                        << " us, modelled " << modelled << " us");
      CHECK(simulated <= modelled * 1.000001);
      CHECK(simulated >= modelled - alpha_us * weft::tuning::log2_ceil(p) - 1e-6);
    }
  }
}

TEST_CASE("contention: four ranks through one NIC take four times as long", "[sim]") {
  // Two nodes of 4 ranks, one NIC each at 100 Gbit/s (12.5 GB/s) and 2 us; rank i of node 0
  // sends 1 MiB to rank i of node 1, all at time 0. The node's NIC carries them one after the
  // other: the last arrives 4 MiB / 12.5 GB/s + 2 us after the start.
  const auto machine = weft::sim::fabric::nodes(2, 4, {.gbit_per_s = 7200, .latency_us = 0.5},
                                                {.gbit_per_s = 100, .latency_us = 2}, 1);
  constexpr std::size_t bytes = std::size_t{1} << 20;
  const auto measured = weft::sim::run(machine, [&](weft::sim::transport& t) {
    std::vector<std::byte> buffer(bytes);
    auto request = t.rank() < 4 ? t.send(t.rank() + 4, buffer, 9) : t.recv(t.rank() - 4, buffer, 9);
    t.wait(request, weft::deadline_clock::time_point::max());
  });
  const double expected = 4.0 * bytes / 12.5e9 + 2e-6;
  INFO("simulated " << measured.seconds << " s, expected " << expected << " s");
  CHECK(std::abs(measured.seconds - expected) <= 1e-12);
  CHECK(measured.scale_out_bytes ==
        4.0 * bytes);  // four messages between the nodes, each counted once
  CHECK(measured.scale_up_bytes == 0);
  CHECK(measured.traffic[0 * 8 + 4] == static_cast<double>(bytes));
  CHECK(measured.messages == 4);
  // With a NIC per rank (rail-optimized) they run side by side.
  const auto rails = weft::sim::fabric::nodes(2, 4, {.gbit_per_s = 7200, .latency_us = 0.5},
                                              {.gbit_per_s = 100, .latency_us = 2}, 4);
  const auto side_by_side = weft::sim::run(rails, [&](weft::sim::transport& t) {
    std::vector<std::byte> buffer(bytes);
    auto request = t.rank() < 4 ? t.send(t.rank() + 4, buffer, 9) : t.recv(t.rank() - 4, buffer, 9);
    t.wait(request, weft::deadline_clock::time_point::max());
  });
  CHECK(std::abs(side_by_side.seconds - (1.0 * bytes / 12.5e9 + 2e-6)) <= 1e-12);
}

TEST_CASE("two runs give the same times, bytes and traffic", "[sim]") {
  auto once = [] {
    const auto machine = weft::sim::fabric::nodes(4, 8, {.gbit_per_s = 7200, .latency_us = 0.5},
                                                  {.gbit_per_s = 400, .latency_us = 5}, 2)
                             .with_memory_bandwidth(4000);
    return weft::sim::run(
        machine,
        [](comm_type& comm) {
          weft::sim::phantom<float> data(std::size_t{1} << 22);
          weft::allreduce(comm, data.span(), weft::sum{}, weft::ring{});
          weft::allreduce(comm, data.span(), weft::sum{}, weft::recursive_halving{});
          weft::alltoall(comm, std::span<const float>(data.span().first(1 << 20)),
                         data.span().subspan(1 << 20, 1 << 20), weft::pairwise{});
        },
        weft::sim::payload::phantom);
  };
  const auto first = once();
  const auto second = once();
  CHECK(first.seconds > 0);
  CHECK(first.seconds == second.seconds);
  CHECK(first.rank_seconds == second.rank_seconds);
  CHECK(first.link_bytes == second.link_bytes);
  CHECK(first.traffic == second.traffic);
  CHECK(first.messages == second.messages);
}

TEST_CASE("ranks that wait on each other for good fail, naming what they wait for", "[sim]") {
  const auto machine = weft::sim::fabric::uniform(3, {});
  std::string said;
  try {
    weft::sim::run(machine, [](weft::sim::transport& t) {
      std::vector<std::byte> buffer(16);
      if (t.rank() == 2) return;  // rank 2 makes no call; ranks 0 and 1 receive from each other
      auto request = t.recv(1 - t.rank(), buffer, 3);
      t.wait(request, weft::deadline_clock::time_point::max());
    });
  } catch (const weft::error& failure) {
    said = failure.what();
    CHECK(failure.code() == weft::errc::transport);
  }
  INFO(said);
  CHECK(said.find("deadlocked") != std::string::npos);
  CHECK(said.find("waits to receive 16 bytes") != std::string::npos);
}

TEST_CASE("a rank that throws fails the others with its name; a size mismatch is an error",
          "[sim]") {
  const auto machine = weft::sim::fabric::uniform(4, {});
  std::vector<std::string> said(4);
  try {
    weft::sim::run(machine, [&](comm_type& comm) {
      try {
        std::vector<int> data(100, 1);
        if (comm.rank() == 2) throw std::runtime_error("rank 2 gives up");
        weft::allreduce(comm, std::span<int>(data), weft::sum{}, weft::ring{});
      } catch (const std::exception& failure) {
        said[static_cast<std::size_t>(comm.rank())] = failure.what();
        throw;
      }
    });
  } catch (const std::exception&) {
  }
  for (const int r : {0, 1, 3}) {
    INFO("rank " << r << ": " << said[static_cast<std::size_t>(r)]);
    CHECK(said[static_cast<std::size_t>(r)].find("rank 2") != std::string::npos);
  }
  std::string mismatch;
  try {
    weft::sim::run(weft::sim::fabric::uniform(2, {}), [](weft::sim::transport& t) {
      std::vector<std::byte> buffer(t.rank() == 0 ? 8 : 16);
      auto request = t.rank() == 0 ? t.send(1, buffer, 1) : t.recv(0, buffer, 1);
      t.wait(request, weft::deadline_clock::time_point::max());
    });
  } catch (const weft::error& failure) {
    mismatch = failure.what();
    CHECK(failure.code() == weft::errc::mismatch);
  }
  CHECK(mismatch.find("sends 8 bytes to rank 1, whose receive holds 16") != std::string::npos);
}

TEST_CASE("hierarchical collectives on simulated nodes: right results, and the gain at 8 x N GPUs",
          "[sim][hierarchical]") {
  using ring_ring = weft::hierarchical<weft::ring, weft::ring>;
  const weft::sim::link_speed nvlink{.gbit_per_s = 7200, .latency_us = 0.5},
      nic{.gbit_per_s = 400, .latency_us = 5};
  // Real payload: every hierarchical collective against the serial reference on 2 nodes of 3.
  {
    weft_test::failures sink;
    weft::sim::run(weft::sim::fabric::nodes(2, 3, nvlink, nic, 3), [&](comm_type& comm) {
      CHECK(comm.hosts().hosts() == 2);
      for (const std::size_t count :
           {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}}) {
        weft_test::allreduce_case<float, weft::sum, ring_ring>(comm, sink, count, false,
                                                               weft::sum{}, false);
        weft_test::allreduce_case<std::int32_t, weft::sum, ring_ring>(comm, sink, count, true,
                                                                      weft::sum{}, false);
        weft_test::reduce_scatter_case<float, ring_ring>(comm, sink, count);
        weft_test::allgather_case<float, ring_ring>(comm, sink, count, false);
        weft_test::broadcast_case<float, ring_ring>(comm, sink, count, 4);
      }
    });
    INFO(sink.summary());
    CHECK(sink.empty());
  }
  // Phantom 256 MiB on N nodes of 8 GPUs with a NIC per GPU: the flat ring pushes nearly twice
  // the data through the one NIC at each node boundary of its cycle; the hierarchical allreduce
  // reduces over NVLink first and sends each GPU's eighth across on all 8 NICs at once.
  for (const int nodes : {2, 4, 8}) {
    const auto machine = weft::sim::fabric::nodes(nodes, 8, nvlink, nic, 8);
    auto time_of = [&](auto algorithm) {
      return weft::sim::run(
          machine,
          [&](comm_type& comm) {
            weft::sim::phantom<float> data(std::size_t{1} << 26);
            weft::allreduce(comm, data.span(), weft::sum{}, decltype(algorithm){});
          },
          weft::sim::payload::phantom);
    };
    const auto flat = time_of(weft::ring{});
    const auto tiers = time_of(ring_ring{});
    std::printf(
        "simulated %d x 8 GPUs, 256 MiB allreduce: ring %.0f us, hierarchical(ring,ring) %.0f us "
        "(%.1fx), "
        "scale-out bytes %.2f vs %.2f GiB\n",
        nodes, flat.seconds * 1e6, tiers.seconds * 1e6, flat.seconds / tiers.seconds,
        flat.scale_out_bytes / (1 << 30), tiers.scale_out_bytes / (1 << 30));
    CHECK(tiers.seconds * 3 < flat.seconds);
    CHECK(tiers.scale_out_bytes < flat.scale_out_bytes * 1.0001);
  }
}

namespace {

// Rank i sends `bytes` to rank to(i) for every rank that `sends`, all at time 0; returns the run.
template <class Sends, class To>
weft::sim::report exchange(const weft::sim::fabric& machine, std::size_t bytes, Sends sends,
                           To to) {
  return weft::sim::run(machine, [&](weft::sim::transport& t) {
    std::vector<std::byte> buffer;  // held only by the ranks that take part (72 x 16 MiB otherwise)
    for (int peer = 0; peer < t.size(); ++peer) {
      if (sends(t.rank()) && to(t.rank()) == peer) {
        buffer.resize(bytes);
        auto request = t.send(peer, buffer, 3);
        t.wait(request, weft::deadline_clock::time_point::max());
      }
      if (sends(peer) && to(peer) == t.rank()) {
        buffer.resize(bytes);
        auto request = t.recv(peer, buffer, 3);
        t.wait(request, weft::deadline_clock::time_point::max());
      }
    }
  });
}

}  // namespace

TEST_CASE("machines: NVL72 and UALink domains, their sizes and their ports", "[sim]") {
  const auto rack = weft::sim::cluster(1, weft::sim::nvl72(), weft::sim::ethernet(800));
  CHECK(rack.ranks() == 72);
  CHECK(rack.memory_bytes_per_s() == 8000e9);
  constexpr std::size_t bytes = std::size_t{1} << 24;
  auto one = exchange(
      rack, bytes, [](int r) { return r == 0; }, [](int) { return 71; });
  // 900 GB/s each way, messages at NVLink's efficiency and latency
  CHECK(std::abs(one.seconds - (bytes / (900e9 * weft::sim::nvlink_efficiency) +
                                weft::sim::nvlink_latency_us * 1e-6)) <= 1e-12);
  CHECK(one.scale_up_bytes == static_cast<double>(bytes));
  CHECK(one.scale_out_bytes == 0);
  double total = 0;  // the vendor's 130 TB/s counts both directions: 65 TB/s one way
  for (const auto& l : rack.links())
    total += l.tier == weft::sim::tier::scale_up && l.latency_s > 0 ? l.bytes_per_s : 0;
  CHECK(std::abs(total - 72 * 900e9 * weft::sim::nvlink_efficiency) < 1);

  const auto pod = weft::sim::cluster(1, weft::sim::ualink_pod(1024, 4), {});
  CHECK(pod.ranks() == 1024);
  CHECK(pod.links().front().bytes_per_s == Approx(4 * 200e9 / 8 * weft::sim::nvlink_efficiency));
  CHECK(pod.switches().empty());  // UALink 1.0's switch does not reduce
  CHECK_THROWS_AS(weft::sim::ualink_pod(1025, 4), weft::error);
}

TEST_CASE("machines: two Clos tiers, the leaf's uplink shared at 4:1, by hand", "[sim]") {
  // Eight domains of one GPU, a NIC each at 100 Gbit/s; four NICs a leaf (not rails: 0-3 on
  // leaf 0, 4-7 on leaf 1); at 4:1 a leaf has one uplink. Ranks 0-3 each send 1 MiB to rank
  // i + 4 at time 0: the four messages take the one uplink in turn, and the last arrives after
  // 4 MiB at 12.5 GB/s plus the NIC (2 us) and two hops (1 us each).
  weft::sim::scale_up_domain single{"gpu", 1, 900, 0.5, 4800};
  auto net = weft::sim::ethernet(100);
  net.rails = false;
  net.leaf_ports = 4;
  net.with_tiers(2, 4.0);
  const auto machine = weft::sim::cluster(8, single, net);
  constexpr std::size_t bytes = std::size_t{1} << 20;
  const auto measured = exchange(
      machine, bytes, [](int r) { return r < 4; }, [](int r) { return r + 4; });
  const double expected = 4.0 * bytes / 12.5e9 + 4e-6;
  INFO("simulated " << measured.seconds << " s, expected " << expected << " s");
  CHECK(std::abs(measured.seconds - expected) <= 1e-12);
  CHECK(measured.scale_out_bytes == 4.0 * bytes);
  // Without oversubscription the leaf has four uplinks: no worse, and the same bytes.
  net.with_tiers(2, 1.0);
  const auto wide = exchange(
      weft::sim::cluster(8, single, net), bytes, [](int r) { return r < 4; },
      [](int r) { return r + 4; });
  CHECK(wide.seconds < measured.seconds);
  CHECK(wide.seconds >= 1.0 * bytes / 12.5e9 + 4e-6 - 1e-12);
  // Within a leaf no spine is crossed: the NIC's latency only.
  const auto near = exchange(
      machine, bytes, [](int r) { return r == 0; }, [](int) { return 1; });
  CHECK(std::abs(near.seconds - (1.0 * bytes / 12.5e9 + 2e-6)) <= 1e-12);
}

TEST_CASE("machines: three tiers cross a core between pods; rails keep a rail on its leaf",
          "[sim]") {
  weft::sim::scale_up_domain single{"gpu", 1, 900, 0.5, 4800};
  auto net = weft::sim::ethernet(400);
  net.rails = false;
  net.leaf_ports = 2;
  net.pod_leaves = 2;
  net.with_tiers(3);
  const auto machine = weft::sim::cluster(8, single, net);  // 4 leaves, 2 pods
  constexpr std::size_t bytes = 4096;
  const double wire = bytes / 50e9;
  auto time_to = [&](int to) {
    return exchange(
               machine, bytes, [](int r) { return r == 0; }, [=](int) { return to; })
        .seconds;
  };
  CHECK(std::abs(time_to(1) - (wire + 2e-6)) <= 1e-12);  // same leaf
  CHECK(std::abs(time_to(2) - (wire + 4e-6)) <= 1e-12);  // same pod: leaf, spine, leaf
  CHECK(std::abs(time_to(6) - (wire + 6e-6)) <= 1e-12);  // other pod: up to a core and down

  // Rails: two HGX-like domains of 4 GPUs, a NIC a GPU, two tiers. GPU i of domain 0 to GPU i
  // of domain 1 stays on rail i's leaf; to GPU i + 1 it crosses a spine.
  auto rails = weft::sim::ethernet(400);
  rails.with_tiers(2);
  const auto hgx = weft::sim::cluster(2, {"quad", 4, 900, 0.5, 4800}, rails);
  const auto same_rail = exchange(
      hgx, bytes, [](int r) { return r == 1; }, [](int) { return 5; });
  const auto other_rail = exchange(
      hgx, bytes, [](int r) { return r == 1; }, [](int) { return 6; });
  CHECK(std::abs(same_rail.seconds - (wire + 2e-6)) <= 1e-12);
  CHECK(std::abs(other_rail.seconds - (wire + 4e-6)) <= 1e-12);
  CHECK(same_rail.scale_out_bytes == bytes);
}

TEST_CASE("machines: on two NVL72 racks, hierarchical keeps the allreduce's bytes in the racks",
          "[sim]") {
  const auto racks =
      weft::sim::cluster(2, weft::sim::nvl72(), weft::sim::ethernet(800).with_tiers(2));
  constexpr std::size_t count = std::size_t{1} << 24;  // 64 MiB of floats
  auto measure = [&](auto algorithm) {
    return weft::sim::run(
        racks,
        [&](weft::communicator<weft::sim::transport>& comm) {
          weft::sim::phantom<float> data(count);
          weft::allreduce(comm, data.span(), weft::sum{}, decltype(algorithm){});
        },
        weft::sim::payload::phantom);
  };
  const auto flat = measure(weft::ring{});
  const auto tiers = measure(weft::hierarchical<weft::ring, weft::ring>{});
  INFO("ring " << flat.seconds << " s, " << flat.scale_out_bytes << " B out; hierarchical "
               << tiers.seconds << " s, " << tiers.scale_out_bytes << " B out");
  // hierarchical: each of 72 rails allreduces its block of n/72 between the 2 racks (a ring of
  // two: each rank sends half the block twice), so 2 x 72 x n/72 = 2n bytes leave the racks.
  CHECK(std::abs(tiers.scale_out_bytes - 2.0 * count * 4.0) <= 1e-9 * tiers.scale_out_bytes);
  CHECK(tiers.scale_out_bytes < flat.scale_out_bytes);
  CHECK(tiers.seconds < flat.seconds);
}

// The parallelism examples' strategies (examples/parallelism/), on the machines people
// compare: what they claim, measured.
#include "../../examples/parallelism/expert_parallel.hpp"
#include "../../examples/parallelism/pipeline_parallel.hpp"
#include "../../examples/parallelism/tensor_parallel.hpp"

TEST_CASE(
    "parallelism: tensor parallelism wants the NVLink domain, and an NVL72 moves its boundary",
    "[sim]") {
  parallelism::shape model;
  model.layers = 2;
  const auto hgx =
      weft::sim::cluster(2, weft::sim::hgx_h200(), weft::sim::ethernet(400).with_tiers(2));
  auto rack_domain = weft::sim::nvl72();
  rack_domain.gpus = 16;
  rack_domain.memory_gbyte_per_s = weft::sim::hgx_h200().memory_gbyte_per_s;
  const auto rack = weft::sim::cluster(1, rack_domain, weft::sim::ethernet(400));
  auto tensor_parallel = [&](const weft::sim::fabric& machine, int width) {
    return weft::sim::run(
        machine,
        [&](weft::communicator<weft::sim::transport>& comm) {
          auto group = comm.split(comm.rank() / width, comm.rank());
          parallelism::tensor_parallel_step<weft::bfloat16>(group, model);
        },
        weft::sim::payload::phantom);
  };
  const auto in_node = tensor_parallel(hgx, 8);
  const auto across_nodes = tensor_parallel(hgx, 16);
  const auto in_rack = tensor_parallel(rack, 16);
  INFO("TP8 on HGX " << in_node.seconds << " s; TP16 on HGX " << across_nodes.seconds << " s, "
                     << across_nodes.scale_out_bytes << " B out; TP16 on NVL72 " << in_rack.seconds
                     << " s");
  CHECK(in_node.scale_out_bytes < 1e4);  // only the split's own small exchange leaves the nodes
  CHECK(across_nodes.scale_out_bytes > 1e8);
  CHECK(in_rack.scale_out_bytes == 0);
  CHECK(in_rack.seconds < across_nodes.seconds);
}

TEST_CASE(
    "parallelism: the pipeline's bubble is GPipe's, and a skewed router unbalances the alltoall",
    "[sim]") {
  const auto machine = weft::sim::cluster(1, weft::sim::hgx_h200(), {});
  parallelism::shape model;
  model.layers = 16;
  model.micro_batches = 8;
  parallelism::pipeline_times times;
  weft::sim::run(
      machine,
      [&](weft::communicator<weft::sim::transport>& comm) {
        parallelism::pipeline_times mine;
        parallelism::pipeline_parallel_step<weft::bfloat16>(comm, model, &mine);
        if (comm.rank() == 0) times = mine;
      },
      weft::sim::payload::phantom);
  const double bubble = 1 - times.busy / times.step, ideal = 7.0 / (8 + 7);
  INFO("bubble " << bubble << ", GPipe's " << ideal);
  CHECK(bubble >= ideal - 1e-9);
  CHECK(bubble <= ideal + 0.05);  // the activations' transfers on top

  parallelism::expert_load load;
  model.skew = 1.2;
  weft::sim::run(
      machine,
      [&](weft::communicator<weft::sim::transport>& comm) {
        parallelism::expert_load mine;
        parallelism::expert_parallel_step<weft::bfloat16>(comm, model, &mine);
        if (comm.rank() == 0) load = mine;
      },
      weft::sim::payload::phantom);
  CHECK(static_cast<double>(load.most) > 2 * load.mean);
  model.skew = 0;  // a uniform router: within a few percent of even
  weft::sim::run(
      machine,
      [&](weft::communicator<weft::sim::transport>& comm) {
        parallelism::expert_load mine;
        parallelism::expert_parallel_step<weft::bfloat16>(comm, model, &mine);
        if (comm.rank() == 0) load = mine;
      },
      weft::sim::payload::phantom);
  CHECK(static_cast<double>(load.most) < 1.15 * load.mean);
}

TEST_CASE("automatic ranks with the simulated fabric's own rows", "[sim]") {
  // On 4 HGX nodes the hierarchical allreduce is several times faster than any flat one at
  // 32 MiB; automatic must find it. On the uniform machine there is one tier, and it must not.
  auto chosen = [](const weft::sim::fabric& machine) {
    std::string ran;
    weft::sim::run(
        machine,
        [&](weft::communicator<weft::sim::transport>& comm) {
          weft::sim::phantom<float> data(std::size_t{8} << 20);
          const auto report = weft::allreduce(comm, data.span(), weft::sum{});
          if (comm.rank() == 0) ran = std::string(report.algorithm);
        },
        weft::sim::payload::phantom);
    return ran;
  };
  CHECK(chosen(weft::sim::cluster(4, weft::sim::hgx_h200(), weft::sim::ethernet(400))) ==
        "hierarchical(ring,ring)");
  CHECK(chosen(weft::sim::fabric::uniform(32, {.gbit_per_s = 400, .latency_us = 2}))
            .find("hierarchical") == std::string::npos);
  auto transport_rows =
      weft::sim::world(weft::sim::cluster(2, weft::sim::hgx_h200(), weft::sim::ethernet(400)),
                       weft::sim::payload::phantom)
          .cost_constants();
  CHECK(transport_rows.first.alpha_us == Approx(weft::sim::nvlink_latency_us));  // NVLink port
  CHECK(transport_rows.second.alpha_us == Approx(2.0));                          // NIC
  CHECK(transport_rows.second.beta_us_per_byte == Approx(1e6 / 50e9));
}
