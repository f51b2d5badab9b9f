// Calls in flight (weft/nonblocking.hpp) over the in-process transport: the collective matrix
// again with 1, 2 and 8 calls in flight between computations, calls of different collectives
// completing in order, errors and timeouts surfacing at wait, argument errors at the call,
// point-to-point in flight matching blocking calls, and the progress thread.
#include "matrix_cases.hpp"

#include <weft/nonblocking.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <deque>
#include <numeric>
#include <thread>

using namespace weft_test;
using namespace std::chrono_literals;

namespace {

using request_t = weft::request<weft::inproc::transport>;

// Computation between calls: a few microseconds of arithmetic the compiler cannot drop.
std::uint64_t compute(std::uint64_t seed, int rounds) {
  for (int i = 0; i < rounds; ++i) seed = seed * 6364136223846793005ull + 1442695040888963407ull;
  return seed;
}

std::vector<float> filled(std::size_t count, float value) { return std::vector<float>(count, value); }

}  // namespace

TEST_CASE("the collective matrix through calls in flight (1 to 8 at a time) between computations",
          "[nonblocking]") {
  const auto [p, window] = GENERATE(table<int, std::size_t>(
      {{1, 8}, {2, 1}, {2, 8}, {3, 2}, {4, 8}, {5, 1}, {6, 8}, {8, 2}, {8, 8}}));
  failures sink;
  std::atomic<std::uint64_t> work{0};
  weft::inproc::run(p, [&](comm_t& comm) {
    const std::vector<std::size_t> counts = {0, 1, static_cast<std::size_t>(p + 1), 1000};
    std::deque<request_t> in_flight;
    std::uint64_t seed = static_cast<std::uint64_t>(comm.rank());
    std::size_t issued = 0;
    std::size_t completed = 0;  // counted by the cases themselves, on their lanes
    matrix_cases(comm, sink, counts, [&](auto one_case) {
      ++issued;
      in_flight.push_back(weft::start(comm, "a matrix case", [one_case, &completed](comm_t& lane) {
        one_case(lane);
        ++completed;
        return lane.finish();
      }));
      seed = compute(seed, 200);
      in_flight.front().test();  // moves the calls forward; completes none out of order
      while (in_flight.size() >= window) {
        in_flight.front().wait();
        in_flight.pop_front();
      }
    });
    while (!in_flight.empty()) {
      in_flight.front().wait();
      in_flight.pop_front();
    }
    RANK_CHECK(issued > 500);
    RANK_CHECK(completed == issued);
    work += seed;
  });
  INFO("ranks " << p << ", " << window << " in flight");
  CHECK(sink.empty());
  if (!sink.empty()) FAIL(sink.summary());
}

TEST_CASE("calls of different collectives in flight complete in the order issued with their results",
          "[nonblocking]") {
  const int p = GENERATE(2, 3, 4, 7);
  weft::inproc::run(p, [&](comm_t& comm) {
    const int r = comm.rank();
    constexpr std::size_t n = 5000;
    auto summed = filled(n * static_cast<std::size_t>(p), static_cast<float>(r + 1));
    auto broadcasted = filled(n, static_cast<float>(r == p - 1 ? 42 : -1));
    std::vector<int> sent(static_cast<std::size_t>(p) * 3), received(sent.size());
    for (std::size_t i = 0; i < sent.size(); ++i) sent[i] = r * 1000 + static_cast<int>(i);
    std::array requests{weft::iallreduce(comm, std::span<float>(summed), weft::sum{}, weft::ring{}),
                        weft::ibroadcast(comm, std::span<float>(broadcasted), p - 1),
                        weft::ialltoall(comm, std::span<const int>(sent), std::span<int>(received))};
    // Waiting for the last completes the ones before it: their test() is true without moving anything.
    const weft::report last = requests[2].wait();
    RANK_CHECK(last.collective == "alltoall");
    RANK_CHECK(requests[0].test());
    RANK_CHECK(requests[1].test());
    RANK_CHECK(requests[0].result().collective == "allreduce");
    RANK_CHECK(requests[0].result().algorithm == "ring");
    RANK_CHECK(requests[1].result().collective == "broadcast");
    const float want = static_cast<float>(p * (p + 1) / 2);
    RANK_CHECK(std::all_of(summed.begin(), summed.end(), [&](float x) { return x == want; }));
    RANK_CHECK(std::all_of(broadcasted.begin(), broadcasted.end(), [](float x) { return x == 42.0f; }));
    for (int from = 0; from < p; ++from) {
      for (int i = 0; i < 3; ++i) {
        RANK_CHECK(received[static_cast<std::size_t>(from * 3 + i)] == from * 1000 + r * 3 + i);
      }
    }
  });
}

TEST_CASE("a blocking call completes the calls in flight first; a dropped handle's call completes too",
          "[nonblocking]") {
  weft::inproc::run(4, [&](comm_t& comm) {
    auto data = filled(100000, 1.0f);
    auto kept = filled(1000, static_cast<float>(comm.rank()));
    weft::iallreduce(comm, std::span<float>(data), weft::sum{});  // handle dropped at once
    auto broadcast = weft::ibroadcast(comm, std::span<float>(kept), 3);
    std::vector<int> mine(1, comm.rank()), all(4);
    weft::allgather(comm, std::span<const int>(mine), std::span<int>(all));
    RANK_CHECK(broadcast.test());  // the blocking allgather completed it
    RANK_CHECK((data.front() == 4.0f && data.back() == 4.0f));
    RANK_CHECK((kept.front() == 3.0f && kept.back() == 3.0f));
    RANK_CHECK(all == std::vector<int>({0, 1, 2, 3}));
    // split and dup also start after the calls in flight.
    auto again = weft::iallreduce(comm, std::span<float>(data), weft::sum{});
    auto pair = comm.split(comm.rank() / 2, comm.rank());
    RANK_CHECK(again.test());
    RANK_CHECK(data.front() == 16.0f);
    RANK_CHECK(pair.size() == 2);
  });
}

