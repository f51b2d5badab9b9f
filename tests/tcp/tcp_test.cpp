// The TCP transport and the bootstrap, in one process: each rank is a thread with its own
// transport, sockets and store client, meeting through a store served on loopback. The
// multi-process runs (weft-run, mpirun, killed ranks, network namespaces) are in
// tests/multiprocess/multiprocess.py.
#include "../collective_cases.hpp"
#include "../consistency_cases.hpp"
#include "../scoped_environment.hpp"
#include "../slice_in_flight.hpp"
#include "../transport_conformance.hpp"

#include <weft/bootstrap/environment.hpp>
#include <weft/bootstrap/file_store.hpp>
#include <weft/transport/tcp.hpp>

#include <catch2/catch.hpp>

#include <sched.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <thread>

using namespace weft_test;
using namespace std::chrono_literals;

namespace {

using tcp_comm = weft::communicator<weft::tcp::transport>;
constexpr const char* secret = "tcp-test-secret";

weft::tcp::config test_config(std::chrono::milliseconds timeout = 20s) {
  weft::tcp::config settings;
  settings.secret = secret;
  settings.connect_timeout = timeout;
  settings.bind_address = "127.0.0.1";
  return settings;
}

// A job of `size` thread-ranks meeting through one store.
class job {
 public:
  explicit job(int size) : size_(size) {}

  weft::tcp::transport make(int rank, const weft::tcp::config& settings = test_config()) {
    weft::bootstrap::tcp_store meeting("127.0.0.1", server_.port(), secret,
                                       weft::deadline_clock::now() + settings.connect_timeout);
    return weft::tcp::transport(rank, size_, &meeting, settings);
  }

  unsigned short store_port() const { return server_.port(); }
  const weft::bootstrap::tcp_store_server& server() const { return server_; }

  // Runs fn(comm) on every rank; exceptions are recorded in sink.
  void run(failures& sink, const std::function<void(tcp_comm&)>& fn, std::size_t chunk = 4096,
           const weft::tcp::config& settings = test_config()) {
    std::vector<std::thread> threads;
    for (int rank = 0; rank < size_; ++rank) {
      threads.emplace_back([&, rank] {
        try {
          auto transport = make(rank, settings);
          tcp_comm comm(transport, test_options(chunk));
          fn(comm);
        } catch (const std::exception& failure) {
          sink.add("rank " + std::to_string(rank) + " threw: " + failure.what());
        }
      });
    }
    for (auto& thread : threads) thread.join();
  }

 private:
  int size_;
  weft::bootstrap::tcp_store_server server_{"127.0.0.1", 0, secret};
};

std::span<const std::byte> bytes_of(const auto& values) { return std::as_bytes(std::span(values)); }
std::span<std::byte> writable_bytes_of(auto&& values) {
  return std::as_writable_bytes(std::span(values));
}

bool wait_for(weft::tcp::transport& transport, weft::tcp::transport::request& request,
              std::chrono::milliseconds limit = 20s) {
  return transport.wait(request, weft::deadline_clock::now() + limit);
}

// Runs fn(rank, transport) on two thread-ranks, each having first run prepare(rank) before its
// transport is made with `settings`; exceptions are recorded in sink.
void two_ranks(failures& sink, const std::function<void(int, weft::tcp::transport&)>& fn,
               const std::function<void(int)>& prepare = {},
               const weft::tcp::config& settings = test_config()) {
  job world(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        if (prepare) prepare(rank);
        auto transport = world.make(rank, settings);
        fn(rank, transport);
      } catch (const std::exception& failure) {
        sink.add("rank " + std::to_string(rank) + " threw: " + failure.what());
      }
    });
  }
  for (auto& thread : threads) thread.join();
}

// The large-message tests' payload: word i is i * 2654435761 (mod 2^32).
std::vector<std::uint32_t> pattern(std::size_t count) {
  std::vector<std::uint32_t> words(count);
  for (std::size_t i = 0; i < count; ++i) words[i] = static_cast<std::uint32_t>(i * 2654435761u);
  return words;
}
void check_pattern(const std::vector<std::uint32_t>& words, failures& sink,
                   const std::string& when) {
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (words[i] != static_cast<std::uint32_t>(i * 2654435761u)) {
      sink.add("rank 1: word " + std::to_string(i) + " wrong " + when);
      return;
    }
  }
}

// Rank 1 tells rank 0 it is done (tag 8), so neither closes while the other still reads.
void final_word(weft::tcp::transport& transport, int rank, failures& sink) {
  int done = rank;
  auto word = rank == 0 ? transport.recv(1, writable_bytes_of(std::span(&done, 1)), 8)
                        : transport.send(0, bytes_of(std::span(&done, 1)), 8);
  if (!wait_for(transport, word)) sink.add("rank " + std::to_string(rank) + ": no final word");
}

// int32 elements past a connection's 64 KiB inbox (4 times past it unless quick).
std::size_t past_inbox() { return quick() ? 16411 : 65539; }

}  // namespace

