// The shared-memory transport in one process: each rank is a thread with its own region,
// meeting through a file store in a fresh directory. Conformance, the collective slice on 1-5
// ranks at sizes around the slot size, reducing receives for every type and reduction, slots
// too small for a message, early messages, a rank that closes; processes, killed ranks and
// what is left in /dev/shm are in tests/multiprocess/multiprocess.py (scenario shm).
#include "../collective_cases.hpp"
#include "../consistency_cases.hpp"
#include "../meeting_place.hpp"
#include "../scoped_environment.hpp"
#include "../slice_in_flight.hpp"
#include "../transport_conformance.hpp"

#include <weft/bootstrap/file_store.hpp>
#include <weft/buffer.hpp>
#include <weft/stream/processes.hpp>
#include <weft/transport/shm.hpp>

#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace weft_test;
using namespace std::chrono_literals;

namespace {

using shm_comm = weft::communicator<weft::shm::transport>;

// int32 elements filling many 4096-byte slots, more than a FIFO of 4 holds: 64 (9 when quick).
std::size_t many_slots() { return quick() ? 8193 : 65539; }

weft::shm::config small_slots(std::size_t slot_bytes = 4096, std::size_t slots = 4) {
  weft::shm::config settings;
  settings.connect_timeout = 20s;
  settings.secret = "test";
  settings.slot_bytes = slot_bytes;
  settings.slots = slots;
  settings.pool_bytes = std::size_t{256} << 20;
  settings.cma_bytes = 0;  // through the slots; lending by address has its own test
  return settings;
}

template <class T>
using pool_buffer = weft::buffer<T, weft::shm::pool_memory>;

void run_world(int p, const weft::shm::config& settings, failures& sink,
               const std::function<void(shm_comm&)>& fn) {
  meeting_place place("shm");
  std::vector<std::thread> threads;
  for (int rank = 0; rank < p; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        weft::shm::transport transport(rank, p, place.store(), settings);
        shm_comm comm(transport, test_options(4096));
        fn(comm);
      } catch (const std::exception& failure) {
        sink.add("rank " + std::to_string(rank) + " threw: " + failure.what());
      }
    });
  }
  for (auto& thread : threads) thread.join();
}

}  // namespace

TEST_CASE("shm: conformance", "[shm]") {
  for (const std::size_t slot_bytes : {std::size_t{64}, std::size_t{4096}, std::size_t{64} << 10}) {
    INFO("slots of " << slot_bytes << " bytes");
    failures sink;
    meeting_place place("shm");
    transport_conformance_ranks(sink, [&](int rank) {
      return weft::shm::transport(rank, 3, place.store(), small_slots(slot_bytes));
    });
    INFO(sink.summary());
    CHECK(sink.empty());
  }
}

TEST_CASE("shm: calls that differ on one rank fail with mismatch on every rank", "[shm]") {
  constexpr int p = 4;
  for (std::size_t which = 0; which < disagreements.size(); ++which) {
    for (const int odd : differing_ranks(which, p)) {
      INFO(disagreements[which] << ", rank " << odd << " differs");
      failures sink;
      const auto started = std::chrono::steady_clock::now();
      run_world(p, small_slots(), sink,
                [&](shm_comm& comm) { disagreement_case(comm, sink, which, odd); });
      INFO(sink.summary());
      CHECK(sink.empty());
      CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
    }
  }
}

