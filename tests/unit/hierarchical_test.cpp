// Hierarchical collectives over the in-process transport with a host layout (hosts as groups of
// threads): every collective weft::hierarchical implements, with several pairs of tier
// algorithms, on every rank count of the matrix and layouts with equal, unequal and interleaved
// hosts, checked bit for bit against the serial reference; the host layout, split_by_host and
// split_by_rail; WEFT_ALGO's spelling; a rank lost in a phase.
#include "../collective_cases.hpp"
#include "../scoped_environment.hpp"

#include <weft/tiered.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

using namespace weft_test;

namespace {

using ring_ring = weft::hierarchical<weft::ring, weft::ring>;
using ring_halving = weft::hierarchical<weft::ring, weft::recursive_halving>;
using direct_tree = weft::hierarchical<weft::direct, weft::double_binary_tree>;
using trees = weft::hierarchical<weft::binomial_tree, weft::binomial_tree>;
using direct_binomial = weft::hierarchical<weft::direct, weft::binomial_tree>;
using direct_doubling = weft::hierarchical<weft::direct, weft::recursive_doubling>;

// Host of each rank: runs of consecutive ranks, or (interleaved) rank % hosts.
weft::host_layout layout_of(std::vector<int> ranks_per_host, bool interleaved) {
  if (!interleaved) return weft::host_layout::blocks(ranks_per_host);
  int p = 0;
  for (const int n : ranks_per_host) p += n;
  std::vector<int> keys(static_cast<std::size_t>(p));
  const auto hosts = static_cast<int>(ranks_per_host.size());
  for (int r = 0; r < p; ++r) keys[static_cast<std::size_t>(r)] = r % hosts;
  return weft::host_layout::from_keys(std::span<const int>(keys));
}

std::string describe(const weft::host_layout& layout) {
  std::string text;
  for (int r = 0; r < layout.size(); ++r) text += std::to_string(layout.host_of(r));
  return layout.describe() + " [" + text + "]";
}

void run_cases(const weft::host_layout& layout, failures& sink) {
  weft::inproc::world<> shared(layout);
  weft::inproc::run(shared, [&](comm_t& comm) {
    const int p = comm.size();
    std::vector<std::size_t> counts = {0, 1, static_cast<std::size_t>(p - 1),
                                       static_cast<std::size_t>(p + 1), 1000};
    if (!quick()) counts.push_back(65539);
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    for (const std::size_t count : counts) {
      comm.set_settings(test_options(count > 1000 ? 16384 : 512));
      const int root = static_cast<int>(count % static_cast<std::size_t>(p));
      const int other_root = p - 1;
      for_each_type<std::int8_t, std::int32_t, float, weft::bfloat16>([&](auto type) {
        using T = typename decltype(type)::type;
        for_each_algorithm<ring_ring, ring_halving, direct_tree, weft::automatic>(
            [&](auto algorithm) {
              using A = typename decltype(algorithm)::type;
              allreduce_case<T, weft::sum, A>(comm, sink, count, false, weft::sum{}, false);
              allreduce_case<T, weft::sum, A>(comm, sink, count, true, weft::sum{}, false);
              reduce_scatter_case<T, A>(comm, sink, count);
            });
        for_each_algorithm<trees, direct_binomial>([&](auto algorithm) {
          using A = typename decltype(algorithm)::type;
          reduce_case<T, A>(comm, sink, count, false, root);
          reduce_case<T, A>(comm, sink, count, true, other_root);
        });
        for_each_algorithm<trees, ring_ring>([&](auto algorithm) {
          broadcast_case<T, typename decltype(algorithm)::type>(comm, sink, count, root);
          broadcast_case<T, typename decltype(algorithm)::type>(comm, sink, count, other_root);
        });
        for_each_algorithm<ring_ring, direct_doubling>([&](auto algorithm) {
          allgather_case<T, typename decltype(algorithm)::type>(comm, sink, count, false);
          allgather_case<T, typename decltype(algorithm)::type>(comm, sink, count, true);
        });
      });
      if (count <= 1000) {
        for_each_type<std::int32_t, float>([&](auto type) {
          using T = typename decltype(type)::type;
          allreduce_case<T, weft::prod, ring_ring>(comm, sink, count, false, weft::prod{}, true);
          allreduce_case<T, weft::min, ring_halving>(comm, sink, count, false, weft::min{}, false);
          allreduce_case<T, weft::max, direct_tree>(comm, sink, count, true, weft::max{}, false);
          allreduce_case<T, weft::avg, ring_ring>(comm, sink, count, false, weft::avg{}, false);
        });
        allreduce_case<std::int64_t, weft::bxor, ring_ring>(comm, sink, count, false, weft::bxor{},
                                                            false);
      }
    }
  });
}

}  // namespace