TEST_CASE("conformance: the tcp transport", "[tcp]") {
  job three(3);
  failures sink;
  transport_conformance_ranks(sink, [&](int rank) { return three.make(rank); });
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("calls that differ on one rank fail with mismatch on every rank over tcp", "[tcp]") {
  constexpr int p = 4;
  for (std::size_t which = 0; which < disagreements.size(); ++which) {
    for (const int odd : differing_ranks(which, p)) {
      INFO(disagreements[which] << ", rank " << odd << " differs");
      failures sink;
      job world(p);
      const auto started = std::chrono::steady_clock::now();
      world.run(sink, [&](tcp_comm& comm) { disagreement_case(comm, sink, which, odd); });
      INFO(sink.summary());
      CHECK(sink.empty());
      CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
    }
  }
}

TEST_CASE("alltoallv counts that differ between two ranks fail every rank with mismatch over tcp",
          "[tcp]") {
  failures sink;
  job world(3);
  world.run(sink, [&](tcp_comm& comm) { splits_case(comm, sink); });
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("a user reduction that throws on one rank fails every rank's call with its text over tcp",
          "[tcp]") {
  for (const int thrower : {0, 3}) {
    INFO("rank " << thrower << " throws");
    failures sink;
    job world(4);
    const auto started = std::chrono::steady_clock::now();
    world.run(sink, [&](tcp_comm& comm) { thrown_case(comm, sink, thrower); });
    INFO(sink.summary());
    CHECK(sink.empty());
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
  }
}

TEST_CASE("every collective and algorithm over tcp, 1 to 5 ranks", "[tcp]") {
  const int p = GENERATE(1, 2, 3, 4, 5);
  job world(p);
  failures sink;
  const std::vector<std::size_t> counts = {0, 1, static_cast<std::size_t>(p) + 1, 1000,
                                           past_inbox()};
  world.run(sink, [&](tcp_comm& comm) { collective_slice(comm, sink, counts); });
  INFO("ranks " << p << ": " << sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("the collective slice as 3 calls in flight at once over tcp", "[tcp][nonblocking]") {
  const int p = GENERATE(2, 3);
  job world(p);
  failures sink;
  const std::vector<std::size_t> counts = {0, 1, static_cast<std::size_t>(p) + 1, 1000,
                                           past_inbox()};
  world.run(sink, [&](tcp_comm& comm) { collective_slice_in_flight(comm, sink, counts); });
  INFO("ranks " << p << ": " << sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("large messages cross tcp intact, bitwise equal on every rank", "[tcp]") {
  job world(3);
  failures sink;
  constexpr std::size_t count = std::size_t{8} << 20;  // 32 MiB of floats
  world.run(
      sink,
      [&](tcp_comm& comm) {
        std::vector<float> data(count);
        std::mt19937 random(static_cast<unsigned>(comm.rank()) + 11);
        std::uniform_real_distribution<float> uniform(-1, 1);
        for (auto& x : data) x = uniform(random);
        weft::allreduce(comm, std::span<float>(data), weft::sum{}, weft::ring{});
        std::vector<float> first(data.begin(), data.begin() + 1024);
        // Everyone compares with rank 0's result, bit for bit.
        std::vector<float> rank0 = data;
        weft::broadcast(comm, std::span<float>(rank0), 0);
        if (std::memcmp(rank0.data(), data.data(), count * sizeof(float)) != 0) {
          sink.add("rank " + std::to_string(comm.rank()) + " differs from rank 0");
        }
      },
      1 << 20);
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("a reduction's pieces: the option's size, else tcp's measured one; results stay exact",
          "[tcp]") {
  const std::size_t measured = weft::tuning::constants_for("tcp").reduce_chunk_bytes;
  REQUIRE(measured > 0);
  job world(3);
  failures sink;
  world.run(sink, [&](tcp_comm& comm) {
    auto settings = comm.settings();
    settings.chunk_bytes = std::size_t{1} << 20;
    settings.reduce_chunk_bytes = 0;  // the transport's own
    comm.set_settings(settings);
    {
      std::lock_guard lock(catch_mutex());  // released before the ranks communicate
      CHECK(comm.reduce_chunk_bytes(4) == measured);
      CHECK(comm.reduce_chunk_bytes(12) == measured / 12 * 12);
      CHECK(comm.pipeline_bytes(weft::collective::allreduce) == measured);
      CHECK(comm.pipeline_bytes(weft::collective::reduce_scatter) == measured);
      CHECK(comm.pipeline_bytes(weft::collective::broadcast) == settings.chunk_bytes);
      auto fixed = settings;
      fixed.reduce_chunk_bytes = 1000;
      comm.set_settings(fixed);
      CHECK(comm.reduce_chunk_bytes(8) == 1000);
      CHECK(comm.reduce_chunk_bytes(12) == 996);
      CHECK(comm.reduce_chunk_bytes(4096) == 4096);  // at least one element
    }
    // With the measured pieces (one world: a store serves one world per prefix), sums over
    // several pieces and a ragged last one are exact.
    comm.set_settings(settings);
    const std::size_t count = 3 * measured / sizeof(std::int64_t) + 7;
    for (const bool halving : {false, true}) {
      std::vector<std::int64_t> data(count);
      for (std::size_t i = 0; i < count; ++i)
        data[i] = static_cast<std::int64_t>(i) * (comm.rank() + 1);
      if (halving)
        weft::allreduce(comm, std::span<std::int64_t>(data), weft::sum{},
                        weft::recursive_halving{});
      else
        weft::allreduce(comm, std::span<std::int64_t>(data), weft::sum{}, weft::ring{});
      for (std::size_t i = 0; i < count; ++i) {
        if (data[i] != static_cast<std::int64_t>(i) * 6) {
          sink.add("rank " + std::to_string(comm.rank()) + (halving ? " halving" : " ring") +
                   ": element " + std::to_string(i) + " is " + std::to_string(data[i]));
          break;
        }
      }
    }
  });
  INFO(sink.summary());
  CHECK(sink.empty());
}

// What two thread-ranks on this host choose when rank r's thread may run on the CPUs
// cpus_of[r]: the receive buffer of the connection to the other, and how long a wait for a
// small (8 B) and a large (1 MiB) message polls before it sleeps.
// Two thread-ranks that looked at their connection tell each other their rank over it, so that
// neither says goodbye (which closes the connection) before both have looked.
void exchange_rank(int rank, weft::tcp::transport& transport, failures& sink) {
  int mine = rank, theirs = -1;
  auto heard = transport.recv(1 - rank, writable_bytes_of(std::span(&theirs, 1)), 8);
  auto told = transport.send(1 - rank, bytes_of(std::span(&mine, 1)), 8);
  if (!wait_for(transport, heard) || !wait_for(transport, told))
    sink.add("rank " + std::to_string(rank) + ": no word");
  if (theirs != 1 - rank) sink.add("rank " + std::to_string(rank) + ": wrong word");
}

struct host_choice {
  int buffer = 0;
  std::chrono::microseconds small_spin{-1};
  std::chrono::microseconds large_spin{-1};
};

std::array<host_choice, 2> choices_with_cpus(const std::array<std::vector<int>, 2>& cpus_of,
                                             failures& sink) {
  std::array<host_choice, 2> seen{};
  auto limit_cpus = [&cpus_of](int rank) {
    cpu_set_t mask;
    CPU_ZERO(&mask);
    for (const int cpu : cpus_of[static_cast<std::size_t>(rank)]) CPU_SET(cpu, &mask);
    if (sched_setaffinity(0, sizeof(mask), &mask) != 0)
      throw std::runtime_error("sched_setaffinity failed");
  };
  two_ranks(
      sink,
      [&](int rank, weft::tcp::transport& transport) {
        seen[static_cast<std::size_t>(rank)] = {transport.receive_buffer_bytes(1 - rank),
                                                transport.spin_before_sleep(8),
                                                transport.spin_before_sleep(std::size_t{1} << 20)};
        if (transport.receive_buffer_bytes(rank) != 0)
          sink.add("a buffer for a connection to itself");
        exchange_rank(rank, transport, sink);
      },
      limit_cpus);
  return seen;
}

TEST_CASE("ranks crowding one host's CPUs get small socket buffers and short polls between them",
          "[tcp]") {
  const weft::tcp::config defaults;
  failures sink;
  // Two ranks on one CPU: crowded. (Linux doubles what is asked; Asio reports it halved back.)
  // A wait polls for small_spin for a small message and sleeps after crowded_spin for a large one.
  for (const host_choice& seen : choices_with_cpus({{{0}, {0}}}, sink)) {
    INFO("receive buffer " << seen.buffer << ", crowded size "
                           << defaults.crowded_socket_buffer_bytes);
    CHECK((seen.buffer == defaults.crowded_socket_buffer_bytes ||
           seen.buffer == 2 * defaults.crowded_socket_buffer_bytes));
    CHECK(seen.small_spin == defaults.small_spin);
    CHECK(seen.large_spin == defaults.crowded_spin);
  }
  // Two ranks on two CPUs, both free to use either or each bound to its own (as a launcher
  // binds ranks to cores: each rank sees one CPU, the two see two): each has a core, the
  // buffers stay large and every wait polls for spin.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  REQUIRE(sched_getaffinity(0, sizeof(allowed), &allowed) == 0);
  if (CPU_ISSET(0, &allowed) && CPU_ISSET(1, &allowed)) {
    for (const auto& placement : {std::array<std::vector<int>, 2>{{{0, 1}, {0, 1}}},
                                  std::array<std::vector<int>, 2>{{{0}, {1}}}}) {
      for (const host_choice& seen : choices_with_cpus(placement, sink)) {
        INFO("CPUs of rank 0: " << placement[0].size() << "; receive buffer " << seen.buffer);
        CHECK(seen.buffer > 2 * defaults.crowded_socket_buffer_bytes);
        CHECK(seen.small_spin == defaults.spin);
        CHECK(seen.large_spin == defaults.spin);
      }
    }
  } else {
    WARN("CPUs 0 and 1 are not both available: the uncrowded half is not checked");
  }
  INFO(sink.summary());
  CHECK(sink.empty());
}

// The congestion control each of two thread-ranks sees on its connection to the other.
std::array<std::string, 2> congestion_with(const std::string& names, failures& sink) {
  std::array<std::string, 2> seen;
  auto settings = test_config();
  settings.local_congestion = names;
  two_ranks(
      sink,
      [&](int rank, weft::tcp::transport& transport) {
        seen[static_cast<std::size_t>(rank)] = transport.congestion_control(1 - rank);
        if (!transport.congestion_control(rank).empty())
          sink.add("a congestion control for a connection to itself");
        exchange_rank(rank, transport, sink);
      },
      {}, settings);
  return seen;
}

std::string system_congestion() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_congestion_control");
  std::string name;
  in >> name;
  return name;
}

TEST_CASE(
    "connections between ranks on one host take the first congestion control the kernel accepts",
    "[tcp]") {
  failures sink;
  const std::string system = system_congestion();
  REQUIRE(!system.empty());
  // The default list: cubic, else reno (every user may choose reno).
  for (const auto& seen : congestion_with(weft::tcp::config{}.local_congestion, sink)) {
    INFO("system's " << system);
    CHECK((seen == "cubic" || seen == "reno"));
  }
  // Names the kernel does not know are passed over.
  for (const auto& seen : congestion_with("no-such-algorithm,reno", sink)) CHECK(seen == "reno");
  // Empty, or nothing accepted: the system's.
  for (const auto& seen : congestion_with("", sink)) CHECK(seen == system);
  for (const auto& seen : congestion_with("no-such-algorithm", sink)) CHECK(seen == system);
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("socket buffers left to the kernel (socket_buffer_bytes 0) carry a large allreduce",
          "[tcp]") {
  job world(3);
  failures sink;
  auto settings = test_config();
  settings.socket_buffer_bytes = 0;
  settings.crowded_socket_buffer_bytes = 0;
  world.run(
      sink,
      [&](tcp_comm& comm) {
        std::vector<std::int64_t> data(std::size_t{1} << 20, comm.rank() + 1);  // 8 MiB each
        weft::allreduce(comm, std::span<std::int64_t>(data), weft::sum{}, weft::ring{});
        if (std::any_of(data.begin(), data.end(), [](std::int64_t x) { return x != 6; })) {
          sink.add("rank " + std::to_string(comm.rank()) + ": wrong sum");
        }
      },
      1 << 18, settings);
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("early messages' buffers are kept for the next ones, within their bound", "[tcp]") {
  failures sink;
  auto settings = test_config();
  settings.early_buffer_cache = std::size_t{1} << 20;
  // Per round: the first two fit the cache together, the third is above it and the fourth below
  // the smallest kept size (neither is kept).
  const std::vector<std::size_t> sizes{512 << 10, 300 << 10, 2 << 20, 100};
  const std::size_t total = std::accumulate(sizes.begin(), sizes.end(), std::size_t{0});
  const std::size_t kept = sizes[0] + sizes[1];
  constexpr int rounds = 3;
  two_ranks(
      sink,
      [&](int rank, weft::tcp::transport& transport) {
        for (int round = 0; round < rounds; ++round) {
          std::vector<std::vector<std::uint8_t>> messages;
          for (std::size_t k = 0; k < sizes.size(); ++k) {
            messages.emplace_back(sizes[k],
                                  static_cast<std::uint8_t>(round * 16 + static_cast<int>(k) + 1));
          }
          const auto tag = [&](std::size_t k) {
            return static_cast<weft::tag_t>(round * 10 + static_cast<int>(k));
          };
          int word = 0;
          if (rank == 0) {
            std::vector<weft::tcp::transport::request> sends;
            for (std::size_t k = 0; k < sizes.size(); ++k)
              sends.push_back(transport.send(1, bytes_of(messages[k]), tag(k)));
            for (auto& send : sends) {
              if (!wait_for(transport, send)) sink.add("rank 0: a send did not complete");
            }
            auto next = transport.recv(1, writable_bytes_of(std::span(&word, 1)), 100 + round);
            if (!wait_for(transport, next)) sink.add("rank 0: no word from rank 1");
            continue;
          }
          for (auto& m : messages) std::fill(m.begin(), m.end(), std::uint8_t{0});
          // Let every message arrive before its receive, so each one lands in an early buffer.
          auto probe = transport.recv(0, writable_bytes_of(std::span(&word, 1)), 999 + round);
          const auto deadline = std::chrono::steady_clock::now() + 20s;
          while (transport.unexpected_bytes() < total &&
                 std::chrono::steady_clock::now() < deadline) {
            transport.test(probe);
          }
          if (transport.unexpected_bytes() < total)
            sink.add("round " + std::to_string(round) + ": messages did not arrive early");
          for (std::size_t k = sizes.size(); k-- > 0;) {
            auto receive = transport.recv(0, writable_bytes_of(messages[k]), tag(k));
            const auto expected = static_cast<std::uint8_t>(round * 16 + static_cast<int>(k) + 1);
            if (!wait_for(transport, receive) ||
                std::any_of(messages[k].begin(), messages[k].end(),
                            [&](std::uint8_t x) { return x != expected; })) {
              sink.add("round " + std::to_string(round) + ": message of " +
                       std::to_string(sizes[k]) + " B wrong or missing");
            }
          }
          if (transport.kept_buffer_bytes() > settings.early_buffer_cache)
            sink.add("kept buffers above their bound");
          if (transport.kept_buffer_bytes() != kept) {
            sink.add("round " + std::to_string(round) + ": kept " +
                     std::to_string(transport.kept_buffer_bytes()) +
                     " B, expected the two messages that fit the cache");
          }
          auto next = transport.send(0, bytes_of(std::span(&word, 1)), 100 + round);
          if (!wait_for(transport, next)) sink.add("rank 1: word not sent");
        }
      },
      {}, settings);
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("early messages wait in a bounded queue; a large one waits in the socket", "[tcp]") {
  failures sink;
  constexpr std::size_t limit = 4096;
  auto settings = test_config();
  settings.unexpected_limit = limit;
  two_ranks(
      sink,
      [&](int rank, weft::tcp::transport& transport) {
        std::vector<std::vector<int>> small(20, std::vector<int>(256));  // 1 KiB each
        std::vector<char> large(std::size_t{1} << 20);
        int go = 0;
        if (rank == 0) {
          std::vector<weft::tcp::transport::request> sends;
          for (int i = 0; i < 20; ++i) {
            std::fill(small[static_cast<std::size_t>(i)].begin(),
                      small[static_cast<std::size_t>(i)].end(), i);
            sends.push_back(transport.send(1, bytes_of(small[static_cast<std::size_t>(i)]),
                                           static_cast<weft::tag_t>(i)));
          }
          std::fill(large.begin(), large.end(), 'x');
          sends.push_back(transport.send(1, bytes_of(large), 100));
          for (auto& send : sends) {
            if (!wait_for(transport, send)) sink.add("rank 0: a send did not complete");
          }
          auto done = transport.recv(1, writable_bytes_of(std::span(&go, 1)), 200);
          if (!wait_for(transport, done)) sink.add("rank 0: no final word");
        } else {
          std::this_thread::sleep_for(200ms);
          for (int i = 0; i < 50; ++i) {
            int dummy = 0;
            auto probe = transport.recv(0, writable_bytes_of(std::span(&dummy, 1)), 999);
            transport.test(probe);
            if (transport.unexpected_bytes() > limit) sink.add("unexpected queue above its bound");
          }
          auto big = transport.recv(0, writable_bytes_of(large), 100);
          for (int i = 0; i < 20; ++i) {
            auto& into = small[static_cast<std::size_t>(i)];
            auto receive = transport.recv(0, writable_bytes_of(into), static_cast<weft::tag_t>(i));
            if (!wait_for(transport, receive) || into.front() != i || into.back() != i) {
              sink.add("message " + std::to_string(i) + " wrong or missing");
            }
            if (transport.unexpected_bytes() > limit) sink.add("unexpected queue above its bound");
          }
          if (!wait_for(transport, big) || large.front() != 'x' || large.back() != 'x') {
            sink.add("the large message is wrong or missing");
          }
          auto done = transport.send(0, bytes_of(std::span(&go, 1)), 200);
          if (!wait_for(transport, done)) sink.add("rank 1: final word not sent");
        }
      },
      {}, settings);
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("a receive dropped mid-message leaves the message to the next receive", "[tcp]") {
  failures sink;
  constexpr std::size_t count = std::size_t{8} << 20;
  two_ranks(sink, [&](int rank, weft::tcp::transport& transport) {
    if (rank == 0) {
      const auto data = pattern(count);
      auto send = transport.send(1, bytes_of(data), 7);
      if (!wait_for(transport, send)) sink.add("rank 0: send did not complete");
    } else {
      std::vector<std::uint32_t> data(count), abandoned(count, 0);
      bool first_finished = false;
      {
        auto first = transport.recv(0, writable_bytes_of(abandoned), 7);
        // Part of it may be in when the request is dropped (on a slow machine, all of it:
        // then the first receive has the message and there is nothing to cancel).
        first_finished = transport.wait(first, weft::deadline_clock::now() + 2ms);
      }
      if (first_finished) {
        data = abandoned;
      } else {
        auto second = transport.recv(0, writable_bytes_of(data), 7);
        if (!wait_for(transport, second)) sink.add("rank 1: the message never came");
      }
      check_pattern(data, sink, "after the cancelled receive");
    }
    final_word(transport, rank, sink);
  });
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("a receive posted while its message is arriving takes the rest straight from the socket",
          "[tcp]") {
  failures sink;
  constexpr std::size_t count = std::size_t{8} << 20;  // 32 MiB: more than the socket buffers hold
  two_ranks(sink, [&](int rank, weft::tcp::transport& transport) {
    if (rank == 0) {
      const auto data = pattern(count);
      auto send = transport.send(1, bytes_of(data), 7);  // writes what the socket takes now
      std::this_thread::sleep_for(300ms);                // and no more until it is waited on
      if (!wait_for(transport, send)) sink.add("rank 0: send did not complete");
    } else {
      // Drive progress with an unrelated receive until the message has begun to arrive.
      int dummy = 0;
      auto probe = transport.recv(0, writable_bytes_of(std::span(&dummy, 1)), 999);
      const auto give_up = std::chrono::steady_clock::now() + 5s;
      while (transport.unexpected_bytes() == 0 && std::chrono::steady_clock::now() < give_up) {
        transport.test(probe);
      }
      if (transport.unexpected_bytes() != count * 4)
        sink.add("the message did not start arriving early");
      std::vector<std::uint32_t> data(count);
      auto receive = transport.recv(0, writable_bytes_of(data), 7);
      // Taken over: the early copy is gone at once, not when the last byte arrives.
      if (transport.unexpected_bytes() != 0)
        sink.add("the arriving message stayed in the unexpected queue");
      if (!wait_for(transport, receive)) sink.add("rank 1: the message never came");
      check_pattern(data, sink, "after the receive took over");
    }
    final_word(transport, rank, sink);
  });
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("messages of every size around the read path's edges cross intact, early and late",
          "[tcp]") {
  // Sizes at the edges of the inbox (64 KiB), of reading in place (16 KiB) and of a header (24
  // bytes), sent both ways at once in bursts, so reads stop short mid-frame and mid-header; the
  // first half of the receives is posted before the messages come, the rest after.
  constexpr std::array<std::size_t, 12> sizes{0,     1,     7,     24,    25,    16383,
                                              16384, 16385, 65512, 65536, 65560, 300001};
  constexpr std::size_t messages = 96;
  auto byte_of = [](int from, std::size_t i, std::size_t at) {
    return static_cast<std::byte>((static_cast<std::size_t>(from) * 131 + i * 17 + at) % 251);
  };
  failures sink;
  two_ranks(sink, [&](int rank, weft::tcp::transport& transport) {
    const int other = 1 - rank;
    const std::string me = "rank " + std::to_string(rank) + ": ";
    std::vector<std::vector<std::byte>> outgoing(messages), incoming(messages);
    std::vector<weft::tcp::transport::request> sends, receives;
    for (std::size_t i = 0; i < messages; ++i) {
      const std::size_t size = sizes[i % sizes.size()];
      for (std::size_t at = 0; at < size; ++at) outgoing[i].push_back(byte_of(rank, i, at));
      incoming[i].assign(size, std::byte{0xee});
    }
    auto post_receive = [&](std::size_t i) {
      receives.push_back(transport.recv(other, incoming[i], i));
    };
    for (std::size_t i = 0; i < messages / 2; ++i) post_receive(i);
    for (std::size_t i = 0; i < messages; ++i) {
      sends.push_back(transport.send(other, outgoing[i], i));
      if (i % 5 == 4) {  // a burst has left: let the peer read part of it
        transport.test(sends.back());
        std::this_thread::sleep_for(1ms);
      }
    }
    for (std::size_t i = messages / 2; i < messages; ++i) post_receive(i);
    for (std::size_t i = 0; i < messages; ++i) {
      if (!wait_for(transport, receives[i])) {
        sink.add(me + "message " + std::to_string(i) + " never came");
        continue;
      }
      for (std::size_t at = 0; at < incoming[i].size(); ++at) {
        if (incoming[i][at] != byte_of(other, i, at)) {
          sink.add(me + "message " + std::to_string(i) + " (" + std::to_string(incoming[i].size()) +
                   " bytes) wrong at byte " + std::to_string(at));
          break;
        }
      }
    }
    for (auto& send : sends) {
      if (!wait_for(transport, send)) sink.add(me + "a send never completed");
    }
    final_word(transport, rank, sink);
  });
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("a message of the wrong size is an error naming both sizes", "[tcp]") {
  job world(2);
  std::string message;
  std::thread other([&] {
    auto transport = world.make(1);
    std::int64_t value = 5;
    auto send = transport.send(0, bytes_of(std::span(&value, 1)), 3);
    wait_for(transport, send);
    int done = 0;
    auto finish = transport.recv(0, writable_bytes_of(std::span(&done, 1)), 4);
    wait_for(transport, finish);
  });
  {
    auto transport = world.make(0);
    std::int64_t two[2] = {0, 0};
    auto receive = transport.recv(1, writable_bytes_of(two), 3);
    try {
      wait_for(transport, receive);
    } catch (const weft::error& failure) {
      CHECK(failure.code() == weft::errc::mismatch);
      message = failure.what();
    }
    int done = 0;
    auto finish = transport.send(1, bytes_of(std::span(&done, 1)), 4);
    wait_for(transport, finish);
  }
  other.join();
  CHECK_THAT(message,
             Catch::Contains("expected 16 bytes from rank 1") && Catch::Contains("has 8 bytes"));
}

TEST_CASE("a failure notice goes out at once, even behind a message a peer is still reading",
          "[tcp]") {
  // Rank 0 has a large message to rank 2 partly written when it reports rank 1 failed (as a
  // communicator does before it throws), and then stays out of its transport. Rank 2 is reading
  // that message: it must get the rest and the notice now, not when rank 0's transport closes.
  constexpr std::size_t count = std::size_t{8} << 20;  // 32 MiB: more than the socket buffers hold
  job world(3);
  failures sink;
  std::atomic<bool> rank2_reading{false}, rank2_done{false};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 3; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        auto transport = world.make(rank);
        if (rank == 0) {
          const auto data = pattern(count);
          auto send = transport.send(2, bytes_of(data), 7);  // writes what the socket takes now
          while (!rank2_reading) std::this_thread::sleep_for(1ms);
          std::this_thread::sleep_for(50ms);
          transport.abort(1, "rank 1 failed (reported by the test)");
          while (!rank2_done) std::this_thread::sleep_for(1ms);  // not inside the transport
        } else if (rank == 2) {
          std::vector<std::uint32_t> data(count);
          auto receive = transport.recv(0, writable_bytes_of(data), 7);
          rank2_reading = true;
          if (!wait_for(transport, receive, 3s))
            sink.add("rank 2: the rest of the message never came");
          check_pattern(data, sink, "behind a failure notice");
          int more = 0;
          auto next = transport.recv(0, writable_bytes_of(std::span(&more, 1)), 8);
          try {
            wait_for(transport, next, 3s);
            sink.add("rank 2: no failure notice came");
          } catch (const weft::error& failure) {
            if (std::string(failure.what()).find("rank 1 failed (reported by the test)") ==
                std::string::npos) {
              sink.add(std::string("rank 2: a different error: ") + failure.what());
            }
          }
          rank2_done = true;
        } else {
          while (!rank2_done) std::this_thread::sleep_for(1ms);
        }
      } catch (const std::exception& failure) {
        rank2_done = true;
        sink.add("rank " + std::to_string(rank) + " threw: " + failure.what());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("a peer that closes its transport gives peer_lost, and the communicator then refuses",
          "[tcp]") {
  job world(2);
  std::string first, second;
  std::chrono::milliseconds detected{};
  std::atomic<bool> rank1_ready{false};
  std::thread leaver([&] {
    auto transport = world.make(1);
    rank1_ready = true;
    std::this_thread::sleep_for(100ms);
  });  // the transport closes here, while rank 0 waits for a message from it
  {
    auto transport = world.make(0);
    tcp_comm comm(transport, test_options());
    std::vector<int> data(10, 1);
    const auto start = std::chrono::steady_clock::now();
    try {
      weft::allreduce(comm, std::span<int>(data), weft::sum{}, weft::ring{});
    } catch (const weft::error& failure) {
      CHECK(failure.code() == weft::errc::peer_lost);
      first = failure.what();
    }
    detected = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    try {
      weft::allreduce(comm, std::span<int>(data), weft::sum{});
    } catch (const weft::error& failure) {
      second = failure.what();
    }
  }
  leaver.join();
  CHECK_THAT(first, Catch::Contains("rank 1 closed its transport") && Catch::Contains("allreduce"));
  CHECK(detected < 5s);
  CHECK_THAT(second,
             Catch::Contains("refuses allreduce") && Catch::Contains("build a new communicator"));
}

TEST_CASE("start-up times out naming the rank that never came", "[tcp]") {
  job world(3);  // rank 2 never starts
  std::string messages[2];
  std::chrono::milliseconds took[2]{};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      const auto start = std::chrono::steady_clock::now();
      try {
        auto transport = world.make(rank, test_config(1500ms));
      } catch (const weft::error& failure) {
        if (failure.code() == weft::errc::timeout) messages[rank] = failure.what();
      }
      took[rank] = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start);
    });
  }
  for (auto& thread : threads) thread.join();
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank << ": " << messages[rank]);
    CHECK_THAT(messages[rank], Catch::Contains("rank(s) 2") && Catch::Contains("at start-up"));
    CHECK(took[rank] < 4s);
  }
}

TEST_CASE("ranks started for different world sizes all fail with mismatch naming both sizes",
          "[tcp]") {
  // Rank 0 is told the world has 2 ranks, ranks 1 and 2 that it has 3 (or the other way round):
  // every rank fails at start-up with mismatch, quickly, saying so (not a reset connection, and
  // not only in rank 0's log).
  for (const int rank0_size : {2, 3}) {
    const int others_size = rank0_size == 2 ? 3 : 2;
    INFO("rank 0 for " << rank0_size << " ranks, the others for " << others_size);
    weft::bootstrap::tcp_store_server server("127.0.0.1", 0, secret);
    std::vector<std::string> messages(static_cast<std::size_t>(others_size));
    std::vector<std::thread> threads;
    const auto started = std::chrono::steady_clock::now();
    for (int rank = 0; rank < others_size; ++rank) {
      threads.emplace_back([&, rank] {
        const auto settings = test_config(10s);
        try {
          weft::bootstrap::tcp_store meeting(
              "127.0.0.1", server.port(), secret,
              weft::deadline_clock::now() + settings.connect_timeout);
          weft::tcp::transport transport(rank, rank == 0 ? rank0_size : others_size, &meeting,
                                         settings);
          messages[static_cast<std::size_t>(rank)] = "started";
        } catch (const weft::error& failure) {
          messages[static_cast<std::size_t>(rank)] = failure.what();
        }
      });
    }
    for (auto& thread : threads) thread.join();
    CHECK(std::chrono::steady_clock::now() - started < 5s);
    for (int rank = 0; rank < others_size; ++rank) {
      const std::string& message = messages[static_cast<std::size_t>(rank)];
      INFO("rank " << rank << ": " << message);
      CHECK(message.find("weft: mismatch: rank " + std::to_string(rank) + " could not start") == 0);
      CHECK_THAT(message, Catch::Contains("world sizes differ: rank ") && Catch::Contains("of 2") &&
                              Catch::Contains("of 3"));
    }
  }
}

TEST_CASE("fuzzed connections are dropped while the job's traffic goes on", "[tcp][fuzz]") {
  job world(2);
  failures sink;
  std::atomic<bool> fuzzing_done{false};
  std::atomic<int> bad_connections{0};
  std::string target;
  std::atomic<bool> target_known{false};
  std::atomic<std::uint64_t> rejected{0};
  // Rounds of the job's traffic rank 0 has finished. The fuzzer sends each batch only after
  // the job has finished one more round, so the fuzzing spans at least fuzz_batches rounds
  // however the two threads are scheduled.
  constexpr int fuzz_batches = 40;
  std::atomic<int> job_rounds{0};

  std::thread fuzzer([&] {
    while (!target_known) std::this_thread::sleep_for(1ms);
    auto [host, port] = weft::bootstrap::split_address(target);
    boost::asio::io_context io;
    const boost::asio::ip::tcp::endpoint where(boost::asio::ip::make_address(host), port);
    std::mt19937 random(42);
    auto hello = [](std::uint32_t version, std::uint32_t rank, std::uint32_t size,
                    std::string_view key) {
      std::vector<std::byte> out(24 + key.size());
      std::memcpy(out.data(), "WEFTTCP1", 8);
      weft::bootstrap::store_detail::put32(out.data() + 8, version);
      weft::bootstrap::store_detail::put32(out.data() + 12, rank);
      weft::bootstrap::store_detail::put32(out.data() + 16, size);
      weft::bootstrap::store_detail::put32(out.data() + 20, static_cast<std::uint32_t>(key.size()));
      std::memcpy(out.data() + 24, key.data(), key.size());
      return out;
    };
    for (int batch = 0; batch < fuzz_batches; ++batch) {
      const auto patience = std::chrono::steady_clock::now() + 20s;
      while (job_rounds <= batch && std::chrono::steady_clock::now() < patience) {
        std::this_thread::sleep_for(100us);
      }
      if (job_rounds <= batch) {
        sink.add("the job's traffic stopped before fuzzing batch " + std::to_string(batch));
        break;
      }
      std::vector<std::vector<std::byte>> frames;
      std::vector<std::byte> noise(random() % 300);
      for (auto& b : noise) b = static_cast<std::byte>(random());
      frames.push_back(noise);  // random bytes
      auto good = hello(1, 1, 2, secret);
      frames.emplace_back(good.begin(), good.begin() + 13);  // truncated hello
      frames.push_back(hello(7, 1, 2, secret));              // wrong version
      frames.push_back(hello(1, 1, 9, secret));              // wrong world size
      frames.push_back(hello(1, 1, 2, "not-the-secret"));    // wrong secret
      frames.push_back(hello(1, 1, 2, secret));              // rank 1 is already connected
      auto oversized = hello(1, 1, 2, "");
      weft::bootstrap::store_detail::put32(oversized.data() + 20, 0xffffffffu);
      frames.push_back(oversized);           // absurd secret length
      auto header = hello(1, 1, 2, secret);  // a data frame without a hello
      std::memcpy(header.data(), "\x01\0\0\0\0\0\0\0", 8);
      frames.push_back(header);
      for (auto& frame : frames) {
        boost::asio::ip::tcp::socket socket(io);
        boost::system::error_code ignored;
        socket.connect(where, ignored);
        if (ignored) continue;
        boost::asio::write(socket, boost::asio::buffer(frame.data(), frame.size()), ignored);
        ++bad_connections;
        socket.shutdown(boost::asio::ip::tcp::socket::shutdown_send, ignored);
      }
    }
    fuzzing_done = true;
  });

  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        auto transport = world.make(rank);
        tcp_comm comm(transport, test_options());
        if (rank == 0) {  // rank 0 listens: the higher rank connects to it
          target = transport.address();
          target_known = true;
        }
        int rounds = 0;
        const auto give_up = std::chrono::steady_clock::now() + 60s;
        while (true) {
          std::vector<std::int64_t> data(1000);
          for (std::size_t i = 0; i < data.size(); ++i)
            data[i] = static_cast<std::int64_t>(i) * (comm.rank() + 1);
          weft::allreduce(comm, std::span<std::int64_t>(data), weft::sum{});
          for (std::size_t i = 0; i < data.size(); ++i) {
            if (data[i] != static_cast<std::int64_t>(i) * 3) {
              sink.add("wrong result during fuzzing");
              break;
            }
          }
          ++rounds;
          if (rank == 0) ++job_rounds;
          // Go on until every fuzzed connection has been turned away (or 60 s).
          int more = 0;
          if (rank == 0) {
            more = (!fuzzing_done || transport.rejected_connections() <
                                         static_cast<std::uint64_t>(bad_connections)) &&
                   std::chrono::steady_clock::now() < give_up;
            rejected = transport.rejected_connections();
          }
          weft::broadcast(comm, std::span(&more, 1), 0);
          if (!more) break;
        }
        // Every batch waited for a round: the traffic went on through all the fuzzing.
        if (rounds < fuzz_batches) {
          sink.add("rank " + std::to_string(rank) + ": " + std::to_string(rounds) +
                   " rounds, fewer than the " + std::to_string(fuzz_batches) + " fuzzing batches");
        }
        if (transport.unexpected_bytes() != 0) sink.add("bytes left in the unexpected queue");
      } catch (const std::exception& failure) {
        sink.add("rank " + std::to_string(rank) + " threw: " + failure.what());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  fuzzer.join();
  INFO(sink.summary());
  CHECK(sink.empty());
  CHECK(bad_connections > 300);
  CHECK(rejected == static_cast<std::uint64_t>(bad_connections));
}

using environment = clean_environment;

TEST_CASE("the TCP settings read their variables; unset ones keep the defaults", "[tcp]") {
  using std::chrono::microseconds;
  const weft::tcp::config defaults;
  CHECK(defaults.spin == microseconds(20000));
  CHECK(defaults.crowded_spin == microseconds(50));
  CHECK(defaults.small_spin == microseconds(300));
  {
    environment set({{"WEFT_TCP_SPIN_US", "7000"},
                     {"WEFT_TCP_CROWDED_SPIN_US", "80"},
                     {"WEFT_TCP_SMALL_SPIN_US", "900"}});
    const auto read = weft::tcp::config::from_environment();
    CHECK(read.spin == microseconds(7000));
    CHECK(read.crowded_spin == microseconds(80));
    CHECK(read.small_spin == microseconds(900));
  }
  CHECK(defaults.local_congestion == "cubic,reno");
  {
    environment set({{"WEFT_TCP_LOCAL_CONGESTION", ""}});
    CHECK(weft::tcp::config::from_environment().local_congestion.empty());
  }
  {
    environment set({{"WEFT_TCP_CROWDED_SPIN_US", "0"}});
    const auto read = weft::tcp::config::from_environment();
    CHECK(read.spin == defaults.spin);
    CHECK(read.crowded_spin == microseconds(0));
    CHECK(read.small_spin == defaults.small_spin);
  }
}

TEST_CASE("the TCP settings take empty as the default and refuse what they cannot read", "[tcp]") {
  const weft::tcp::config defaults;
  for (const char* name :
       {"WEFT_TIMEOUT_MS", "WEFT_TCP_UNEXPECTED_BYTES", "WEFT_TCP_EARLY_CACHE_BYTES",
        "WEFT_TCP_SOCKET_BUFFER", "WEFT_TCP_CROWDED_SOCKET_BUFFER", "WEFT_TCP_SPIN_US",
        "WEFT_TCP_CROWDED_SPIN_US", "WEFT_TCP_SMALL_SPIN_US", "WEFT_BIND_ADDRESS", "WEFT_SECRET"}) {
    scoped_environment set(name, "");
    const auto read = weft::tcp::config::from_environment();
    CHECK(read.connect_timeout == defaults.connect_timeout);  // an empty timeout is not 0 ms
    CHECK(read.unexpected_limit == defaults.unexpected_limit);
    CHECK(read.early_buffer_cache == defaults.early_buffer_cache);
    CHECK(read.socket_buffer_bytes == defaults.socket_buffer_bytes);
    CHECK(read.crowded_socket_buffer_bytes == defaults.crowded_socket_buffer_bytes);
    CHECK(read.spin == defaults.spin);
    CHECK(read.crowded_spin == defaults.crowded_spin);
    CHECK(read.small_spin == defaults.small_spin);
    CHECK(read.bind_address == defaults.bind_address);
    CHECK(read.secret == defaults.secret);
  }
  {
    scoped_environment set({{"WEFT_TIMEOUT_MS", "4000"},
                            {"WEFT_TCP_UNEXPECTED_BYTES", "1G"},
                            {"WEFT_TCP_EARLY_CACHE_BYTES", "0"},
                            {"WEFT_TCP_SOCKET_BUFFER", "8M"},
                            {"WEFT_TCP_CROWDED_SOCKET_BUFFER", "512KiB"}});
    const auto read = weft::tcp::config::from_environment();
    CHECK(read.connect_timeout == 4000ms);
    CHECK(read.unexpected_limit == std::size_t{1} << 30);
    CHECK(read.early_buffer_cache == 0u);
    CHECK(read.socket_buffer_bytes == 8 << 20);
    CHECK(read.crowded_socket_buffer_bytes == 512 << 10);
  }
  const std::vector<std::pair<const char*, const char*>> garbage = {
      {"WEFT_TIMEOUT_MS", "abc"},
      {"WEFT_TIMEOUT_MS", "-5"},
      {"WEFT_TIMEOUT_MS", "0"},
      {"WEFT_TCP_UNEXPECTED_BYTES", "1.5G"},
      {"WEFT_TCP_EARLY_CACHE_BYTES", "-1"},
      {"WEFT_TCP_SOCKET_BUFFER", "3G"},
      {"WEFT_TCP_CROWDED_SOCKET_BUFFER", "lots"},
      {"WEFT_TCP_SPIN_US", "20ms"},
      {"WEFT_TCP_CROWDED_SPIN_US", "-50"},
      {"WEFT_TCP_SMALL_SPIN_US", "1e3"}};
  for (const auto& [name, value] : garbage) {
    scoped_environment set(name, value);
    CHECK_THROWS_WITH(weft::tcp::config::from_environment(),
                      Catch::Contains(std::string(name) + "='" + value + "'"));
  }
}

TEST_CASE("a session from the environment: one call to a ready communicator", "[tcp][bootstrap]") {
  // Two ranks as threads cannot share one process environment, so a world of one rank stands in
  // here; multiprocess.py runs sessions of 2 to 4 processes.
  environment set({{"WEFT_RANK", "0"}, {"WEFT_SIZE", "1"}});
  auto job = weft::tcp::session::from_environment();
  std::vector<int> data = {1, 2, 3};
  weft::allreduce(job.comm(), std::span<int>(data), weft::sum{});
  CHECK(data == std::vector<int>{1, 2, 3});
  CHECK(job.launch().launcher == "weft");
}

TEST_CASE("a request that outlives its transport is harmless", "[tcp]") {
  // As a pending receive kept past session::close_transport(): the communicator and the
  // transport go first, the request after. The engine closes at once and lives on, retired,
  // until the request is dropped (under the sanitizers: no use after free, no leak).
  job world(2);
  std::thread other([&] {
    auto transport = world.make(1);
    std::this_thread::sleep_for(300ms);
  });
  {
    auto transport = std::make_unique<weft::tcp::transport>(world.make(0));
    auto comm = std::make_unique<tcp_comm>(*transport, test_options());
    std::vector<float> buffer(16, -1.0f);
    auto never_sent =
        comm->recv(1, weft::detail::bytes(reinterpret_cast<std::byte*>(buffer.data()), 64));
    auto also = comm->send(
        1, weft::detail::const_bytes(reinterpret_cast<const std::byte*>(buffer.data()), 64), 7);
    comm.reset();
    transport.reset();  // closes the connections now: rank 1 sees the goodbye
    CHECK(buffer[0] == -1.0f);
  }  // the requests go here, the engine with the last
  other.join();
}

TEST_CASE("split and dup communicators made and dropped in a loop leave no file or thread behind",
          "[tcp]") {
  auto count = [](const char* directory) {
    return std::distance(std::filesystem::directory_iterator(directory),
                         std::filesystem::directory_iterator{});
  };
  failures sink;
  job world(3);
  std::atomic<int> ready{0};
  std::vector<std::ptrdiff_t> before(2), after(2);
  auto rounds = [&](tcp_comm& comm, int how_many) {
    for (int round = 0; round < how_many; ++round) {
      auto half = comm.split(comm.rank() % 2, comm.rank());
      auto copy = half.dup();
      std::vector<int> data(8, 1);
      weft::allreduce(copy, std::span<int>(data));
      if (data[0] != copy.size()) sink.add("wrong sum in round " + std::to_string(round));
    }
  };
  world.run(sink, [&](tcp_comm& comm) {
    rounds(comm, 20);  // what earlier tests left behind settles meanwhile
    weft::barrier(comm);
    if (comm.rank() == 0) {
      before = {count("/proc/self/fd"), count("/proc/self/task")};
    }
    weft::barrier(comm);
    rounds(comm, 200);
    weft::barrier(comm);
    if (comm.rank() == 0) {
      after = {count("/proc/self/fd"), count("/proc/self/task")};
    }
    weft::barrier(comm);
    ready += 1;
  });
  INFO(sink.summary());
  CHECK(sink.empty());
  CHECK(ready == 3);
  // The whole process's (every rank's) file descriptors and threads do not grow with the rounds
  // (fewer is what earlier tests' closing leaves).
  CHECK(after[0] <= before[0]);
  CHECK(after[1] <= before[1]);
}