namespace {

// Rank 0 started for a world of `rank0_size`, the others for the other of 2 and 3: every rank
// fails at start-up with mismatch naming both sizes, quickly.
template <class Transport, class Config>
void different_world_sizes(const Config& settings, int rank0_size) {
  const int others_size = rank0_size == 2 ? 3 : 2;
  INFO("rank 0 for " << rank0_size << " ranks, the others for " << others_size);
  meeting_place place("shm");
  std::vector<std::string> messages(static_cast<std::size_t>(others_size));
  std::vector<std::thread> threads;
  const auto started = std::chrono::steady_clock::now();
  for (int rank = 0; rank < others_size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        Transport transport(rank, rank == 0 ? rank0_size : others_size, place.store(), settings);
        messages[static_cast<std::size_t>(rank)] = "started";
      } catch (const weft::error& failure) {
        messages[static_cast<std::size_t>(rank)] = failure.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
  for (int rank = 0; rank < others_size; ++rank) {
    const std::string& message = messages[static_cast<std::size_t>(rank)];
    INFO("rank " << rank << ": " << message);
    CHECK(message.find("weft: mismatch: rank " + std::to_string(rank) + " could not start") == 0);
    // (which two ranks it names depends on which rank found it first)
    CHECK_THAT(message, Catch::Contains("world sizes differ: ") && Catch::Contains("of 2") &&
                            Catch::Contains("of 3"));
  }
}

}  // namespace

TEST_CASE("shm: ranks started for different world sizes all fail with mismatch naming both sizes",
          "[shm]") {
  auto settings = small_slots();
  settings.connect_timeout = std::chrono::seconds(10);
  weft::stream::process_config ordered;
  ordered.connect_timeout = std::chrono::seconds(10);
  for (const int rank0_size : {2, 3}) {
    different_world_sizes<weft::shm::transport>(settings, rank0_size);
    different_world_sizes<weft::stream::host_process_transport>(ordered, rank0_size);
  }
}

TEST_CASE("shm: a user reduction that throws on one rank fails every rank's call with its text",
          "[shm]") {
  for (const int thrower : {0, 3}) {
    INFO("rank " << thrower << " throws");
    failures sink;
    const auto started = std::chrono::steady_clock::now();
    run_world(4, small_slots(), sink, [&](shm_comm& comm) { thrown_case(comm, sink, thrower); });
    INFO(sink.summary());
    CHECK(sink.empty());
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
  }
}

TEST_CASE("shm: the collective slice as 3 calls in flight at once", "[shm][nonblocking]") {
  for (int p : {2, 4}) {
    failures sink;
    const std::vector<std::size_t> counts = {0,    1,    static_cast<std::size_t>(p) + 1,
                                             1023, 1025, many_slots()};
    run_world(p, small_slots(), sink,
              [&](shm_comm& comm) { collective_slice_in_flight(comm, sink, counts); });
    INFO("ranks " << p << ": " << sink.summary());
    CHECK(sink.empty());
  }
}

TEST_CASE("shm: the collective slice on 1-5 ranks, around the slot size", "[shm]") {
  // 4096-byte slots: 1024 int32 fill one; 1023, 1025 and many slots' worth around it.
  for (int p = 1; p <= 5; ++p) {
    failures sink;
    const std::vector<std::size_t> counts = {
        0, 1, static_cast<std::size_t>(p) + 1, 1023, 1024, 1025, many_slots()};
    run_world(p, small_slots(), sink,
              [&](shm_comm& comm) { collective_slice(comm, sink, counts); });
    INFO("ranks " << p << ": " << sink.summary());
    CHECK(sink.empty());
  }
}

TEMPLATE_TEST_CASE(
    "shm: a reducing receive combines straight from the slots, and from the sender's pool", "[shm]",
    std::int8_t, std::uint8_t, std::int32_t, std::uint32_t, std::int64_t, std::uint64_t, float,
    double, weft::half, weft::bfloat16) {
  using T = TestType;
  failures sink;
  // 64-byte slots: a message of 1000 elements crosses many; 2 slots: the sender waits for room.
  auto settings = small_slots(64, 2);
  settings.lend_bytes = 64;
  run_world(2, settings, sink, [&](shm_comm& comm) {
    auto& transport = comm.underlying_transport();
    auto check_op = [&](auto op, const char* name) {
      constexpr std::size_t count = 1000;
      std::vector<T> mine(count), theirs(count), target(count), expected(count);
      for (std::size_t i = 0; i < count; ++i) {
        mine[i] = from_int<T>(small_value(1, i));
        theirs[i] = from_int<T>(factor_value(0, i));
      }
      if (comm.rank() == 0) {  // from the heap through the slots, then lent from the pool
        pool_buffer<T> lent(comm.memory(), count);
        std::copy(theirs.begin(), theirs.end(), lent.data());
        auto send = transport.send(1, std::as_bytes(std::span(theirs)), 77);
        auto lend = transport.send(1, std::as_bytes(lent.span()), 78);
        if (!wait_for(transport, send) || !wait_for(transport, lend))
          sink.add(std::string(name) + ": send timed out");
        return;
      }
      weft::host_memory host;
      host.combine(std::span<T>(expected), std::span<const T>(mine), std::span<const T>(theirs),
                   op);
      weft::detail::reducer combine(transport.memory(), op, std::type_identity<T>{});
      for (const weft::tag_t tag : {77, 78}) {
        auto receive = transport.recv_reduce(0, std::as_writable_bytes(std::span(target)),
                                             std::as_bytes(std::span(mine)), tag, combine);
        if (!wait_for(transport, receive)) sink.add(std::string(name) + ": receive timed out");
        if (std::memcmp(target.data(), expected.data(), count * sizeof(T)) != 0)
          sink.add(std::string(name) + (tag == 77 ? ": from the slots" : ": lent") +
                   ", target != combine(own, incoming)");
      }
    };
    check_op(weft::sum{}, "sum");
    check_op(weft::prod{}, "prod");
    check_op(weft::min{}, "min");
    check_op(weft::max{}, "max");
    if constexpr (std::is_integral_v<T>) {
      check_op(weft::band{}, "band");
      check_op(weft::bor{}, "bor");
      check_op(weft::bxor{}, "bxor");
    }
  });
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("shm: messages of every size around the protocol's thresholds, up to 64 MiB", "[shm]") {
  // 4096-byte slots: pieces of up to 24 bytes travel in the slot's header line, larger ones in
  // its payload; a message longer than a slot takes several, longer than the FIFO waits for room.
  const std::size_t slot = 4096, line = weft::shm::detail::inline_bytes;
  std::vector<std::size_t> sizes = {0,
                                    1,
                                    line - 1,
                                    line,
                                    line + 1,
                                    63,
                                    64,
                                    65,
                                    slot - 1,
                                    slot,
                                    slot + 1,
                                    4 * slot - 1,
                                    4 * slot,
                                    4 * slot + 1,
                                    3 * slot + line,
                                    3 * slot + line + 1};
  if (!weft_test::quick()) sizes.push_back(std::size_t{64} << 20);
  failures sink;
  run_world(2, small_slots(slot, 4), sink, [&](shm_comm& comm) {
    auto& transport = comm.underlying_transport();
    const int peer = 1 - comm.rank();
    for (std::size_t index = 0; index < sizes.size(); ++index) {
      const std::size_t bytes = sizes[index];
      std::vector<std::byte> out(bytes), in(bytes, std::byte{0xee});
      for (std::size_t i = 0; i < bytes; ++i)
        out[i] = static_cast<std::byte>((i * 131 + bytes + comm.rank()) & 0xff);
      auto received = transport.recv(peer, std::span(in), index);
      auto sent = transport.send(peer, std::span<const std::byte>(out), index);
      if (!wait_for(transport, sent) || !wait_for(transport, received)) {
        sink.add("a message of " + std::to_string(bytes) + " bytes did not complete");
        return;
      }
      for (std::size_t i = 0; i < bytes; ++i) {
        if (in[i] != static_cast<std::byte>((i * 131 + bytes + peer) & 0xff)) {
          sink.add("a message of " + std::to_string(bytes) + " bytes differs at byte " +
                   std::to_string(i));
          break;
        }
      }
    }
  });
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("shm: messages that arrive before their receive, and a receive of the wrong size",
          "[shm]") {
  failures sink;
  run_world(2, small_slots(64, 64), sink, [&](shm_comm& comm) {
    auto& transport = comm.underlying_transport();
    std::vector<int> first(100, 1), second(300, 2);
    if (comm.rank() == 0) {
      auto a = transport.send(1, std::as_bytes(std::span(first)), 5);
      auto b = transport.send(1, std::as_bytes(std::span(second)), 6);
      auto c = transport.send(1, std::as_bytes(std::span(first)), 7);
      if (!wait_for(transport, a) || !wait_for(transport, b) || !wait_for(transport, c))
        sink.add("sends");
      return;
    }
    std::this_thread::sleep_for(50ms);  // every message arrived, none has its receive
    std::vector<int> got_second(300), got_first(100), wrong(99);
    auto rb = transport.recv(0, std::as_writable_bytes(std::span(got_second)), 6);
    auto ra = transport.recv(0, std::as_writable_bytes(std::span(got_first)), 5);
    if (!wait_for(transport, rb) || !wait_for(transport, ra) || got_second != second ||
        got_first != first)
      sink.add("early messages are delivered by tag");
    auto rc = transport.recv(0, std::as_writable_bytes(std::span(wrong)), 7);
    try {
      wait_for(transport, rc);
      sink.add("a receive of 99 ints matched a message of 100");
    } catch (const weft::error& failure) {
      if (failure.code() != weft::errc::mismatch)
        sink.add(std::string("not mismatch: ") + failure.what());
    }
  });
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("shm: a rank that closes its transport is peer_lost on the rank waiting for it",
          "[shm]") {
  meeting_place place("shm");
  std::string said;
  std::thread closer([&] { weft::shm::transport transport(1, 2, place.store(), small_slots()); });
  weft::shm::transport transport(0, 2, place.store(), small_slots());
  closer.join();
  int value = 0;
  auto receive = transport.recv(1, std::as_writable_bytes(std::span(&value, 1)), 1);
  const auto start = std::chrono::steady_clock::now();
  try {
    transport.wait(receive, weft::deadline_clock::now() + 10s);
  } catch (const weft::error& failure) {
    said = failure.what();
    CHECK(failure.code() == weft::errc::peer_lost);
  }
  CHECK_THAT(said, Catch::Contains("rank 1 closed its transport"));
  CHECK(std::chrono::steady_clock::now() - start < 1s);
}

TEST_CASE("shm: settings from the environment, and ranks that disagree on them", "[shm]") {
  {
    scoped_environment set(
        {{"WEFT_SHM_SLOT_BYTES", "16K"}, {"WEFT_SHM_SLOTS", "8"}, {"WEFT_SHM_SPIN_US", "100"}});
    const auto read = weft::shm::config::from_environment();
    CHECK(read.slot_bytes == 16384);
    CHECK(read.slots == 8);
    CHECK(read.spin == 100us);
  }
  {
    scoped_environment set("WEFT_SHM_SLOTS", "1");
    CHECK_THROWS_WITH(weft::shm::config::from_environment(), Catch::Contains("WEFT_SHM_SLOTS"));
  }
  meeting_place place("shm");
  std::string said;
  std::thread other([&] {
    try {
      weft::shm::transport transport(1, 2, place.store(), small_slots(4096, 8));
    } catch (const weft::error&) {
    }
  });
  try {
    auto settings = small_slots(4096, 4);
    settings.connect_timeout = 5s;
    weft::shm::transport transport(0, 2, place.store(), settings);
  } catch (const weft::error& failure) {
    said = failure.what();
  }
  other.join();
  CHECK_THAT(said,
             Catch::Contains(
                 "WEFT_SHM_SLOTS, WEFT_SHM_SLOT_BYTES and WEFT_SHM_POOL_BYTES must be the same"));
}

TEST_CASE("shm: the pool hands out 64-byte aligned memory, merges what comes back, then falls back",
          "[shm]") {
  auto settings = small_slots();
  settings.pool_bytes = 64 << 10;
  weft::shm::transport transport(0, 1, nullptr, settings);
  auto& memory = transport.memory();
  std::byte* a = memory.allocate(20000);
  std::byte* b = memory.allocate(20000);
  std::byte* c = memory.allocate(20000);
  std::byte* beyond = memory.allocate(20000);  // 60032 of 65536 bytes taken: not in the pool
  CHECK(memory.in_pool(a, 20000));
  CHECK(memory.in_pool(b, 20000));
  CHECK(memory.in_pool(c, 20000));
  CHECK(reinterpret_cast<std::uintptr_t>(b) % 64 == 0);
  CHECK_FALSE(memory.in_pool(beyond, 20000));
  CHECK_FALSE(memory.in_pool(c, 65536));
  memory.deallocate(a, 20000);
  memory.deallocate(b, 20000);
  std::byte* merged = memory.allocate(40000);  // a's and b's runs, merged
  CHECK(merged == a);
  memory.deallocate(merged, 40000);
  memory.deallocate(c, 20000);
  memory.deallocate(beyond, 20000);
  std::byte* whole = memory.allocate(65536);  // everything merged back into one run
  CHECK(memory.in_pool(whole, 65536));
  memory.deallocate(whole, 65536);
}

TEST_CASE("shm: messages lent from the pool, around the lend threshold, copied and combined",
          "[shm]") {
  // 64 KiB slots x 16: a message of up to 1 MiB from elsewhere is copied into the FIFO at once.
  auto settings = small_slots(64 << 10, 16);
  settings.lend_bytes = 8192;
  std::vector<std::size_t> sizes = {8191, 8192, 8193, 100000, std::size_t{3} << 20};
  if (!weft_test::quick()) sizes.push_back(std::size_t{64} << 20);
  failures sink;
  run_world(2, settings, sink, [&](shm_comm& comm) {
    auto& transport = comm.underlying_transport();
    const int peer = 1 - comm.rank();
    for (std::size_t index = 0; index < sizes.size(); ++index) {
      const std::size_t count =
          sizes[index] / sizeof(std::int32_t) * sizeof(std::int32_t) == sizes[index]
              ? sizes[index] / sizeof(std::int32_t)
              : sizes[index] / sizeof(std::int32_t) + 1;
      pool_buffer<std::int32_t> out(comm.memory(), count), own(comm.memory(), count),
          in(comm.memory(), count);
      std::vector<std::int32_t> heap(count);
      for (std::size_t i = 0; i < count; ++i) {
        out[i] = static_cast<std::int32_t>(i * 7 + index + 1000 * comm.rank());
        own[i] = static_cast<std::int32_t>(i);
      }
      const auto expected = [&](std::size_t i) {
        return static_cast<std::int32_t>(i * 7 + index + 1000 * peer);
      };
      // Copied into a heap buffer, then combined into pool memory: both read straight from the
      // pool.
      auto received = transport.recv(peer, std::as_writable_bytes(std::span(heap)), 2 * index);
      auto sent = transport.send(peer, std::as_bytes(out.span()), 2 * index);
      if (!wait_for(transport, sent) || !wait_for(transport, received)) {
        sink.add(std::to_string(count) + " ints did not arrive");
        return;
      }
      weft::detail::reducer add(comm.memory(), weft::sum{}, std::type_identity<std::int32_t>{});
      auto combined = transport.recv_reduce(peer, std::as_writable_bytes(in.span()),
                                            std::as_bytes(own.span()), 2 * index + 1, add);
      auto again = transport.send(peer, std::as_bytes(out.span()), 2 * index + 1);
      if (!wait_for(transport, again) || !wait_for(transport, combined)) {
        sink.add(std::to_string(count) + " ints were not combined");
        return;
      }
      for (std::size_t i = 0; i < count; ++i) {
        if (heap[i] != expected(i) || in[i] != expected(i) + static_cast<std::int32_t>(i)) {
          sink.add(std::to_string(count) + " ints differ at " + std::to_string(i));
          break;
        }
      }
    }
  });
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("shm: a lent send holds its buffer until it is read; withdrawn, the receive fails",
          "[shm]") {
  auto settings = small_slots(64 << 10, 16);
  settings.lend_bytes = 8192;
  failures sink;
  std::atomic<int> stage{0};
  run_world(2, settings, sink, [&](shm_comm& comm) {
    auto& transport = comm.underlying_transport();
    const std::size_t count = 65536;  // 256 KiB: copied, it would be in the FIFO at once
    if (comm.rank() == 0) {
      pool_buffer<int> lent(comm.memory(), count);
      std::vector<int> copied(count, 5);
      for (std::size_t i = 0; i < count; ++i) lent[i] = static_cast<int>(i);
      auto heap_send = transport.send(1, std::as_bytes(std::span(copied)), 1);
      if (!wait_for(transport, heap_send))
        sink.add("a 256 KiB send from the heap did not complete unread");
      {
        auto pool_send = transport.send(1, std::as_bytes(lent.span()), 2);
        std::this_thread::sleep_for(50ms);
        if (transport.test(pool_send))
          sink.add("a lent send completed before its receive was posted");
      }  // dropped unread: withdrawn
      stage = 1;
      auto kept = transport.send(1, std::as_bytes(lent.span()), 3);
      if (!wait_for(transport, kept))
        sink.add("a lent send after a withdrawn one did not complete");
      return;
    }
    while (stage.load() == 0) std::this_thread::sleep_for(1ms);
    std::vector<int> first(count), second(count), third(count);
    auto r1 = transport.recv(0, std::as_writable_bytes(std::span(first)), 1);
    if (!wait_for(transport, r1) || first != std::vector<int>(count, 5))
      sink.add("the copied message");
    auto r2 = transport.recv(0, std::as_writable_bytes(std::span(second)), 2);
    try {
      wait_for(transport, r2);
      sink.add("a withdrawn message was delivered");
    } catch (const weft::error& failure) {
      if (failure.code() != weft::errc::peer_lost ||
          std::string(failure.what()).find("withdrew") == std::string::npos)
        sink.add(std::string("a withdrawn message: ") + failure.what());
    }
    auto r3 = transport.recv(0, std::as_writable_bytes(std::span(third)), 3);
    if (!wait_for(transport, r3) || third[count - 1] != static_cast<int>(count - 1))
      sink.add("the lent message after it");
  });
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("shm: collectives on buffers from the pool, 2-4 ranks, around the lend threshold",
          "[shm]") {
  auto settings = small_slots(4096, 4);
  settings.lend_bytes = 4096;
  for (int p = 2; p <= 4; ++p) {
    failures sink;
    run_world(p, settings, sink, [&](shm_comm& comm) {
      for (const std::size_t count :
           {std::size_t{1000}, std::size_t{1024}, std::size_t{1025}, std::size_t{40000}}) {
        const int rank = comm.rank();
        const auto value = [&](int r, std::size_t i) {
          return static_cast<std::int32_t>((i % 1000) + 3 * r);
        };
        std::int32_t sum_of_ranks = 0;
        for (int r = 0; r < p; ++r) sum_of_ranks += 3 * r;
        const auto check_sum = [&](const char* what, std::span<const std::int32_t> got) {
          for (std::size_t i = 0; i < got.size(); ++i) {
            if (got[i] != static_cast<std::int32_t>(p * (i % 1000)) + sum_of_ranks) {
              sink.add(std::string(what) + ", " + std::to_string(count) + " ints, rank " +
                       std::to_string(rank) + ": element " + std::to_string(i));
              return;
            }
          }
        };
        for_each_algorithm<weft::ring, weft::recursive_halving, weft::recursive_doubling,
                           weft::direct, weft::double_binary_tree>([&](auto algorithm) {
          using A = typename decltype(algorithm)::type;
          pool_buffer<std::int32_t> data(comm.memory(), count), out(comm.memory(), count);
          for (std::size_t i = 0; i < count; ++i) data[i] = value(rank, i);
          weft::allreduce(comm, std::span<const std::int32_t>(data.span()), out.span(), weft::sum{},
                          A{});
          check_sum(A::name.data(), out.span());
          weft::allreduce(comm, data.span(), weft::sum{}, A{});
          check_sum(A::name.data(), data.span());
        });
        pool_buffer<std::int32_t> gathered(comm.memory(), count * p), mine(comm.memory(), count);
        for (std::size_t i = 0; i < count; ++i) mine[i] = value(rank, i);
        weft::allgather(comm, std::span<const std::int32_t>(mine.span()), gathered.span());
        for (int r = 0; r < p; ++r)
          for (std::size_t i = 0; i < count; ++i)
            if (gathered[r * count + i] != value(r, i)) {
              sink.add("allgather, " + std::to_string(count) + " ints: block " + std::to_string(r));
              r = p;
              break;
            }
        pool_buffer<std::int32_t> shipped(comm.memory(), count);
        for (std::size_t i = 0; i < count; ++i) shipped[i] = rank == p - 1 ? value(p - 1, i) : -1;
        weft::broadcast(comm, shipped.span(), p - 1);
        for (std::size_t i = 0; i < count; ++i)
          if (shipped[i] != value(p - 1, i)) {
            sink.add("broadcast, " + std::to_string(count) + " ints, rank " + std::to_string(rank));
            break;
          }
      }
    });
    INFO(p << " ranks: " << sink.summary());
    CHECK(sink.empty());
  }
}

TEST_CASE(
    "shm: messages from outside the pool lent by address (ranks in one process read them directly)",
    "[shm]") {
  auto settings = small_slots(4096, 4);
  settings.cma_bytes = 8192;
  std::vector<std::size_t> counts = {2047, 2048, 2049, 300000};
  failures sink;
  run_world(3, settings, sink, [&](shm_comm& comm) {
    auto& transport = comm.underlying_transport();
    if (transport.describe().find("readable on 2 of 2 peers") == std::string::npos)
      sink.add("rank " + std::to_string(comm.rank()) +
               " cannot read its peers: " + transport.describe());
    const int next = (comm.rank() + 1) % 3, previous = (comm.rank() + 2) % 3;
    for (std::size_t index = 0; index < counts.size(); ++index) {
      const std::size_t count = counts[index];
      std::vector<std::int32_t> out(count), own(count), got(count), combined(count);
      for (std::size_t i = 0; i < count; ++i) {
        out[i] = static_cast<std::int32_t>(i * 3 + index + 100 * comm.rank());
        own[i] = static_cast<std::int32_t>(i);
      }
      weft::detail::reducer add(comm.memory(), weft::sum{}, std::type_identity<std::int32_t>{});
      auto r1 = transport.recv(previous, std::as_writable_bytes(std::span(got)), 2 * index);
      auto r2 = transport.recv_reduce(previous, std::as_writable_bytes(std::span(combined)),
                                      std::as_bytes(std::span(own)), 2 * index + 1, add);
      auto s1 = transport.send(next, std::as_bytes(std::span(out)), 2 * index);
      auto s2 = transport.send(next, std::as_bytes(std::span(out)), 2 * index + 1);
      if (!wait_for(transport, s1) || !wait_for(transport, s2) || !wait_for(transport, r1) ||
          !wait_for(transport, r2)) {
        sink.add(std::to_string(count) + " ints did not arrive");
        return;
      }
      for (std::size_t i = 0; i < count; ++i) {
        const auto want = static_cast<std::int32_t>(i * 3 + index + 100 * previous);
        if (got[i] != want || combined[i] != want + static_cast<std::int32_t>(i)) {
          sink.add(std::to_string(count) + " ints differ at " + std::to_string(i));
          break;
        }
      }
    }
    weft::barrier(comm);
  });
  INFO(sink.summary());
  CHECK(sink.empty());
}
