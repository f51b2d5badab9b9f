// One rank of the multi-process tests (multiprocess.py starts it with weft-run, mpirun or by
// hand). It builds its session from the environment and runs one scenario:
//
//   slice            a slice of the collective matrix; prints "slice ok" or the failures
//   kill V           rank V kills itself (SIGKILL) in the middle of a stream of allreduces; the
//                    others must get peer_lost naming V, be refused on their next call, and
//                    build a new world without V over the same store
//   close V          rank V closes its transport mid-job and stays alive; the others as above
//   flood V          as kill, but the others send V 32 MiB messages while it receives them, so
//                    that it dies in the middle of copying one (on libfabric's shm provider,
//                    holding the lock of its shared region)
//
// Built twice: tcp_ranks over the TCP transport, ofi_ranks (WEFT_TEST_OFI) over libfabric,
// where a death may surface as a timeout instead of peer_lost.
//
// Exit status 0 when the rank saw what it had to; lines starting "detected" carry the times.
#include "../collective_cases.hpp"

#ifdef WEFT_TEST_OFI  // the same scenarios over libfabric (ofi_ranks)
#include <weft/transport/ofi.hpp>
namespace net = weft::ofi;
#else
#include <weft/transport/tcp.hpp>
namespace net = weft::tcp;
#endif

#include <algorithm>
#include <chrono>
#include <csignal>
#include <iostream>
#include <thread>

using namespace weft_test;
using namespace std::chrono_literals;

namespace {

long long now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int slice(net::session& job) {
  failures sink;
  const auto p = static_cast<std::size_t>(job.comm().size());
  const std::vector<std::size_t> counts = {0, 1, p + 1, 1000, 65539};
#ifndef WEFT_TEST_OFI
  // Each connection's congestion control, for multiprocess.py to check: before the slice, while
  // every connection is open (a peer that finishes first closes its own).
  for (int peer = 0; peer < job.comm().size(); ++peer) {
    if (peer == job.comm().rank()) continue;
    std::cout << "congestion control to rank " << peer << ": "
              << job.comm().underlying_transport().congestion_control(peer) << std::endl;
  }
#endif
  collective_slice(job.comm(), sink, counts);
  if (!sink.empty()) {
    std::cout << "slice failed: " << sink.summary() << std::endl;
    return 1;
  }
  std::cout << "slice ok on " << p << " ranks (" << job.launch().launcher << ")"
#ifdef WEFT_TEST_OFI
            << " over " << job.endpoint().provider() << " on " << job.endpoint().fabric()
#endif
            << std::endl;
  return 0;
}

constexpr std::size_t flood_floats = std::size_t{8} << 20;  // 32 MiB messages

// Ranks other than the victim: the error, the refusal, and a new world without the victim.
int survive(net::session& job, int victim, const std::string& expected, bool flood) {
  auto& comm = job.comm();
  const int rank = comm.rank();
  const int p = comm.size();
  std::vector<float> data(flood ? flood_floats : std::size_t{1} << 18);
  long long caught_at = 0;
  std::string message;
  try {
    for (int round = 0; round < 100000; ++round) {
      std::fill(data.begin(), data.end(), 1.0f);
      if (flood) {
        weft::send(comm, std::span<float>(data), victim);
      } else {
        weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::ring{});
      }
    }
    std::cout << "never saw rank " << victim << " fail" << std::endl;
    return 1;
  } catch (const weft::error& failure) {
    caught_at = now_us();
    message = failure.what();
#ifdef WEFT_TEST_OFI
    // Fabrics without connections may not see a death: then the waits time out, and the first
    // rank to time out tells the others (peer_lost naming whomever it waited on).
    const bool expected_error =
        failure.code() == weft::errc::peer_lost || failure.code() == weft::errc::timeout;
    (void)expected;
#else
    const bool expected_error =
        failure.code() == weft::errc::peer_lost && message.find(expected) != std::string::npos;
#endif
    if (!expected_error) {
      std::cout << "wrong error: " << message << std::endl;
      return 1;
    }
  }
  auto event = job.meeting()->get("test/event-at", weft::deadline_clock::now() + 10s);
  std::cout << "detected in " << (event ? (caught_at - std::stoll(*event)) / 1000.0 : -1.0)
            << " ms: " << message << std::endl;
  try {
    weft::allreduce(comm, std::span<float>(data), weft::sum{});
    std::cout << "the broken communicator accepted another call" << std::endl;
    return 1;
  } catch (const weft::error& failure) {
    if (std::string(failure.what()).find("build a new communicator") == std::string::npos) {
      std::cout << "unexpected refusal text: " << failure.what() << std::endl;
      return 1;
    }
  }
  // A new world of the survivors, over the same store, under a new key prefix.
  const int new_rank = rank < victim ? rank : rank - 1;
  net::config settings = net::config::from_environment();
  settings.prefix = "weft-without-" + std::to_string(victim);
  // A rank that saw the death at once (peer_lost) meets ranks that see it only when their wait
  // times out (WEFT_TIMEOUT_MS later, on fabrics without connections): wait well beyond that.
  settings.connect_timeout = std::max<std::chrono::milliseconds>(settings.connect_timeout, 30s);
#ifndef WEFT_TEST_OFI
  settings.secret = job.launch().secret.empty() ? settings.secret : job.launch().secret;
  if (settings.secret.empty())
    settings.secret = *job.meeting()->get("weft/secret", weft::deadline_clock::now() + 10s);
#endif
  net::transport transport(new_rank, p - 1, job.meeting(), settings);
  weft::communicator<net::transport> survivors(transport);
  std::vector<int> ones(1000, 1);
  weft::allreduce(survivors, std::span<int>(ones), weft::sum{});
  if (ones.front() != p - 1 || ones.back() != p - 1) {
    std::cout << "the new world computed " << ones.front() << std::endl;
    return 1;
  }
  std::cout << "rebuilt a world of " << p - 1 << " ranks without rank " << victim << std::endl;
  weft::barrier(survivors);
  return 0;
}