TEST_CASE(
    "hierarchical: every collective on every rank count of the matrix, equal, unequal and "
    "interleaved hosts",
    "[hierarchical]") {
  // (ranks per host, interleaved): every rank count of the matrix, 1..9, 13 and 16.
  const auto [hosts, interleaved] = GENERATE(table<std::vector<int>, bool>({
      {{1}, false},
      {{2}, false},
      {{1, 1}, false},
      {{1, 2}, false},
      {{2, 1}, true},
      {{2, 2}, false},
      {{2, 2}, true},
      {{1, 2, 2}, false},
      {{3, 3}, false},
      {{2, 2, 2}, true},
      {{1, 2, 3, 1}, false},
      {{4, 4}, false},
      {{3, 3, 3}, false},
      {{4, 5, 4}, true},
      {{4, 4, 4, 4}, false},
  }));
  const auto layout = layout_of(hosts, interleaved);
  failures sink;
  run_cases(layout, sink);
  INFO(describe(layout));
  CHECK(sink.empty());
  if (!sink.empty()) FAIL(describe(layout) << ": " << sink.summary());
}

TEST_CASE("hierarchical: the layout, split_by_host and split_by_rail", "[hierarchical]") {
  const int per_host[] = {2, 3, 1};
  const auto layout = weft::host_layout::blocks(per_host);
  CHECK(layout.hosts() == 3);
  CHECK(layout.largest_host() == 3);
  CHECK(layout.smallest_host() == 1);
  CHECK(layout.host_of(4) == 1);
  CHECK(layout.local_index(4) == 2);
  CHECK(layout.describe() == "3 hosts: 2 + 3 + 1 ranks");
  // What each rank saw (Catch's assertions are made on this thread only).
  struct seen {
    bool knew = false, same = false;
    int host_size = 0, host_rank = 0, host_first = 0, rail_size = 0, rail_hosts = 0, host_sum = 0,
        rail_sum = 0;
  };
  std::vector<seen> ranks(6);
  weft::inproc::world<> shared(layout);
  weft::inproc::run(shared, [&](comm_t& comm) {
    auto& mine = ranks[static_cast<std::size_t>(comm.rank())];
    mine.knew = comm.known_hosts() != nullptr;
    mine.same = comm.hosts() == layout;
    auto host = comm.split_by_host();
    auto rail = comm.split_by_rail();
    mine.host_size = host.size();
    mine.host_rank = host.rank();
    mine.host_first = host.transport_rank(0);
    mine.rail_size = rail.size();
    mine.rail_hosts = rail.hosts().hosts();
    // each group works on its own: the sum of the world ranks in it
    mine.host_sum = comm.rank();
    weft::allreduce(host, std::span<int>(&mine.host_sum, 1), weft::sum{});
    mine.rail_sum = comm.rank();
    weft::allreduce(rail, std::span<int>(&mine.rail_sum, 1), weft::sum{});
  });
  // rails: local index 0 on every host (0, 2, 5), 1 on two (1, 3), 2 on one (4)
  const int rails[] = {3, 2, 3, 2, 1, 3};
  const int host_sums[] = {1, 1, 9, 9, 9, 5};
  const int rail_sums[] = {7, 4, 7, 4, 4, 7};
  for (int r = 0; r < 6; ++r) {
    INFO("rank " << r);
    const auto& got = ranks[static_cast<std::size_t>(r)];
    CHECK(got.knew);
    CHECK(got.same);
    CHECK(got.host_size == layout.local_size(r));
    CHECK(got.host_rank == layout.local_index(r));
    CHECK(got.host_first == layout.ranks_on(layout.host_of(r)).front());
    CHECK(got.rail_size == rails[r]);
    CHECK(got.rail_hosts == rails[r]);  // one rank per host on a rail
    CHECK(got.host_sum == host_sums[r]);
    CHECK(got.rail_sum == rail_sums[r]);
  }
}

