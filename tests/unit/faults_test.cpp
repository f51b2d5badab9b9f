// Hostile but realistic inputs that once returned success with wrong data, crashed or waited out
// the whole timeout: piece sizes up to SIZE_MAX, sizes whose byte counts wrap, ranks calling
// different collectives without check mode, two threads on one communicator, a blocking send to
// this rank itself, dup() of a failed communicator, a size mismatch's error code, a rank's
// thread that cannot be started.
#include "../consistency_cases.hpp"
#include "../scoped_environment.hpp"
#include "../support.hpp"

#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <thread>

using namespace weft_test;
using Catch::Matchers::Contains;

namespace {

// Runs fn on p ranks; returns each rank's error (code and message), or nothing for a rank that
// returned normally.
struct outcome {
  bool failed = false;
  weft::errc code = weft::errc::transport;
  std::string message;
};

template <class Function>
std::vector<outcome> outcomes_on_ranks(int p, Function fn, weft::options settings) {
  std::vector<outcome> result(static_cast<std::size_t>(p));
  weft::inproc::run(
      p,
      [&](comm_t& comm) {
        auto& mine = result[static_cast<std::size_t>(comm.rank())];
        try {
          fn(comm);
        } catch (const weft::error& failure) {
          mine = {true, failure.code(), failure.what()};
        }
      },
      settings);
  return result;
}

// Every rank's allreduce of (rank + 1) over `count` floats, checked against the sum.
template <class Algorithm>
void allreduce_is_right(weft::options settings, Algorithm algorithm, std::size_t count, int p) {
  weft::inproc::run(
      p,
      [&](comm_t& comm) {
        std::vector<float> data(count, static_cast<float>(comm.rank() + 1));
        weft::allreduce(comm, std::span<float>(data), weft::sum{}, algorithm);
        const float want = static_cast<float>(p * (p + 1) / 2);
        RANK_CHECK(std::all_of(data.begin(), data.end(), [&](float v) { return v == want; }));
      },
      settings);
}

}  // namespace

TEST_CASE("piece sizes up to SIZE_MAX cut messages into one piece, not none", "[faults]") {
  for (const std::size_t piece : {std::numeric_limits<std::size_t>::max(), std::size_t{1} << 61,
                                  std::size_t{1} << 62, std::size_t{1} << 63}) {
    INFO("piece size " << piece);
    auto settings = test_options();
    settings.chunk_bytes = piece;
    settings.reduce_chunk_bytes = piece;
    for (const int p : {2, 3, 4}) {
      allreduce_is_right(settings, weft::ring{}, 1001, p);
      allreduce_is_right(settings, weft::recursive_halving{}, 1001, p);
      allreduce_is_right(settings, weft::double_binary_tree{}, 1001, p);
      allreduce_is_right(settings, weft::automatic{}, 1001, p);
      weft::inproc::run(
          p,
          [&](comm_t& comm) {
            std::vector<int> data(777, comm.rank() == 1 ? 42 : 0);
            weft::broadcast(comm, std::span<int>(data), 1, weft::ring{});
            RANK_CHECK(std::all_of(data.begin(), data.end(), [](int v) { return v == 42; }));
            std::vector<int> all(static_cast<std::size_t>(p) * 5, -1);
            std::vector<int> mine(5, comm.rank());
            weft::reduce_scatter(comm, std::span<const int>(all.data(), all.size()),
                                 std::span<int>(mine), weft::sum{}, weft::ring{});
            RANK_CHECK(mine[0] == -p);
          },
          settings);
    }
  }
}