TEST_CASE("an argument error is thrown by the call itself and nothing is put in flight", "[nonblocking]") {
  weft::inproc::run(3, [&](comm_t& comm) {
    std::vector<float> in(10, 1.0f), out(9);
    bool refused = false;
    try {
      weft::iallreduce(comm, std::span<const float>(in), std::span<float>(out), weft::sum{});
    } catch (const weft::error& failure) {
      refused = failure.code() == weft::errc::invalid_argument &&
                std::string(failure.what()).find("allreduce") != std::string::npos;
    }
    RANK_CHECK(refused);
    RANK_CHECK(comm.calls_in_flight() != nullptr);
    // The communicator still works, and the next calls match across ranks.
    auto done = weft::iallreduce(comm, std::span<float>(in), weft::sum{});
    done.wait();
    RANK_CHECK(in.front() == 3.0f);
  });
}

TEST_CASE("a timeout in flight is thrown by wait with the blocking call's message; later calls are refused",
          "[nonblocking]") {
  auto settings = test_options();
  settings.timeout = 300ms;
  std::vector<std::string> messages(3);
  weft::inproc::run(
      3,
      [&](comm_t& comm) {
        auto data = filled(1000, 1.0f);
        auto later = filled(1000, 1.0f);
        if (comm.rank() == 2) {  // never joins: the others time out, and are told
          std::this_thread::sleep_for(1500ms);
          return;
        }
        auto first = weft::iallreduce(comm, std::span<float>(data), weft::sum{}, weft::ring{});
        auto second = weft::iallreduce(comm, std::span<float>(later), weft::sum{});
        std::string& message = messages[static_cast<std::size_t>(comm.rank())];
        try {
          first.wait();
          message = "first completed";
        } catch (const weft::error& failure) {
          message = failure.what();
        }
        try {
          second.wait();
          message += " | second completed";
        } catch (const weft::error& failure) {
          message += std::string(" | ") + failure.what();
        }
        try {
          weft::barrier(comm);
          message += " | barrier completed";
        } catch (const weft::error& failure) {
          message += std::string(" | ") + failure.what();
        }
      },
      settings);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string& message = messages[static_cast<std::size_t>(rank)];
    INFO("rank " << rank << ": " << message);
    CHECK((message.find("weft: timeout") == 0 || message.find("weft: peer_lost") == 0));
    CHECK(message.find("allreduce, algorithm ring") != std::string::npos);
    CHECK(message.find("cancelled allreduce in flight: this communicator failed earlier") != std::string::npos);
    CHECK(message.find("refuses barrier") != std::string::npos);
    CHECK(message.find("completed") == std::string::npos);
  }
}

TEST_CASE("point-to-point in flight matches blocking calls, in the order posted", "[nonblocking]") {
  weft::inproc::run(2, [&](comm_t& comm) {
    std::vector<int> a(100), b(100);
    if (comm.rank() == 0) {
      std::iota(a.begin(), a.end(), 0);
      std::iota(b.begin(), b.end(), 1000);
      auto first = weft::isend(comm, std::span<int>(a), 1, 5);
      auto second = weft::isend(comm, std::span<int>(b), 1, 5);
      weft::send(comm, std::span<int>(a), 1, 6);
      second.wait();
      RANK_CHECK(first.test());
    } else {
      weft::recv(comm, std::span<int>(a), 0, 5);
      auto later = weft::irecv(comm, std::span<int>(b), 0, 5);
      std::vector<int> c(100);
      auto other_tag = weft::irecv(comm, std::span<int>(c), 0, 6);
      other_tag.wait();
      later.wait();
      RANK_CHECK((a.front() == 0 && a.back() == 99));
      RANK_CHECK((b.front() == 1000 && b.back() == 1099));
      RANK_CHECK((c.front() == 0 && c.back() == 99));
    }
  });
}

TEST_CASE("wait with a deadline returns false while a peer is late and the call stays in flight",
          "[nonblocking]") {
  weft::inproc::run(2, [&](comm_t& comm) {
    auto data = filled(1000, 2.0f);
    if (comm.rank() == 1) std::this_thread::sleep_for(400ms);
    auto call = weft::iallreduce(comm, std::span<float>(data), weft::sum{});
    if (comm.rank() == 0) {
      RANK_CHECK(!call.wait_for(50ms));
      RANK_CHECK(!call.test());
    }
    call.wait();
    RANK_CHECK(data.front() == 4.0f);
  });
}

TEST_CASE("with a progress thread calls complete while the caller computes without calling weft",
          "[nonblocking]") {
  auto settings = test_options();
  settings.progress_thread = true;
  weft::inproc::run(
      4,
      [&](comm_t& comm) {
        std::vector<std::vector<float>> buffers(4, filled(50000, 1.0f));
        std::vector<request_t> calls;
        for (auto& buffer : buffers) calls.push_back(weft::iallreduce(comm, std::span<float>(buffer), weft::sum{}));
        // Only the progress threads move the calls now: wait for the results to appear in memory
        // the calls write, without test() or wait().
        const auto until = std::chrono::steady_clock::now() + 30s;
        bool done = false;
        while (!done && std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(5ms);
          done = calls.back().test();  // with the thread, test() only reads the state
        }
        RANK_CHECK(done);
        for (auto& call : calls) RANK_CHECK(call.wait().collective == "allreduce");
        for (auto& buffer : buffers) RANK_CHECK((buffer.front() == 4.0f && buffer.back() == 4.0f));
      },
      settings);
}
