// The simulator's switches that reduce (weft::in_switch): right results on real payloads, the
// time the model states worked out by hand, weft::automatic offering it only where the switch
// reduces and it wins, the launch overhead spent once a call, and the faults as errors.
#include <weft/transport/sim.hpp>
#include <weft/weft.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

namespace {

using comm_type = weft::communicator<weft::sim::transport>;

weft::sim::fabric hgx(int nodes, int gpus = 8) {
  auto domain = weft::sim::hgx_h200();
  domain.gpus = gpus;
  return weft::sim::cluster(nodes, domain, weft::sim::ethernet(400));
}

// Rank r's element i: distinct on every rank, exact in an int64 sum.
std::int64_t value(int rank, std::size_t i) {
  return static_cast<std::int64_t>(rank) * 1000003 + static_cast<std::int64_t>(i);
}

std::int64_t sum_of(int ranks, std::size_t i) {
  std::int64_t total = 0;
  for (int r = 0; r < ranks; ++r) total += value(r, i);
  return total;
}

}  // namespace

TEST_CASE("in_switch: allreduce, reduce_scatter and allgather give the right results",
          "[sim][in_switch]") {
  const auto machine = hgx(1, 6);
  weft::sim::run(machine, [](comm_type& comm) {
    const int p = comm.size();
    const std::size_t n = 6 * 1001;
    std::vector<std::int64_t> in(n), out(n);
    for (std::size_t i = 0; i < n; ++i) in[i] = value(comm.rank(), i);
    const auto report =
        weft::allreduce(comm, std::span<const std::int64_t>(in), std::span<std::int64_t>(out),
                        weft::sum{}, weft::in_switch{});
    CHECK(report.algorithm == "in_switch");
    for (std::size_t i = 0; i < n; i += 97) CHECK(out[i] == sum_of(p, i));
    // in place
    weft::allreduce(comm, std::span<std::int64_t>(in), weft::sum{}, weft::in_switch{});
    CHECK(in == out);

    const std::size_t block = n / static_cast<std::size_t>(p);
    std::vector<std::int64_t> mine(block);
    for (std::size_t i = 0; i < n; ++i) in[i] = value(comm.rank(), i);
    weft::reduce_scatter(comm, std::span<const std::int64_t>(in), std::span<std::int64_t>(mine),
                         weft::sum{}, weft::in_switch{});
    const std::size_t first = block * static_cast<std::size_t>(comm.rank());
    for (std::size_t i = 0; i < block; i += 31) CHECK(mine[i] == sum_of(p, first + i));

    std::vector<std::int64_t> all(n);
    for (std::size_t i = 0; i < block; ++i) mine[i] = value(comm.rank(), i);
    weft::allgather(comm, std::span<const std::int64_t>(mine), std::span<std::int64_t>(all),
                    weft::in_switch{});
    for (int r = 0; r < p; ++r) {
      for (std::size_t i = 0; i < block; i += 29)
        CHECK(all[static_cast<std::size_t>(r) * block + i] == value(r, i));
    }
  });
}

TEST_CASE("in_switch: each node's switch under hierarchical, on 3 nodes, with a padded vector",
          "[sim][in_switch]") {
  weft::sim::run(hgx(3, 4), [](comm_type& comm) {
    const std::size_t n = 4099;  // not a multiple of the 4 GPUs a node
    std::vector<std::int64_t> data(n);
    for (std::size_t i = 0; i < n; ++i) data[i] = value(comm.rank(), i);
    weft::allreduce(comm, std::span<std::int64_t>(data), weft::sum{},
                    weft::hierarchical<weft::in_switch, weft::ring>{});
    for (std::size_t i = 0; i < n; i += 41) CHECK(data[i] == sum_of(comm.size(), i));
  });
}

TEST_CASE(
    "in_switch: the time is the launch, each port's (1 + 1/p) n at the switch's rate, and "
    "its latency",
    "[sim][in_switch]") {
  const auto up = weft::sim::hgx_h200();
  for (const int p : {2, 5, 8}) {
    constexpr std::size_t bytes = std::size_t{64} << 20;
    const auto report = weft::sim::run(
        hgx(1, p),
        [](comm_type& comm) {
          weft::sim::phantom<float> data(bytes / sizeof(float));
          weft::allreduce(comm, data.span(), weft::sum{}, weft::in_switch{});
        },
        weft::sim::payload::phantom);
    const double expected =
        up.launch_us * 1e-6 +
        (bytes + static_cast<double>(bytes) / p) / (up.gbyte_per_s * 1e9 * up.switch_efficiency) +
        up.switch_latency_us * 1e-6;
    INFO(p << " GPUs");
    CHECK(report.seconds == Approx(expected).epsilon(1e-9));
    CHECK(report.scale_up_bytes == Approx(p * (bytes + static_cast<double>(bytes) / p)));
    CHECK(report.scale_out_bytes == 0);
  }
}

TEST_CASE("in_switch: automatic offers it where the switch reduces and it is the cheapest",
          "[sim][in_switch]") {
  auto chosen = [](const weft::sim::fabric& machine, std::size_t bytes) {
    std::string ran;
    weft::sim::run(
        machine,
        [&](comm_type& comm) {
          weft::sim::phantom<float> data(bytes / sizeof(float));
          const auto report = weft::allreduce(comm, data.span(), weft::sum{});
          if (comm.rank() == 0) ran = std::string(report.algorithm);
        },
        weft::sim::payload::phantom);
    return ran;
  };
  CHECK(chosen(hgx(1), std::size_t{256} << 20) == "in_switch");  // NVLS's 480 against 370
  CHECK(chosen(hgx(1), 64) != "in_switch");  // its latency loses to a few NVLink messages
  CHECK(chosen(weft::sim::cluster(1, weft::sim::dgx_a100(), {}), std::size_t{256} << 20) !=
        "in_switch");  // NVLink 3's switches do not reduce
  // Across nodes the phases run one after another; the switch's reduce_scatter carries all n up
  // (a ring's carries (p - 1)/p n) at a lower share of the line rate, so the ring wins there.
  CHECK(chosen(hgx(2), std::size_t{64} << 20) == "hierarchical(ring,ring)");
}

