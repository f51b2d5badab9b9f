// Calls in flight (weft/nonblocking.hpp) over the in-process transport: the collective matrix
// again with 1, 2 and 8 calls in flight between computations, calls of different collectives
// completing in order, errors and timeouts surfacing at wait, argument errors at the call,
// point-to-point in flight matching blocking calls, and the progress thread.
#include "matrix_cases.hpp"

#include <weft/group.hpp>
#include <weft/nonblocking.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <latch>
#include <numeric>
#include <stdexcept>
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

std::vector<float> filled(std::size_t count, float value) {
  return std::vector<float>(count, value);
}

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

TEST_CASE(
    "calls of different collectives in flight complete in the order issued with their results",
    "[nonblocking]") {
  const int p = GENERATE(2, 3, 4, 7);
  weft::inproc::run(p, [&](comm_t& comm) {
    const int r = comm.rank();
    constexpr std::size_t n = 5000;
    auto summed = filled(n * static_cast<std::size_t>(p), static_cast<float>(r + 1));
    auto broadcasted = filled(n, static_cast<float>(r == p - 1 ? 42 : -1));
    std::vector<int> sent(static_cast<std::size_t>(p) * 3), received(sent.size());
    for (std::size_t i = 0; i < sent.size(); ++i) sent[i] = r * 1000 + static_cast<int>(i);
    std::array requests{
        weft::iallreduce(comm, std::span<float>(summed), weft::sum{}, weft::ring{}),
        weft::ibroadcast(comm, std::span<float>(broadcasted), p - 1),
        weft::ialltoall(comm, std::span<const int>(sent), std::span<int>(received))};
    // Waiting for the last completes the ones before it: their test() is true without moving
    // anything.
    const weft::report last = requests[2].wait();
    RANK_CHECK(last.collective == "alltoall");
    const bool first_done = requests[0].test();
    const bool second_done = requests[1].test();
    RANK_CHECK(first_done);
    RANK_CHECK(second_done);
    RANK_CHECK(requests[0].result().collective == "allreduce");
    RANK_CHECK(requests[0].result().algorithm == "ring");
    RANK_CHECK(requests[1].result().collective == "broadcast");
    const float want = static_cast<float>(p * (p + 1) / 2);
    RANK_CHECK(std::all_of(summed.begin(), summed.end(), [&](float x) { return x == want; }));
    RANK_CHECK(
        std::all_of(broadcasted.begin(), broadcasted.end(), [](float x) { return x == 42.0f; }));
    for (int from = 0; from < p; ++from) {
      for (int i = 0; i < 3; ++i) {
        RANK_CHECK(received[static_cast<std::size_t>(from * 3 + i)] == from * 1000 + r * 3 + i);
      }
    }
  });
}

TEST_CASE(
    "a blocking call completes the calls in flight first; a dropped handle's call completes too",
    "[nonblocking]") {
  weft::inproc::run(4, [&](comm_t& comm) {
    auto data = filled(100000, 1.0f);
    auto kept = filled(1000, static_cast<float>(comm.rank()));
    weft::iallreduce(comm, std::span<float>(data), weft::sum{});  // handle dropped at once
    auto broadcast = weft::ibroadcast(comm, std::span<float>(kept), 3);
    std::vector<int> mine(1, comm.rank()), all(4);
    weft::allgather(comm, std::span<const int>(mine), std::span<int>(all));
    const bool broadcast_done = broadcast.test();
    RANK_CHECK(broadcast_done);  // the blocking allgather completed it
    RANK_CHECK((data.front() == 4.0f && data.back() == 4.0f));
    RANK_CHECK((kept.front() == 3.0f && kept.back() == 3.0f));
    RANK_CHECK(all == std::vector<int>({0, 1, 2, 3}));
    // split and dup also start after the calls in flight.
    auto again = weft::iallreduce(comm, std::span<float>(data), weft::sum{});
    auto pair = comm.split(comm.rank() / 2, comm.rank());
    const bool again_done = again.test();
    RANK_CHECK(again_done);
    RANK_CHECK(data.front() == 16.0f);
    RANK_CHECK(pair.size() == 2);
  });
}