TEST_CASE("sizes whose byte count wraps are refused before anything is sent", "[faults]") {
  std::vector<float> storage(16, 1.0f);
  const std::size_t huge = std::numeric_limits<std::size_t>::max() / 2;  // x 4 bytes wraps
  auto all_refused = [](const std::vector<outcome>& results, const char* fragment) {
    for (const auto& result : results) {
      INFO(result.message);
      CHECK(result.failed);
      CHECK(result.code == weft::errc::invalid_argument);
      CHECK_THAT(result.message, Contains(fragment) && Contains("nothing was sent"));
    }
  };
  const auto settings = test_options();
  all_refused(outcomes_on_ranks(
                  2,
                  [&](comm_t& comm) {
                    // A span whose byte count (huge x 4) wraps: never read, refused first.
                    std::span<float> wrapped(storage.data(), huge);
                    weft::allreduce(comm, wrapped, weft::sum{});
                  },
                  settings),
              "more bytes than a size_t counts");
  all_refused(outcomes_on_ranks(
                  3,
                  [&](comm_t& comm) {
                    // 3 x (SIZE_MAX / 3 + 1) elements wraps to 2: a 2-element output would match.
                    std::vector<char> out(2);
                    std::span<const char> mine(reinterpret_cast<const char*>(storage.data()),
                                               std::numeric_limits<std::size_t>::max() / 3 + 1);
                    weft::allgather(comm, mine, std::span<char>(out));
                  },
                  settings),
              "overflows");
  all_refused(outcomes_on_ranks(
                  2,
                  [&](comm_t& comm) {
                    const std::size_t counts[2] = {std::numeric_limits<std::size_t>::max(), 2};
                    std::vector<char> in(1), out(1);
                    weft::alltoallv(comm, std::span<const char>(in),
                                    std::span<const std::size_t>(counts), std::span<char>(out),
                                    std::span<const std::size_t>(counts));
                  },
                  settings),
              "add up to more elements");
}

TEST_CASE("ranks calling different collectives never complete with each other's data", "[faults]") {
  // Without check mode. Rank 0's direct allgather and rank 1's direct alltoall exchange blocks of
  // the same size with the same peers: before the collective was in the tag, both returned
  // success holding the other's data.
  auto settings = test_options();
  settings.timeout = std::chrono::milliseconds(300);
  const auto results = outcomes_on_ranks(
      2,
      [&](comm_t& comm) {
        std::vector<int> out(2, -1);
        if (comm.rank() == 0) {
          const int mine = 10;
          weft::allgather(comm, std::span<const int>(&mine, 1), std::span<int>(out),
                          weft::direct{});
        } else {
          const std::vector<int> in = {20, 21};
          weft::alltoall(comm, std::span<const int>(in), std::span<int>(out), weft::direct{});
        }
      },
      settings);
  for (const auto& result : results) {
    INFO(result.message);
    CHECK(result.failed);
    CHECK(result.code == weft::errc::mismatch);
  }
}

TEST_CASE("calls that differ on one rank fail with mismatch on every rank without check mode",
          "[faults]") {
  // Root, count, type, op, algorithm and kind, one rank at a time; a miss would show as a
  // timeout (60 s), not a mismatch.
  for (const int p : {2, 4}) {
    for (std::size_t which = 0; which < disagreements.size(); ++which) {
      for (const int odd : differing_ranks(which, p)) {
        INFO(p << " ranks: " << disagreements[which] << ", rank " << odd << " differs");
        failures sink;
        const auto started = std::chrono::steady_clock::now();
        weft::inproc::run(
            p, [&](comm_t& comm) { disagreement_case(comm, sink, which, odd); }, test_options());
        INFO(sink.summary());
        CHECK(sink.empty());
        CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
      }
    }
  }
}

TEST_CASE("a second thread inside a call on one communicator is refused", "[faults]") {
  auto settings = test_options();
  settings.timeout = std::chrono::seconds(30);
  std::atomic<bool> refused{false};
  std::string message;
  weft::inproc::run(
      2,
      [&](comm_t& comm) {
        if (comm.rank() == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          int value = 7;
          weft::send(comm, std::span<int>(&value, 1), 0);
          return;
        }
        std::thread intruder([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the owner is in recv
          std::vector<float> data(4, 1.0f);
          try {
            weft::allreduce(comm, std::span<float>(data));
          } catch (const weft::error& failure) {
            refused = failure.code() == weft::errc::invalid_argument;
            message = failure.what();
          }
        });
        int value = 0;
        weft::recv(comm, std::span<int>(&value, 1), 1);  // blocks until rank 1 sends
        intruder.join();
        RANK_CHECK(value == 7);
      },
      settings);
  INFO(message);
  CHECK(refused);
  CHECK_THAT(message, Contains("one thread at a time"));
}