TEST_CASE("in_switch: refused where no switch reduces, before anything is sent",
          "[sim][in_switch]") {
  std::string said;
  try {
    weft::sim::run(weft::sim::fabric::uniform(4, {}), [](comm_type& comm) {
      std::vector<float> data(16, 1.0f);
      weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::in_switch{});
    });
  } catch (const weft::error& failure) {
    said = failure.what();
    CHECK(failure.code() == weft::errc::invalid_argument);
  }
  INFO(said);
  CHECK(said.find("one switch that reduces") != std::string::npos);
  CHECK(said.find("nothing was sent") != std::string::npos);
  // Every rank is refused for itself, not told that another failed.
  std::vector<std::string> each(4);
  try {
    weft::sim::run(weft::sim::fabric::uniform(4, {}), [&](weft::sim::transport& t) {
      const std::vector<int> members = {0, 1, 2, 3};
      std::vector<std::byte> data(16);
      try {
        auto part = t.post_in_switch(weft::collective::allreduce, members, data, data, nullptr, 1);
      } catch (const weft::error& failure) {
        each[static_cast<std::size_t>(t.rank())] = failure.what();
        throw;
      }
    });
  } catch (const weft::error&) {
  }
  for (const auto& text : each) CHECK(text.find("one switch that reduces") != std::string::npos);
  // Ranks of two nodes share no switch (each node's reduces, the network's does not).
  said.clear();
  try {
    weft::sim::run(hgx(2, 2), [](comm_type& comm) {
      std::vector<float> data(16, 1.0f);
      weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::in_switch{});
    });
  } catch (const weft::error& failure) {
    said = failure.what();
  }
  CHECK(said.find("one switch that reduces") != std::string::npos);
}

TEST_CASE("in_switch: a network switch that reduces (SHARP) serves the ranks of every node",
          "[sim][in_switch]") {
  auto net = weft::sim::ethernet(400).with_in_switch_reduction(0.9, 3);
  const auto machine = weft::sim::cluster(2, weft::sim::hgx_h200(), net);
  CHECK(machine.switches().size() == 3);  // two NVLink domains and the network
  const auto report = weft::sim::run(machine, [](comm_type& comm) {
    std::vector<std::int64_t> data(64);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = value(comm.rank(), i);
    weft::allreduce(comm, std::span<std::int64_t>(data), weft::sum{}, weft::in_switch{});
    for (std::size_t i = 0; i < data.size(); i += 7) CHECK(data[i] == sum_of(comm.size(), i));
  });
  CHECK(report.scale_out_bytes > 0);
  CHECK_THROWS_AS(
      weft::sim::cluster(2, weft::sim::hgx_h200(),
                         weft::sim::ethernet(400).with_tiers(2).with_in_switch_reduction(0.9, 3)),
      weft::error);  // a reducing network switch is one tier
}

TEST_CASE("the launch overhead is spent once a call, not once a phase", "[sim][in_switch]") {
  auto time_of = [](double launch_us) {
    auto domain = weft::sim::hgx_h200();
    domain.launch_us = launch_us;
    return weft::sim::run(weft::sim::cluster(2, domain, weft::sim::ethernet(400)),
                          [](comm_type& comm) {
                            std::vector<float> data(64, 1.0f);
                            weft::allreduce(comm, std::span<float>(data), weft::sum{},
                                            weft::hierarchical<weft::ring, weft::ring>{});
                            weft::allreduce(comm, std::span<float>(data), weft::sum{},
                                            weft::ring{});
                          })
        .seconds;
  };
  CHECK(time_of(10) - time_of(0) == Approx(20e-6).epsilon(1e-9));  // two calls
}

TEST_CASE(
    "in_switch: parts that differ are a mismatch on every member; a member that never "
    "posts leaves the others deadlocked, not hung",
    "[sim][in_switch]") {
  std::vector<std::string> said(4);
  try {
    weft::sim::run(hgx(1, 4), [&](weft::sim::transport& t) {
      const std::vector<int> members = {0, 1, 2, 3};
      std::vector<std::byte> in(t.rank() == 3 ? 32 : 64), out(in.size());
      try {
        auto part = t.post_in_switch(weft::collective::allreduce, members, in, out, nullptr, 9);
        t.wait(part, weft::deadline_clock::time_point::max());
      } catch (const weft::error& failure) {
        said[static_cast<std::size_t>(t.rank())] = failure.what();
        CHECK(failure.code() == weft::errc::mismatch);
        throw;
      }
    });
  } catch (const weft::error&) {
  }
  for (const auto& text : said) {
    INFO(text);
    CHECK(text.find("rank 3 gives 32 bytes in") != std::string::npos);
  }
  std::string stuck;
  try {
    weft::sim::run(hgx(1, 4), [](weft::sim::transport& t) {
      if (t.rank() == 0) return;
      const std::vector<int> members = {0, 1, 2, 3};
      std::vector<std::byte> in(64), out(64);
      auto part = t.post_in_switch(weft::collective::allreduce, members, in, out, nullptr, 9);
      t.wait(part, weft::deadline_clock::time_point::max());
    });
  } catch (const weft::error& failure) {
    stuck = failure.what();
    CHECK(failure.code() == weft::errc::transport);
  }
  CHECK(stuck.find("deadlocked") != std::string::npos);
}