TEST_CASE("hierarchical: a communicator without a layout learns it from WEFT_HOST, once",
          "[hierarchical]") {
  // Threads share one environment, so every rank names the same host: one host of 3 ranks.
  scoped_environment host({{"WEFT_HOST", "node-a"}});
  failures sink;
  weft::inproc::run(3, [&](comm_t& comm) {
    const bool knew = comm.known_hosts() != nullptr;
    std::vector<float> data(10, 1.0f);
    const auto report = weft::allreduce(comm, std::span<float>(data), weft::sum{}, ring_ring{});
    const bool learned = comm.known_hosts() != nullptr && comm.hosts().hosts() == 1;
    const int host_size = comm.split_by_host().size();
    if (knew || report.algorithm != "hierarchical(ring,ring)" ||
        data != std::vector<float>(10, 3.0f) || !learned || host_size != 3) {
      sink.add("rank " + std::to_string(comm.rank()) + ": knew " + std::to_string(knew) + ", ran " +
               std::string(report.algorithm) + ", learned " + std::to_string(learned) +
               ", host of " + std::to_string(host_size));
    }
  });
  INFO(sink.summary());
  CHECK(sink.empty());
  CHECK(weft::host_key("node-a") != weft::host_key("node-b"));
}

TEST_CASE(
    "hierarchical: WEFT_ALGO names it with its two tiers, and automatic picks it only with a "
    "layout",
    "[hierarchical]") {
  const int per_host[] = {2, 2};
  weft::inproc::world<> shared(weft::host_layout::blocks(per_host));
  failures sink;
  auto expect = [&](bool holds, const std::string& what) {
    if (!holds) sink.add(what);
  };
  {
    scoped_environment algo({{"WEFT_ALGO",
                              "allreduce=hierarchical(ring,ring),broadcast=hierarchical(binomial_"
                              "tree,binomial_tree)"}});
    weft::inproc::run(shared, [&](comm_t& comm) {
      std::vector<int> data(100, comm.rank());
      expect(weft::allreduce(comm, std::span<int>(data), weft::sum{}).algorithm ==
                 "hierarchical(ring,ring)",
             "allreduce ran hierarchical(ring,ring)");
      expect(data == std::vector<int>(100, 6), "allreduce's sum");
      expect(weft::broadcast(comm, std::span<int>(data), 3).algorithm ==
                 "hierarchical(binomial_tree,binomial_tree)",
             "broadcast ran hierarchical(binomial_tree,binomial_tree)");
    });
  }
  {
    scoped_environment algo({{"WEFT_ALGO", "allreduce=hierarchical(ring,bruck)"}});
    weft::inproc::run(shared, [&](comm_t& comm) {
      std::vector<int> data(100, 1);
      try {
        weft::allreduce(comm, std::span<int>(data), weft::sum{});
        sink.add("an algorithm that cannot run allreduce ran");
      } catch (const weft::error& failure) {
        const std::string text = failure.what();
        expect(text.find("WEFT_ALGO asks for 'hierarchical(ring,bruck)'") != std::string::npos &&
                   text.find("hierarchical(ring,ring)") != std::string::npos,
               "the refusal names the choices: " + text);
      }
    });
  }
  // Without a layout (one rank per host as far as anyone knows) automatic never picks it, and
  // does not stop to learn one.
  weft::inproc::run(4, [&](comm_t& comm) {
    std::vector<float> data(1 << 16, 1.0f);
    expect(
        weft::allreduce(comm, std::span<float>(data), weft::sum{}).algorithm.find("hierarchical") ==
            std::string_view::npos,
        "automatic without a layout stays flat");
    expect(comm.known_hosts() == nullptr, "automatic learned no layout");
  });
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("hierarchical: a rank lost during a phase fails every other rank, naming it",
          "[hierarchical]") {
  const int per_host[] = {2, 2};
  weft::inproc::world<> shared(weft::host_layout::blocks(per_host));
  std::vector<std::string> seen(4);
  std::vector<std::string> after(4);
  std::string thrown;
  try {
    weft::inproc::run(shared, [&](comm_t& comm) {
      std::vector<float> data(1000, 1.0f);
      if (comm.rank() == 3) throw std::runtime_error("rank 3 gave up");
      try {
        weft::allreduce(comm, std::span<float>(data), weft::sum{}, ring_ring{});
      } catch (const weft::error& failure) {
        seen[static_cast<std::size_t>(comm.rank())] = failure.what();
        try {  // the communicator failed with its phase: later calls refuse
          weft::barrier(comm);
        } catch (const weft::error& refusal) {
          after[static_cast<std::size_t>(comm.rank())] = refusal.what();
        }
        throw;
      }
    });
  } catch (const std::exception& failure) {
    thrown = failure.what();
  }
  CHECK(thrown.find("rank 3 gave up") != std::string::npos);
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r << ": " << seen[static_cast<std::size_t>(r)]);
    CHECK(seen[static_cast<std::size_t>(r)].find("rank 3") != std::string::npos);
    CHECK(seen[static_cast<std::size_t>(r)].find("hierarchical(ring,ring)") != std::string::npos);
    CHECK(after[static_cast<std::size_t>(r)].find("failed earlier") != std::string::npos);
  }
}

