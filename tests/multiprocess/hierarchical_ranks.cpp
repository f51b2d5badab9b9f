// One rank of the hierarchical scenarios (multiprocess.py hierarchical): a job over
// weft::tiered_session<shm, tcp> (shared memory within a host, TCP between hosts), its hosts
// network namespaces on one machine.
//
//   slice       every hierarchical collective, several tier pairs, and flat algorithms over the
//               same world, against the serial reference; prints "hierarchical slice ok on N
//               ranks (layout)" and what weft::automatic chose for a large allreduce
//   kill V      rank V kills itself (SIGKILL) in the middle of a stream of hierarchical
//               allreduces; every other rank must get an error naming rank V
//   die V SEED  rank V is SIGKILLed at a point of a loop of collectives drawn from SEED; each
//               survivor prints its error and ends at once (survivors.hpp)
//   network-only  the same job built with weft::no_local_transport: the ranks of a host talk over
//               TCP; rank 0 says so once; hierarchical and automatic allreduce still pass
//   bench B     allreduce of B bytes (float sum): hierarchical(ring,ring) against flat ring and
//               the other flat algorithms, alternating, 5 rounds; prints busbw per algorithm
#include "../collective_cases.hpp"
#include "survivors.hpp"

#include <weft/bootstrap/tiered_session.hpp>
#include <weft/transport/shm.hpp>
#include <weft/transport/tcp.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <iostream>
#include <map>
#include <thread>