int failing(net::session& job, int victim, bool kill, bool flood = false) {
  const int rank = job.comm().rank();
  if (victim <= 0 || victim >= job.comm().size()) {
    std::cout << "the victim must be a rank other than 0 (rank 0 serves the store)" << std::endl;
    return 2;
  }
  if (rank != victim) {
    return survive(job, victim,
                   kill ? "rank " + std::to_string(victim)
                        : "rank " + std::to_string(victim) + " closed its transport",
                   flood);
  }
  std::vector<float> data(flood ? flood_floats : std::size_t{1} << 18);
  if (kill) {  // the victim dies in the middle of a stream of allreduces, or of receives
    std::thread trigger([&job] {
      std::this_thread::sleep_for(300ms);
      job.meeting()->set("test/event-at", std::to_string(now_us()));
      std::raise(SIGKILL);
    });
    while (true) {
      if (!flood) {
        weft::allreduce(job.comm(), std::span<float>(data), weft::sum{}, weft::ring{});
        continue;
      }
      for (int peer = 0; peer < job.comm().size(); ++peer) {
        if (peer != rank) weft::recv(job.comm(), std::span<float>(data), peer);
      }
    }
  }
  // Closing: a few rounds, then give up the transport mid-stream and stay alive.
  for (int round = 0; round < 3; ++round)
    weft::allreduce(job.comm(), std::span<float>(data), weft::sum{}, weft::ring{});
  job.meeting()->set("test/event-at", std::to_string(now_us()));
  job.close_transport();
  std::this_thread::sleep_for(60s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "slice";
  try {
    auto job = net::session::from_environment();
    if (scenario == "slice") return slice(job);
    if (scenario == "kill" && argc > 2) return failing(job, std::stoi(argv[2]), true);
    if (scenario == "close" && argc > 2) return failing(job, std::stoi(argv[2]), false);
    if (scenario == "flood" && argc > 2) return failing(job, std::stoi(argv[2]), true, true);
    std::cerr << "usage: tcp_ranks slice | kill RANK | close RANK | flood RANK" << std::endl;
    return 2;
  } catch (const weft::error& failure) {
    std::cout << "error: " << failure.what() << std::endl;
    return 3;
  }
}