TEST_CASE("an argument error is thrown by the call itself and nothing is put in flight",
          "[nonblocking]") {
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
    request_t empty;
    bool empty_refused = false;
    try {
      empty.wait();
    } catch (const weft::error& failure) {
      empty_refused = failure.code() == weft::errc::invalid_argument;
    }
    RANK_CHECK(empty_refused);
    // The communicator still works, and the next calls match across ranks.
    auto done = weft::iallreduce(comm, std::span<float>(in), weft::sum{});
    done.wait();
    RANK_CHECK(in.front() == 3.0f);
  });
}

TEST_CASE(
    "a timeout in flight is thrown by wait with the blocking call's message; later calls are "
    "refused",
    "[nonblocking]") {
  auto settings = test_options();
  settings.timeout = 300ms;
  std::vector<std::string> messages(3);
  std::latch both_issued(2);
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
        // The first's last wait (for what rank 2 never sends) must begin well before the second's
        // first: rank 1's ring steps wait on rank 0's sends, so both ranks issue before either
        // drives its call as far as it goes, then the second starts 100 ms later. Its own 300 ms
        // are then not up when the first's failure cancels it, however the threads are scheduled.
        both_issued.arrive_and_wait();
        const auto drive_until = std::chrono::steady_clock::now() + 100ms;
        while (std::chrono::steady_clock::now() < drive_until) {
          static_cast<void>(first.test());
          std::this_thread::sleep_for(1ms);
        }
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
    CHECK(message.find("cancelled allreduce in flight: this communicator failed earlier") !=
          std::string::npos);
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
      const bool first_done = first.test();
      RANK_CHECK(first_done);
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
      const bool early = call.wait_for(50ms);
      const bool tested = call.test();
      RANK_CHECK(!early);
      RANK_CHECK(!tested);
    }
    call.wait();
    RANK_CHECK(data.front() == 4.0f);
  });
}

TEST_CASE("wait_for with the longest durations waits for the call instead of overflowing",
          "[nonblocking]") {
  weft::inproc::run(2, [&](comm_t& comm) {
    auto data = filled(1000, 2.0f);
    if (comm.rank() == 1) std::this_thread::sleep_for(200ms);
    auto call = weft::iallreduce(comm, std::span<float>(data), weft::sum{});
    const bool done = comm.rank() == 0 ? call.wait_for(std::chrono::seconds::max())
                                       : call.wait_for(std::chrono::nanoseconds::max());
    RANK_CHECK(done);
    RANK_CHECK(data.front() == 4.0f);
    auto second = weft::iallreduce(comm, std::span<float>(data), weft::sum{});
    const bool hours = second.wait_for(std::chrono::hours::max());
    RANK_CHECK(hours);
    RANK_CHECK(data.back() == 8.0f);
  });
  const auto before = weft::deadline_clock::now();
  const auto passed = weft::deadline_after(std::chrono::seconds(-5));
  const auto soon = weft::deadline_after(std::chrono::seconds(10));
  const auto after = weft::deadline_clock::now();
  CHECK((passed >= before && passed <= after));
  CHECK((soon >= before + std::chrono::seconds(10) && soon <= after + std::chrono::seconds(10)));
  CHECK(weft::deadline_after(std::chrono::hours::max()) == weft::deadline_clock::time_point::max());
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
        for (auto& buffer : buffers)
          calls.push_back(weft::iallreduce(comm, std::span<float>(buffer), weft::sum{}));
        // Only the progress threads move the calls now: wait for the results to appear in memory
        // the calls write, without test() or wait().
        const auto until = std::chrono::steady_clock::now() + 30s;
        bool done = false;
        while (!done && std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(5ms);
          done = calls.back().test();  // with the thread, test() only reads the state
        }
        RANK_CHECK(done);
        for (auto& call : calls) {
          const weft::report done_call = call.wait();
          RANK_CHECK(done_call.collective == "allreduce");
        }
        for (auto& buffer : buffers) RANK_CHECK((buffer.front() == 4.0f && buffer.back() == 4.0f));
      },
      settings);
}

// ---- groups ------------------------------------------------------------------------------------

