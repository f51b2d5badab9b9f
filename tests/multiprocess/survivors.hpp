// The survivors' story, as a user's program meets it: every rank runs a loop of collectives of
// mixed kinds, sizes and roots; rank `victim` SIGKILLs itself after a pause drawn from `seed`
// (0 to 400 ms, so at a different point of the loop each run); a survivor prints its error and
// returns at once, so its transport closes in order while the others may still be failing. Each
// survivor's error must name the killed rank, not a survivor that gave up and closed before it
// (multiprocess.py survivors_by_hand checks the lines printed here).
//
// Prints "survivor error: <what>" and "survivor culprit: <culprit()>"; returns 0 once a
// survivor has its error, 1 when the loop ended without one.
//
// recorded_failure: what the flight recorder tests run (multiprocess.py recorder_runs). Every
// rank runs 20 allreduces; at the 11th, rank `victim`
//   hang       stops itself (SIGSTOP), then sleeps: it never makes the call
//   mismatch   calls reduce (root 0) where the others call allreduce
//   kill       SIGKILLs itself (half a second after its 10th call)
//   healthy    does what the others do: the job runs 200 calls, 20 ms apart, and must end well
//              while the test sends every rank SIGUSR1
#pragma once

#include <weft/weft.hpp>

#include <chrono>
#include <csignal>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace weft_test::multiprocess {

template <class Comm>
int die_in_loop(Comm& comm, int victim, unsigned seed) {
  const int p = comm.size();
  std::mt19937 draw(seed);
  if (comm.rank() == victim) {
    const auto pause = std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 400)(draw));
    std::thread([pause] {
      std::this_thread::sleep_for(pause);
      std::raise(SIGKILL);
    }).detach();
  }
  const std::size_t counts[] = {1, 1000, 1 << 17};
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  try {
    for (int round = 0; std::chrono::steady_clock::now() < until; ++round) {
      const std::size_t count = counts[static_cast<std::size_t>(round) % 3];
      std::vector<float> data(count * static_cast<std::size_t>(p), 1.0f), out(data.size());
      const std::span<float> mine(data.data(), count);
      switch (round % 5) {
        case 0:
          weft::allreduce(comm, mine, weft::sum{});
          break;
        case 1:
          weft::broadcast(comm, mine, round % p);
          break;
        case 2:
          weft::alltoall(comm, std::span<const float>(data), std::span<float>(out));
          break;
        case 3:
          weft::allgather(comm, std::span<const float>(mine), std::span<float>(out));
          break;
        default:
          weft::allreduce(comm, mine, weft::max{}, weft::ring{});
          break;
      }
    }
  } catch (const weft::error& failure) {
    std::cout << "survivor error: " << failure.what() << "\nsurvivor culprit: " << failure.culprit()
              << std::endl;
    return 0;
  }
  std::cout << "never saw rank " << victim << " fail" << std::endl;
  return 1;
}

template <class Comm>
int recorded_failure(Comm& comm, const std::string& mode, int victim) {
  const bool healthy = mode == "healthy";
  std::vector<float> data(1000, 1.0f);
  try {
    for (int call = 1; call <= (healthy ? 200 : 20); ++call) {
      if (healthy) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (call == 11 && comm.rank() == victim && !healthy) {
        if (mode == "hang") {
          std::raise(SIGSTOP);
          std::this_thread::sleep_for(std::chrono::seconds(60));
        } else if (mode == "kill") {
          // After the others have read its part of call 10 (its death would reset connections
          // whose data they had yet to read), so that every rank is lost from in call 11.
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
          std::raise(SIGKILL);
        } else if (mode == "mismatch") {
          std::vector<float> out(data.size());
          weft::reduce(comm, std::span<const float>(data), std::span<float>(out), weft::sum{}, 0);
          continue;
        }
      }
      weft::allreduce(comm, std::span<float>(data), weft::sum{});
      std::fill(data.begin(), data.end(), 1.0f);
    }
  } catch (const weft::error& failure) {
    std::cout << "recorded failure: " << failure.what() << std::endl;
    return healthy ? 1 : 0;
  }
  std::cout << "recorded run ended: " << (healthy ? "healthy" : "no failure") << std::endl;
  return healthy ? 0 : 1;
}

}  // namespace weft_test::multiprocess
