// One rank of the multi-process tests (multiprocess.py starts it with weft-run, mpirun or by
// hand), written once for every transport: a program defines the transport's traits (its
// session, transport and config types, and what differs: see tcp_ranks.cpp, ofi_ranks.cpp) and
// calls ranks_main<Traits>. The rank builds its session from the environment and runs one
// scenario:
//
//   slice            a slice of the collective matrix; prints "slice ok" or the failures
//   kill V [C]       rank V kills itself (SIGKILL) in the middle of a stream of collectives C
//                    (allreduce, the default; alltoall; broadcast; inflight: 4 calls in flight
//                    at once, waited for in order); the others must get
//                    peer_lost naming V, be refused on their next call, and build a new world
//                    without V over the same store
//   close V          rank V closes its transport mid-job and stays alive; the others as above
//   flood V          as kill, but the others send V 32 MiB messages while it receives them, so
//                    that it dies in the middle of copying one (on libfabric's shm provider,
//                    holding the lock of its shared region)
//   stall V          rank V joins an allreduce 3 timeouts late (as a rank stopped and resumed):
//                    the others time out or are told; V must fail the call too, not complete it
//   fork V           rank V forks a child that returns from main (destroying its copy of the
//                    session); the job must go on: every rank's allreduce and barrier succeed
//   die V SEED       rank V is SIGKILLed at a point of a loop of collectives drawn from SEED;
//                    each survivor prints its error and ends at once (survivors.hpp)
//   recorder M V     the flight recorder's cases (hang, mismatch, kill, healthy; survivors.hpp)
//
// Exit status 0 when the rank saw what it had to; lines starting "detected" carry the times.
//
// Traits: session, transport, config; static void before_slice(session&) (what to print while
// every connection is open); static std::string describe(session&) (appended to "slice ok");
// static bool expected_failure(const weft::error&, const std::string& victim_text);
// static void rebuild_settings(config&, session&) (what a new world over the same store needs).
//
// Every transport's ranks meet at weft-run's WEFT_STORE through the TCP store (what the failure
// scenarios at start-up watch), not through the file store weft-run also names.
#pragma once

#include "../collective_cases.hpp"
#include "survivors.hpp"

#include <weft/bootstrap/tcp_meeting.hpp>
#include <weft/nonblocking.hpp>

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <iostream>
#include <thread>

namespace weft_test::multiprocess {

using namespace std::chrono_literals;

inline long long now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <class Traits>
int slice(typename Traits::session& job) {
  failures sink;
  const auto p = static_cast<std::size_t>(job.comm().size());
  const std::vector<std::size_t> counts = {0, 1, p + 1, 1000, 65539};
  Traits::before_slice(job);
  collective_slice(job.comm(), sink, counts);
  if (!sink.empty()) {
    std::cout << "slice failed: " << sink.summary() << std::endl;
    return 1;
  }
  std::cout << "slice ok on " << p << " ranks (" << job.launch().launcher << ")"
            << Traits::describe(job) << std::endl;
  return 0;
}

constexpr std::size_t flood_floats = std::size_t{8} << 20;   // 32 MiB messages
constexpr std::size_t stream_floats = std::size_t{3} << 16;  // 768 KiB: divides among 2, 3 or 4

// One call of the stream the kill scenarios run: ring allreduce, alltoall, or broadcast from 0.
template <class Comm>
void stream_call(Comm& comm, std::vector<float>& data, const std::string& collective) {
  if (collective == "alltoall") {
    std::vector<float> out(data.size());
    weft::alltoall(comm, std::span<const float>(data), std::span<float>(out));
  } else if (collective == "broadcast") {
    weft::broadcast(comm, std::span<float>(data), 0);
  } else if (collective == "inflight") {
    // 4 calls in flight at once (allreduce, broadcast, alltoall, allreduce), waited for in order
    std::vector<float> broadcast_data(data), alltoall_in(data), alltoall_out(data.size()),
        second(data);
    std::array requests{
        weft::iallreduce(comm, std::span<float>(data), weft::sum{}, weft::ring{}),
        weft::ibroadcast(comm, std::span<float>(broadcast_data), 0),
        weft::ialltoall(comm, std::span<const float>(alltoall_in), std::span<float>(alltoall_out)),
        weft::iallreduce(comm, std::span<float>(second), weft::sum{})};
    for (auto& request : requests) request.wait();
  } else {
    weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::ring{});
  }
}