namespace {

// Values whose float sums depend on the order they are added in.
template <class T>
std::vector<T> awkward(int rank, std::size_t count, std::size_t salt) {
  std::vector<T> result(count);
  for (std::size_t i = 0; i < count; ++i) {
    const double x = std::sin(static_cast<double>(rank * 7919 + i * 104729 + salt)) * 1e3 +
                     1.0 / static_cast<double>(i + 3);
    if constexpr (std::is_integral_v<T>) {
      result[i] = static_cast<T>(static_cast<long long>(x * 1000) % 100000);
    } else {
      result[i] = static_cast<T>(x);
    }
  }
  return result;
}

// Allreduces of `sizes` issued in one group and, on copies, one by one: bits must agree; returns
// how many handles said they were fused.
template <class T, class Op, class Algorithm>
int grouped_against_separate(comm_t& comm, const std::vector<std::size_t>& sizes, failures& sink) {
  std::vector<std::vector<T>> grouped, separate;
  for (std::size_t k = 0; k < sizes.size(); ++k)
    grouped.push_back(awkward<T>(comm.rank(), sizes[k], k));
  separate = grouped;
  std::vector<request_t> handles;
  {
    weft::group together(comm);
    for (auto& data : grouped)
      handles.push_back(weft::iallreduce(comm, std::span<T>(data), Op{}, Algorithm{}));
  }
  for (auto& data : separate) weft::allreduce(comm, std::span<T>(data), Op{}, Algorithm{});
  int fused = 0;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const weft::report done = handles[k].wait();
    if (handles[k].fused()) {
      ++fused;
      if (done.calls < 2)
        sink.add("a fused handle reports " + std::to_string(done.calls) + " calls");
    }
    check_bits<T>(sink,
                  "grouped allreduce " + std::string(Algorithm::name) + " " +
                      std::string(weft::detail::type_name<T>()) + " size " +
                      std::to_string(sizes[k]),
                  comm.rank(), grouped[k], separate[k]);
  }
  return fused;
}

}  // namespace

TEST_CASE("allreduces fused by a group give the bits separate calls give", "[nonblocking][group]") {
  const int p = GENERATE(1, 2, 3, 5, 8);
  failures sink;
  weft::inproc::run(p, [&](comm_t& comm) {
    const std::vector<std::size_t> sizes = {1, 7, 100, 1000, 3, 4096, 0, 555};
    // Kept bits whatever the order: integers fuse under every algorithm.
    {
      const int fused =
          grouped_against_separate<std::int32_t, weft::sum, weft::ring>(comm, sizes, sink);
      RANK_CHECK(fused == 7);
    }
    {
      const int fused =
          grouped_against_separate<std::int64_t, weft::prod, weft::automatic>(comm, sizes, sink);
      RANK_CHECK(fused == 7);
    }
    // Floats fuse under the algorithms that keep every element's order ...
    {
      const int fused =
          grouped_against_separate<float, weft::sum, weft::recursive_doubling>(comm, sizes, sink);
      RANK_CHECK(fused == 7);
    }
    {
      const int fused =
          grouped_against_separate<double, weft::sum, weft::direct>(comm, sizes, sink);
      RANK_CHECK(fused == 7);
    }
    {
      const int fused =
          grouped_against_separate<weft::bfloat16, weft::max, weft::recursive_doubling>(comm, sizes,
                                                                                        sink);
      RANK_CHECK(fused == 7);
    }
    // ... and not under the others (their order depends on where an element sits).
    {
      const int fused = grouped_against_separate<float, weft::sum, weft::ring>(comm, sizes, sink);
      RANK_CHECK(fused == 0);
    }
    // Under automatic, where each call's own choice keeps the order (small calls here).
    const int fused =
        grouped_against_separate<float, weft::avg, weft::automatic>(comm, sizes, sink);
    RANK_CHECK((fused == 0 || fused >= 2));
  });
  INFO("ranks " << p);
  CHECK(sink.empty());
  if (!sink.empty()) FAIL(sink.summary());
}

