// The fault-tolerant agreement in the store (weft/bootstrap/agreement.hpp) and the TCP store's
// look, on which it polls: members as threads, each with its own connection, and members as
// processes that die.
#include <weft/bootstrap/agreement.hpp>
#include <weft/bootstrap/file_store.hpp>
#include <weft/bootstrap/tcp_store.hpp>

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using weft::bootstrap::store;

// A fresh directory for a file store, removed at the end.
struct scratch_directory {
  std::filesystem::path path;
  scratch_directory() {
    char name[] = "/tmp/weft-agreement-XXXXXX";
    path = ::mkdtemp(name);
  }
  ~scratch_directory() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

// Each member's view of one round, run on threads: member i takes flags[i]; members in `absent`
// never come.
std::vector<weft::bootstrap::store_agreement> round_on_threads(
    const std::function<std::unique_ptr<store>()>& connect, const std::vector<std::uint64_t>& flags,
    const std::vector<int>& absent, std::chrono::milliseconds timeout) {
  const int n = static_cast<int>(flags.size());
  std::vector<int> members;
  for (int i = 0; i < n; ++i) members.push_back(i);
  std::vector<std::unique_ptr<store>> connections;
  std::vector<std::unique_ptr<weft::bootstrap::liveness>> alive;
  for (int i = 0; i < n; ++i) {
    connections.push_back(connect());
    alive.push_back(std::make_unique<weft::bootstrap::liveness>(*connections.back(), "t", i));
  }
  std::vector<weft::bootstrap::store_agreement> results(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  const auto deadline = weft::deadline_clock::now() + timeout;
  for (int i = 0; i < n; ++i) {
    if (std::find(absent.begin(), absent.end(), i) != absent.end()) continue;
    threads.emplace_back([&, i] {
      results[static_cast<std::size_t>(i)] =
          weft::bootstrap::agree_in_store(*alive[static_cast<std::size_t>(i)], "t/round", members,
                                          i, flags[static_cast<std::size_t>(i)], deadline);
    });
  }
  for (auto& thread : threads) thread.join();
  return results;
}

// A connector to each kind of store: a file store in a fresh directory, and a TCP store served
// here.
struct both_stores {
  scratch_directory directory;
  weft::bootstrap::tcp_store_server server{"127.0.0.1", 0, "s"};
  using connector = std::function<std::unique_ptr<store>()>;
  std::vector<std::pair<const char*, connector>> kinds = {
      {"file store",
       [this] { return std::make_unique<weft::bootstrap::file_store>(directory.path); }},
      {"tcp store", [this] {
         return std::make_unique<weft::bootstrap::tcp_store>("127.0.0.1", server.port(), "s",
                                                             weft::deadline_clock::now() + 5s);
       }}};
};

}  // namespace

TEST_CASE("the tcp store's look answers at once, set or not, and the connection goes on",
          "[bootstrap][store][agreement]") {
  weft::bootstrap::tcp_store_server server("127.0.0.1", 0, "s");
  weft::bootstrap::tcp_store client("127.0.0.1", server.port(), "s",
                                    weft::deadline_clock::now() + 5s);
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(client.look("nothing").has_value());
  client.set("key", "value");
  CHECK(client.look("key") == std::optional<std::string>("value"));
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  // The same connection serves a wait afterwards (a get whose deadline passed would have left it).
  CHECK(client.get("key", weft::deadline_clock::now() + 1s) == std::optional<std::string>("value"));
}

TEST_CASE("an agreement: the AND of every member's flag, nobody lost, the same on each",
          "[bootstrap][agreement]") {
  both_stores stores;
  for (const auto& [name, connect] : stores.kinds) {
    SECTION(name) {
      const auto results = round_on_threads(connect, {0b1111, 0b1101, 0b0111, 0b1101}, {}, 10s);
      for (const auto& result : results) {
        CHECK(result.flag == 0b0101);
        CHECK(result.lost.empty());
      }
    }
  }
}

TEST_CASE("a member that never comes is counted lost by the deadline, and told so when it comes",
          "[bootstrap][agreement]") {
  scratch_directory directory;
  auto connect = [&] { return std::make_unique<weft::bootstrap::file_store>(directory.path); };
  const auto start = std::chrono::steady_clock::now();
  const auto results = round_on_threads(connect, {1, 1, 1, 0}, {3}, 300ms);
  CHECK(std::chrono::steady_clock::now() - start >= 300ms);
  for (int i = 0; i < 3; ++i) {
    const auto& result = results[static_cast<std::size_t>(i)];
    CHECK(result.flag == 1);  // the absent member's 0 never counted
    REQUIRE(result.lost == std::vector<int>{3});
    CHECK_THAT(result.why.front(), Catch::Contains("did not come to the agreement"));
  }
  // Late: the others' verdict stands, and it is told so.
  auto late = connect();
  weft::bootstrap::liveness alive(*late, "t", 3);
  try {
    weft::bootstrap::agree_in_store(alive, "t/round", {0, 1, 2, 3}, 3, 1,
                                    weft::deadline_clock::now() + 1s);
    FAIL("a member counted lost took part");
  } catch (const weft::error& failure) {
    CHECK(failure.code() == weft::errc::peer_lost);
    CHECK_THAT(failure.what(), Catch::Contains("came to an agreement too late"));
  }
}

TEST_CASE("a member whose process ended is counted lost at once, not at the deadline",
          "[bootstrap][agreement]") {
  // The file store sees the process end through a pidfd; the TCP store also by its lifeline (the
  // store claims the member gone when its connection closes).
  both_stores stores;
  for (const auto& [name, connect] : stores.kinds) {
    SECTION(name) {
      int ready[2];
      REQUIRE(::pipe(ready) == 0);
      const pid_t child = ::fork();
      REQUIRE(child >= 0);
      if (child == 0) {  // member 2: leaves its identity and lifeline, then waits to be killed
        auto own = connect();
        weft::bootstrap::liveness alive(*own, "t", 2);
        const char said = 1;
        static_cast<void>(::write(ready[1], &said, 1));
        ::pause();
        ::_exit(0);
      }
      char said = 0;
      REQUIRE(::read(ready[0], &said, 1) == 1);
      ::close(ready[0]);
      ::close(ready[1]);
      ::kill(child, SIGKILL);  // (not reaped yet: a zombie is gone too)
      std::vector<std::unique_ptr<store>> connections;
      std::vector<std::unique_ptr<weft::bootstrap::liveness>> alive;
      for (int i = 0; i < 2; ++i) {
        connections.push_back(connect());
        alive.push_back(std::make_unique<weft::bootstrap::liveness>(*connections.back(), "t", i));
      }
      const auto start = std::chrono::steady_clock::now();
      std::vector<weft::bootstrap::store_agreement> results(2);
      std::vector<std::thread> threads;
      for (int i = 0; i < 2; ++i) {
        threads.emplace_back([&, i] {
          results[static_cast<std::size_t>(i)] =
              weft::bootstrap::agree_in_store(*alive[static_cast<std::size_t>(i)], "t/round",
                                              {0, 1, 2}, i, 1, weft::deadline_clock::now() + 30s);
        });
      }
      for (auto& thread : threads) thread.join();
      CHECK(std::chrono::steady_clock::now() - start < 5s);
      for (const auto& result : results) {
        REQUIRE(result.lost == std::vector<int>{2});
        CHECK_THAT(result.why.front(), Catch::Contains("ended"));
      }
      ::waitpid(child, nullptr, 0);
    }
  }
}