TEST_CASE("hierarchical: a tiered world of two in-process transports, one per host and one for all",
          "[hierarchical]") {
  // Hosts of 2, 3 and 1 ranks, interleaved: each host's threads have a world of their own (Local)
  // and every thread is in the job's world (Network).
  const int hosts_of[] = {0, 1, 1, 0, 2, 1};
  const auto layout = weft::host_layout::from_keys(std::span<const int>(hosts_of));
  using tiers = weft::tiered<weft::inproc::transport, weft::inproc::transport>;
  weft::inproc::world<> network(layout.size());
  std::vector<std::unique_ptr<weft::inproc::world<>>> locals;
  for (int h = 0; h < layout.hosts(); ++h) {
    locals.push_back(
        std::make_unique<weft::inproc::world<>>(static_cast<int>(layout.ranks_on(h).size())));
  }
  failures sink;
  std::vector<std::string> described(6);
  std::vector<std::thread> threads;
  for (int r = 0; r < layout.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        tiers endpoint(
            layout, network.endpoint(r),
            locals[static_cast<std::size_t>(layout.host_of(r))]->endpoint(layout.local_index(r)));
        weft::communicator<tiers> comm(endpoint, test_options(512));
        described[static_cast<std::size_t>(r)] = endpoint.describe();
        for (const std::size_t count :
             {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}}) {
          for_each_algorithm<ring_ring, direct_tree, weft::ring, weft::recursive_doubling,
                             weft::automatic>([&](auto algorithm) {
            using A = typename decltype(algorithm)::type;
            allreduce_case<float, weft::sum, A>(comm, sink, count, false, weft::sum{}, false);
            allreduce_case<std::int32_t, weft::max, A>(comm, sink, count, true, weft::max{}, false);
          });
          reduce_scatter_case<float, ring_ring>(comm, sink, count);
          allgather_case<float, ring_ring>(comm, sink, count, false);
          broadcast_case<float, trees>(comm, sink, count, 4);
          reduce_case<float, trees>(comm, sink, count, false, 2);
          alltoall_case<float, weft::pairwise>(comm, sink, count);
        }
        auto host = comm.split_by_host();
        if (host.size() != layout.local_size(r))
          sink.add("split_by_host on rank " + std::to_string(r));
      } catch (const std::exception& failure) {
        sink.add("rank " + std::to_string(r) + " threw: " + failure.what());
        network.abort(r, failure.what());
        locals[static_cast<std::size_t>(layout.host_of(r))]->abort(layout.local_index(r),
                                                                   failure.what());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  INFO(sink.summary());
  CHECK(sink.empty());
  CHECK(described[0] == "3 hosts: 2 + 3 + 1 ranks; within a host inproc, between hosts inproc");
}

TEST_CASE(
    "hierarchical: a tiered world without a node-local transport sends everything over the network",
    "[hierarchical]") {
  const int per_host[] = {2, 2};
  const auto layout = weft::host_layout::blocks(per_host);
  using tiers = weft::tiered<weft::no_local_transport, weft::inproc::transport>;
  static_assert(weft::reducing_transport<tiers>);
  weft::inproc::world<> network(layout.size());
  failures sink;
  std::vector<std::thread> threads;
  for (int r = 0; r < layout.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        tiers endpoint(layout, network.endpoint(r));
        weft::communicator<tiers> comm(endpoint, test_options(512));
        if (endpoint.is_local(r ^ 1))
          sink.add("a peer of the same host counted as node-local without a local tier");
        for (const std::size_t count : {std::size_t{1}, std::size_t{1000}}) {
          allreduce_case<float, weft::sum, ring_ring>(comm, sink, count, false, weft::sum{}, false);
          allreduce_case<float, weft::sum, weft::automatic>(comm, sink, count, false, weft::sum{},
                                                            false);
          broadcast_case<float, trees>(comm, sink, count, 3);
        }
        if (endpoint.describe() !=
            "2 hosts: 2 + 2 ranks; within a host inproc, between hosts inproc") {
          sink.add("describe: " + endpoint.describe());
        }
      } catch (const std::exception& failure) {
        sink.add("rank " + std::to_string(r) + " threw: " + failure.what());
        network.abort(r, failure.what());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  INFO(sink.summary());
  CHECK(sink.empty());
}