TEST_CASE("a group starts its calls in order when it ends and fuses only what it may",
          "[nonblocking][group]") {
  auto settings = test_options();
  settings.fuse_bytes = 4000;
  weft::inproc::run(
      4,
      [&](comm_t& comm) {
        std::vector<int> small_a(10, 1), small_b(20, 2), small_c(20, 2), large(2000, 3),
            source(10, 1), out_of_place(10);
        std::vector<float> other_type(10, 1.0f);
        std::vector<int> broadcasted(5, comm.rank());
        std::vector<request_t> handles;
        {
          weft::group outer(comm);
          handles.push_back(
              weft::iallreduce(comm, std::span<int>(small_a), weft::sum{}, weft::ring{}));
          {
            weft::group inner(comm);  // nested: starts nothing of its own
            handles.push_back(weft::ibroadcast(comm, std::span<int>(broadcasted), 1));
            handles.push_back(
                weft::iallreduce(comm, std::span<int>(large), weft::sum{}, weft::ring{}));
          }
          handles.push_back(
              weft::iallreduce(comm, std::span<float>(other_type), weft::sum{}, weft::ring{}));
          handles.push_back(weft::iallreduce(comm, std::span<const int>(source),
                                             std::span<int>(out_of_place), weft::sum{},
                                             weft::ring{}));
          handles.push_back(
              weft::iallreduce(comm, std::span<int>(small_c), weft::max{}, weft::ring{}));
          handles.push_back(
              weft::iallreduce(comm, std::span<int>(small_b), weft::sum{}, weft::ring{}));
          bool refused = false;
          try {
            handles.front().wait();  // inside the group: would never return
          } catch (const weft::error& failure) {
            refused = failure.code() == weft::errc::invalid_argument;
          }
          RANK_CHECK(refused);
        }
        for (auto& handle : handles) handle.wait();
        // small_a and small_b fuse (int, sum, ring, both <= 4000 bytes); large is over the limit,
        // other_type another type, out_of_place not in place, small_c alone of its op.
        const std::vector<bool> fused = {true, false, false, false, false, false, true};
        for (std::size_t k = 0; k < handles.size(); ++k) RANK_CHECK(handles[k].fused() == fused[k]);
        RANK_CHECK(handles[0].result().calls == 2);
        RANK_CHECK(small_a[0] == 4);
        RANK_CHECK(out_of_place[0] == 4);
        RANK_CHECK(broadcasted[0] == 1);
        RANK_CHECK(large[0] == 12);
        RANK_CHECK(other_type[0] == 4.0f);
        RANK_CHECK(small_b[0] == 8);
        RANK_CHECK(small_c[0] == 2);
      },
      settings);
}

TEST_CASE("a group left by an exception on one rank fails the others' calls with mismatch at once",
          "[nonblocking][group]") {
  auto settings = test_options();
  settings.timeout = std::chrono::seconds(30);  // what the others would wait without being told
  for (const int leaver : {0, 2}) {
    INFO("rank " << leaver << " leaves its group");
    std::vector<std::string> messages(3);
    const auto started = std::chrono::steady_clock::now();
    weft::inproc::run(
        3,
        [&](comm_t& comm) {
          std::string& message = messages[static_cast<std::size_t>(comm.rank())];
          std::vector<int> a(10, 1), b(1000, 2);
          std::vector<request_t> handles;
          try {
            weft::group together(comm);
            handles.push_back(weft::iallreduce(comm, std::span<int>(a), weft::sum{}));
            handles.push_back(weft::iallreduce(comm, std::span<int>(b), weft::sum{}));
            if (comm.rank() == leaver) throw std::runtime_error("the caller gave up");
          } catch (const std::runtime_error&) {
          }
          for (auto& handle : handles) {
            try {
              handle.wait();
              message += "completed; ";
            } catch (const weft::error& failure) {
              message += std::string(failure.what()) + "; ";
            }
          }
          try {
            weft::barrier(comm);
            message += "barrier completed";
          } catch (const weft::error& failure) {
            message += std::string("barrier: ") + failure.what();
          }
        },
        settings);
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
    for (int rank = 0; rank < 3; ++rank) {
      const std::string& message = messages[static_cast<std::size_t>(rank)];
      INFO("rank " << rank << ": " << message);
      CHECK(message.find("completed") == std::string::npos);
      CHECK(message.find("barrier: ") != std::string::npos);
      if (rank == leaver) {
        CHECK(message.find("was not started: its weft::group was left by an exception") !=
              std::string::npos);
      } else {
        CHECK(message.find("weft: mismatch") == 0);
        CHECK(message.find("rank " + std::to_string(leaver) +
                           " left a weft::group by an exception") != std::string::npos);
      }
    }
  }
}