namespace {

using job_type = weft::tiered_session<weft::shm::transport, weft::tcp::transport>;
using comm_type = weft::communicator<job_type::transport_type>;
using ring_ring = weft::hierarchical<weft::ring, weft::ring>;
using ring_halving = weft::hierarchical<weft::ring, weft::recursive_halving>;
using direct_tree = weft::hierarchical<weft::direct, weft::double_binary_tree>;
using trees = weft::hierarchical<weft::binomial_tree, weft::binomial_tree>;

int slice(job_type& job) {
  using namespace weft_test;
  auto& comm = job.comm();
  failures sink;
  const int p = comm.size();
  for (const std::size_t count : {std::size_t{0}, std::size_t{1}, static_cast<std::size_t>(p + 1),
                                  std::size_t{1000}, std::size_t{65539}}) {
    const int root = static_cast<int>(count % static_cast<std::size_t>(p));
    for_each_type<std::int32_t, float, weft::bfloat16>([&](auto type) {
      using T = typename decltype(type)::type;
      for_each_algorithm<ring_ring, ring_halving, direct_tree, weft::ring, weft::automatic>(
          [&](auto algorithm) {
            using A = typename decltype(algorithm)::type;
            allreduce_case<T, weft::sum, A>(comm, sink, count, false, weft::sum{}, false);
            allreduce_case<T, weft::sum, A>(comm, sink, count, true, weft::sum{}, false);
          });
      for_each_algorithm<ring_ring, weft::automatic>([&](auto algorithm) {
        using A = typename decltype(algorithm)::type;
        reduce_scatter_case<T, A>(comm, sink, count);
        allgather_case<T, A>(comm, sink, count, false);
        broadcast_case<T, A>(comm, sink, count, root);
      });
      reduce_case<T, trees>(comm, sink, count, false, root);
      reduce_case<T, trees>(comm, sink, count, true, p - 1);
      broadcast_case<T, trees>(comm, sink, count, p - 1);
    });
    allreduce_case<float, weft::max, ring_ring>(comm, sink, count, false, weft::max{}, false);
    allreduce_case<std::int64_t, weft::bxor, ring_ring>(comm, sink, count, false, weft::bxor{},
                                                        false);
  }
  if (!sink.empty()) {
    std::cout << "hierarchical slice failed: " << sink.summary() << std::endl;
    return 1;
  }
  std::vector<float> large(std::size_t{4} << 20, 1.0f);
  const auto chosen = weft::allreduce(comm, std::span<float>(large), weft::sum{});
  // Rank 0 serves the bootstrap store and leaves first (its process ends as this returns); the
  // ranks of the other hosts go on within their host, which must not take the store's orderly
  // close for the loss of a rank.
  auto host = comm.split_by_host();
  const auto& layout = comm.hosts();
  if (layout.host_of(comm.rank()) != layout.host_of(0)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::vector<std::int32_t> ones(1000, 1);
    weft::allreduce(host, std::span<std::int32_t>(ones), weft::sum{});
    if (std::any_of(ones.begin(), ones.end(), [&](std::int32_t v) { return v != host.size(); })) {
      std::cout << "hierarchical slice failed: an allreduce within host "
                << layout.host_of(comm.rank()) << " after rank 0 left gave a wrong sum"
                << std::endl;
      return 1;
    }
  }
  std::cout << "hierarchical slice ok on " << p << " ranks (" << job.endpoint().describe()
            << "); automatic chose " << chosen.algorithm << " for a 16 MiB allreduce" << std::endl;
  return 0;
}

// Without a node-local transport: every message over TCP, the layout still known.
int network_only() {
  using network_job = weft::tiered_session<weft::no_local_transport, weft::tcp::transport>;
  auto job = network_job::from_environment();
  auto& comm = job.comm();
  weft_test::failures sink;
  for (const std::size_t count : {std::size_t{1}, std::size_t{1000}, std::size_t{65539}}) {
    weft_test::allreduce_case<float, weft::sum, ring_ring>(comm, sink, count, false, weft::sum{},
                                                           false);
    weft_test::allreduce_case<float, weft::sum, weft::automatic>(comm, sink, count, true,
                                                                 weft::sum{}, false);
  }
  if (!sink.empty()) {
    std::cout << "network-only failed: " << sink.summary() << std::endl;
    return 1;
  }
  std::cout << "network-only ok on " << comm.size() << " ranks (" << job.endpoint().describe()
            << ")" << std::endl;
  return 0;
}

int kill(job_type& job, int victim) {
  auto& comm = job.comm();
  std::vector<float> data(std::size_t{3} << 16, 1.0f);
  if (comm.rank() == victim) {
    std::thread trigger([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::raise(SIGKILL);
    });
    while (true) weft::allreduce(comm, std::span<float>(data), weft::sum{}, ring_ring{});
  }
  try {
    for (int round = 0; round < 100000; ++round)
      weft::allreduce(comm, std::span<float>(data), weft::sum{}, ring_ring{});
    std::cout << "never saw rank " << victim << " fail" << std::endl;
    return 1;
  } catch (const weft::error& failure) {
    std::cout << "detected: " << failure.what() << std::endl;
    const std::string text = failure.what();
    return text.find("rank " + std::to_string(victim)) != std::string::npos ? 0 : 1;
  }
}

int bench(job_type& job, std::size_t bytes) {
  auto& comm = job.comm();
  std::vector<float> data(bytes / sizeof(float), 1.0f);
  std::map<std::string, std::vector<double>> seconds;
  auto time_one = [&](auto algorithm) {
    weft::barrier(comm);
    const auto start = std::chrono::steady_clock::now();
    const auto report = weft::allreduce(comm, std::span<float>(data), weft::sum{}, algorithm);
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    weft::allreduce(comm, std::span<double>(&took, 1), weft::max{},
                    weft::direct{});  // the slowest rank counts
    seconds[std::string(report.algorithm)].push_back(took);
  };
  for (int round = 0; round < 6; ++round) {  // the first round warms up and is dropped
    time_one(ring_ring{});
    time_one(ring_halving{});
    time_one(weft::ring{});
    time_one(weft::recursive_halving{});
    time_one(weft::double_binary_tree{});
    if (round == 0) seconds.clear();
  }
  const auto chosen = weft::allreduce(comm, std::span<float>(data), weft::sum{});
  if (comm.rank() == 0) {
    const double p = comm.size();
    for (auto& [name, times] : seconds) {
      std::sort(times.begin(), times.end());
      const double median = times[times.size() / 2];
      std::cout << "bench " << bytes << " " << name << " busbw "
                << bytes * 2 * (p - 1) / p / median / 1e9 << " GB/s (median of " << times.size()
                << ")" << std::endl;
    }
    std::cout << "bench " << bytes << " automatic chose " << chosen.algorithm << std::endl;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "slice";
  try {
    if (scenario == "network-only") return network_only();
    auto job = job_type::from_environment();
    if (scenario == "slice") return slice(job);
    if (scenario == "kill" && argc > 2) return kill(job, std::stoi(argv[2]));
    if (scenario == "die" && argc > 3) {
      return weft_test::multiprocess::die_in_loop(job.comm(), std::stoi(argv[2]),
                                                  static_cast<unsigned>(std::stoul(argv[3])));
    }
    if (scenario == "bench" && argc > 2) return bench(job, std::stoull(argv[2]));
    std::cerr << "usage: " << argv[0]
              << " slice | network-only | kill RANK | die RANK SEED | bench BYTES" << std::endl;
    return 2;
  } catch (const weft::error& failure) {
    std::cout << "error: " << failure.what() << std::endl;
    return 3;
  }
}