TEST_CASE("a blocking send or receive to this rank itself is refused at once", "[faults]") {
  const auto started = std::chrono::steady_clock::now();
  const auto results = outcomes_on_ranks(
      2,
      [&](comm_t& comm) {
        int value = 1;
        if (comm.rank() == 0)
          weft::send(comm, std::span<int>(&value, 1), 0);
        else
          weft::recv(comm, std::span<int>(&value, 1), 1);
      },
      test_options());
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
  for (const auto& result : results) {
    INFO(result.message);
    CHECK(result.code == weft::errc::invalid_argument);
    CHECK_THAT(result.message, Contains("this rank itself") && Contains("sendrecv"));
  }
}

TEST_CASE("a failed communicator refuses dup, and a size mismatch is a mismatch", "[faults]") {
  auto settings = test_options();
  settings.timeout = std::chrono::milliseconds(200);
  const auto results = outcomes_on_ranks(
      2,
      [&](comm_t& comm) {
        if (comm.rank() == 1) return;  // never calls: rank 0 times out
        try {
          weft::barrier(comm);
        } catch (const weft::error& failure) {
          RANK_CHECK(failure.code() == weft::errc::timeout);
        }
        auto copy = comm.dup();  // refused
      },
      settings);
  INFO(results[0].message);
  CHECK(results[0].code == weft::errc::timeout);
  CHECK_THAT(results[0].message, Contains("refuses dup") && Contains("build a new communicator"));

  const auto sizes = outcomes_on_ranks(
      2,
      [&](comm_t& comm) {
        std::vector<int> data(comm.rank() == 0 ? 1 : 2, 5);
        if (comm.rank() == 0)
          weft::send(comm, std::span<int>(data), 1);
        else
          weft::recv(comm, std::span<int>(data), 0);
      },
      test_options());
  INFO(sizes[1].message);
  CHECK(sizes[1].code == weft::errc::mismatch);
  CHECK_THAT(sizes[1].message, Contains("expected 8 bytes"));
}

TEST_CASE("alltoallv counts that differ between two ranks fail every rank with mismatch",
          "[faults]") {
  for (const int p : {2, 3, 4}) {
    INFO(p << " ranks");
    failures sink;
    weft::inproc::run(
        p, [&](comm_t& comm) { splits_case(comm, sink); }, test_options());
    INFO(sink.summary());
    CHECK(sink.empty());
  }
}

TEST_CASE("a user reduction that throws on one rank fails every rank's call with its text",
          "[faults]") {
  for (const int p : {2, 3, 4}) {
    for (const int thrower : {0, p - 1}) {
      INFO(p << " ranks, rank " << thrower << " throws");
      failures sink;
      const auto started = std::chrono::steady_clock::now();
      weft::inproc::run(
          p, [&](comm_t& comm) { thrown_case(comm, sink, thrower); }, test_options());
      weft::inproc::run(
          p, [&](comm_t& comm) { thrown_case(comm, sink, thrower, weft::direct{}); },
          test_options());
      INFO(sink.summary());
      CHECK(sink.empty());
      CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
    }
  }
}