// Ranks other than the victim: the error, the refusal, and a new world without the victim.
template <class Traits>
int survive(typename Traits::session& job, int victim, const std::string& expected, bool flood,
            const std::string& collective) {
  auto& comm = job.comm();
  const int rank = comm.rank();
  const int p = comm.size();
  std::vector<float> data(flood ? flood_floats : stream_floats);
  long long caught_at = 0;
  std::string message;
  try {
    for (int round = 0; round < 100000; ++round) {
      std::fill(data.begin(), data.end(), 1.0f);
      if (flood) {
        weft::send(comm, std::span<float>(data), victim);
      } else {
        stream_call(comm, data, collective);
      }
    }
    std::cout << "never saw rank " << victim << " fail" << std::endl;
    return 1;
  } catch (const weft::error& failure) {
    caught_at = now_us();
    message = failure.what();
    if (!Traits::expected_failure(failure, expected)) {
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
  auto settings = Traits::config::from_environment();
  settings.prefix = "weft-without-" + std::to_string(victim);
  // A rank that saw the death at once (peer_lost) meets ranks that see it only when their wait
  // times out (WEFT_TIMEOUT_MS later, on fabrics without connections): wait well beyond that.
  settings.connect_timeout = std::max<std::chrono::milliseconds>(settings.connect_timeout, 30s);
  Traits::rebuild_settings(settings, job);
  typename Traits::transport transport(new_rank, p - 1, job.meeting(), settings);
  weft::communicator<typename Traits::transport> survivors(transport);
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

template <class Traits>
int failing(typename Traits::session& job, int victim, bool kill, bool flood = false,
            const std::string& collective = "allreduce") {
  const int rank = job.comm().rank();
  if (victim <= 0 || victim >= job.comm().size()) {
    std::cout << "the victim must be a rank other than 0 (rank 0 serves the store)" << std::endl;
    return 2;
  }
  if (rank != victim) {
    return survive<Traits>(job, victim,
                           kill ? "rank " + std::to_string(victim)
                                : "rank " + std::to_string(victim) + " closed its transport",
                           flood, collective);
  }
  std::vector<float> data(flood ? flood_floats : stream_floats);
  if (kill) {  // the victim dies in the middle of a stream of collectives, or of receives
    std::thread trigger([&job] {
      std::this_thread::sleep_for(300ms);
      job.meeting()->set("test/event-at", std::to_string(now_us()));
      std::raise(SIGKILL);
    });
    while (true) {
      if (!flood) {
        stream_call(job.comm(), data, collective);
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

// A rank that is too late for the others' timeout must not complete the call they gave up on.
template <class Traits>
int stall(typename Traits::session& job, int victim) {
  auto& comm = job.comm();
  std::vector<float> data(1000, 1.0f);
  if (comm.rank() == victim) std::this_thread::sleep_for(3 * comm.settings().timeout);
  try {
    weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::ring{});
  } catch (const weft::error& failure) {
    std::cout << (comm.rank() == victim ? "late rank failed: " : "gave up: ") << failure.what()
              << std::endl;
    return 0;
  }
  std::cout << "completed the allreduce (" << data[0] << ")"
            << (comm.rank() == victim ? " although the others gave up on it" : "") << std::endl;
  return 1;
}

// A forked child's copy of the session must not end the parent's connections.
template <class Traits>
int forking(typename Traits::session& job, int victim) {
  auto& comm = job.comm();
  if (comm.rank() == victim) {
    std::cout << std::flush;
    const pid_t child = ::fork();
    if (child < 0) {
      std::cout << "fork failed" << std::endl;
      return 1;
    }
    if (child == 0) return 0;  // the child returns from main: its copy of the session is destroyed
    int status = 0;
    ::waitpid(child, &status, 0);
  }
  std::this_thread::sleep_for(200ms);  // what the child did, if anything, reaches the others
  std::vector<float> data(1000, 1.0f);
  weft::allreduce(comm, std::span<float>(data), weft::sum{});
  weft::barrier(comm);
  if (data[0] != static_cast<float>(comm.size())) {
    std::cout << "wrong sum " << data[0] << std::endl;
    return 1;
  }
  std::cout << "fork ok" << std::endl;
  return 0;
}

template <class Traits>
int ranks_main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "slice";
  try {
    auto job = Traits::session::from_environment();
    if (scenario == "slice") return slice<Traits>(job);
    if (scenario == "kill" && argc > 2)
      return failing<Traits>(job, std::stoi(argv[2]), true, false,
                             argc > 3 ? argv[3] : "allreduce");
    if (scenario == "close" && argc > 2) return failing<Traits>(job, std::stoi(argv[2]), false);
    if (scenario == "flood" && argc > 2)
      return failing<Traits>(job, std::stoi(argv[2]), true, true);
    if (scenario == "stall" && argc > 2) return stall<Traits>(job, std::stoi(argv[2]));
    if (scenario == "fork" && argc > 2) return forking<Traits>(job, std::stoi(argv[2]));
    if (scenario == "recorder" && argc > 3)
      return recorded_failure(job.comm(), argv[2], std::stoi(argv[3]));
    if (scenario == "die" && argc > 3)
      return die_in_loop(job.comm(), std::stoi(argv[2]),
                         static_cast<unsigned>(std::stoul(argv[3])));
    std::cerr << "usage: " << argv[0]
              << " slice | kill RANK [allreduce|alltoall|broadcast] | close RANK | flood RANK | "
                 "stall RANK | fork RANK"
                 " | die RANK SEED | recorder hang|mismatch|kill|healthy RANK"
              << std::endl;
    return 2;
  } catch (const weft::error& failure) {
    std::cout << "error: " << failure.what() << std::endl;
    return 3;
  }
}

}  // namespace weft_test::multiprocess