TEST_CASE("inproc::run that cannot start a rank's thread throws, it does not terminate",
          "[faults]") {
  // In a child process that may run only a few threads (RLIMIT_NPROC, which binds root only
  // once it is another user): thread creation fails part way, and run must throw naming the
  // rank (the process would otherwise end in std::terminate, SIGABRT).
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const bool root = ::geteuid() == 0;
    if (root && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);  // nobody
    // nobody runs nothing else here: this process and 3 threads; another user: none at all.
    const rlim_t most = root ? 4 : 1;
    const rlimit limit{most, most};
    if (::setrlimit(RLIMIT_NPROC, &limit) != 0) ::_exit(3);
    try {
      weft::inproc::run(64, [](comm_t& comm) { weft::barrier(comm); });
      ::_exit(4);  // every thread started: the limit did not bite
    } catch (const weft::error& failure) {
      const std::string_view said = failure.what();
      ::_exit(failure.code() == weft::errc::transport &&
                      said.find("could not start the thread of rank") != std::string_view::npos
                  ? 0
                  : 1);
    } catch (...) {
      ::_exit(2);
    }
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  INFO("child status "
       << status
       << " (exit 0: the error; 3: no limit; 4: the limit did not bite; signal 6: terminate)");
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("errors on a split communicator name every rank as the job numbers it", "[faults]") {
  // As the host-local communicators of a tiered world: world ranks 1 and 3 form one. Its rank 1
  // (world rank 3) waits for its rank 0 (world rank 1), which never sends.
  auto settings = test_options();
  settings.timeout = std::chrono::milliseconds(300);
  const auto results = outcomes_on_ranks(
      4,
      [&](comm_t& comm) {
        auto odd = comm.split(comm.rank() % 2, comm.rank());
        if (comm.rank() == 3) {
          std::vector<int> data(4);
          weft::recv(odd, std::span<int>(data), 0);
        }
      },
      settings);
  INFO(results[3].message);
  CHECK(results[3].code == weft::errc::timeout);
  CHECK_THAT(results[3].message, Contains("rank 3 (rank 1 of this communicator) waited") &&
                                     Contains("from rank 1 (rank 0 of this communicator)"));
  CHECK_THAT(results[3].message, !Contains("from rank 0 ") && !Contains("world rank"));
}

TEST_CASE(
    "the flight recorder keeps each communicator's last calls and writes them when a call fails",
    "[faults][recorder]") {
  const auto directory =
      std::filesystem::temp_directory_path() / ("weft-records-" + std::to_string(::getpid()));
  std::filesystem::remove_all(directory);
  weft_test::scoped_environment records("WEFT_RECORDER_DIR", directory.c_str());
  auto settings = test_options();
  settings.timeout = std::chrono::milliseconds(300);
  settings.recorder_calls = 4;  // keeps the last 4 of 6 calls
  const auto results = outcomes_on_ranks(
      3,
      [&](comm_t& comm) {
        std::vector<int> data(100, 1);
        for (int call = 0; call < 5; ++call)
          weft::allreduce(comm, std::span<int>(data), weft::sum{}, weft::ring{});
        const auto kept = comm.recorder()->calls();
        RANK_CHECK(kept.size() == 4u);
        RANK_CHECK((kept.front().number == 2u && kept.back().number == 5u));
        RANK_CHECK(kept.back().state == weft::recorded_call::outcome::done);
        RANK_CHECK((kept.back().signature.count == 100u &&
                    std::string(kept.back().signature.type.data()) == "int32" &&
                    std::string(kept.back().signature.op.data()) == "sum" &&
                    std::string(kept.back().signature.algorithm.data()) == "ring"));
        if (comm.rank() == 2) return;  // never makes the 6th call: the others time out
        weft::allreduce(comm, std::span<int>(data), weft::sum{}, weft::ring{});
      },
      settings);
  CHECK(results[0].failed);
  CHECK(results[1].failed);
  for (const int rank : {0, 1}) {
    INFO("rank " << rank);
    std::ifstream file(directory / ("rank-" + std::to_string(rank) + ".jsonl"));
    REQUIRE(file);
    std::stringstream text;
    text << file.rdbuf();
    const std::string lines = text.str();
    CHECK_THAT(lines, Contains("\"record\":\"header\",\"world_rank\":" + std::to_string(rank)));
    CHECK_THAT(
        lines,
        Contains("\"number\":6,\"collective\":\"allreduce\",\"count\":100,\"type\":\"int32\"") &&
            Contains("\"state\":\"failed\"") && Contains("\"number\":5,") &&
            !Contains("\"number\":2,"));
  }
  CHECK_FALSE(std::filesystem::exists(directory / "rank-2.jsonl"));  // rank 2 did not fail
  std::filesystem::remove_all(directory);

  settings.recorder_calls = 0;
  weft::inproc::run(
      2,
      [&](comm_t& comm) {
        std::vector<int> data(10, 1);
        weft::allreduce(comm, std::span<int>(data), weft::sum{});
        RANK_CHECK(comm.recorder() == nullptr);
      },
      settings);
}
