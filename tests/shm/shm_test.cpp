// The shared-memory transport in one process: each rank is a thread with its own region,
// meeting through a file store in a fresh directory. Conformance, the collective slice on 1-5
// ranks at sizes around the slot size, reducing receives for every type and reduction, slots
// too small for a message, early messages, a rank that closes; processes, killed ranks and
// what is left in /dev/shm are in tests/multiprocess/multiprocess.py (scenario shm).
#include "../collective_cases.hpp"
#include "../scoped_environment.hpp"
#include "../meeting_place.hpp"
#include "../transport_conformance.hpp"

#include <weft/bootstrap/file_store.hpp>
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

weft::shm::config small_slots(std::size_t slot_bytes = 4096, std::size_t slots = 4) {
  weft::shm::config settings;
  settings.connect_timeout = 20s;
  settings.secret = "test";
  settings.slot_bytes = slot_bytes;
  settings.slots = slots;
  return settings;
}

void run_world(int p, const weft::shm::config& settings, failures& sink, const std::function<void(shm_comm&)>& fn) {
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

TEST_CASE("shm: the collective slice on 1-5 ranks, around the slot size", "[shm]") {
  // 4096-byte slots: 1024 int32 fill one; 1023, 1025 and many slots' worth around it.
  for (int p = 1; p <= 5; ++p) {
    failures sink;
    const std::vector<std::size_t> counts = {0, 1, static_cast<std::size_t>(p) + 1, 1023, 1024, 1025, 65539};
    run_world(p, small_slots(), sink, [&](shm_comm& comm) { collective_slice(comm, sink, counts); });
    INFO("ranks " << p << ": " << sink.summary());
    CHECK(sink.empty());
  }
}

TEMPLATE_TEST_CASE("shm: a reducing receive combines straight from the slots", "[shm]", std::int8_t, std::uint8_t,
                   std::int32_t, std::uint32_t, std::int64_t, std::uint64_t, float, double, weft::half,
                   weft::bfloat16) {
  using T = TestType;
  failures sink;
  // 64-byte slots: a message of 1000 elements crosses many; 2 slots: the sender waits for room.
  run_world(2, small_slots(64, 2), sink, [&](shm_comm& comm) {
    auto& transport = comm.underlying_transport();
    auto check_op = [&](auto op, const char* name) {
      constexpr std::size_t count = 1000;
      std::vector<T> mine(count), theirs(count), target(count), expected(count);
      for (std::size_t i = 0; i < count; ++i) {
        mine[i] = from_int<T>(small_value(1, i));
        theirs[i] = from_int<T>(factor_value(0, i));
      }
      if (comm.rank() == 0) {
        auto send = transport.send(1, std::as_bytes(std::span(theirs)), 77);
        if (!wait_for(transport, send)) sink.add(std::string(name) + ": send timed out");
        return;
      }
      weft::host_memory host;
      host.combine(std::span<T>(expected), std::span<const T>(mine), std::span<const T>(theirs), op);
      weft::detail::reducer combine(transport.memory(), op, std::type_identity<T>{});
      auto receive = transport.recv_reduce(0, std::as_writable_bytes(std::span(target)),
                                           std::as_bytes(std::span(mine)), 77, combine);
      if (!wait_for(transport, receive)) sink.add(std::string(name) + ": receive timed out");
      if (std::memcmp(target.data(), expected.data(), count * sizeof(T)) != 0)
        sink.add(std::string(name) + ": target != combine(own, incoming)");
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
  std::vector<std::size_t> sizes = {0, 1, line - 1, line, line + 1, 63, 64, 65, slot - 1, slot, slot + 1,
                                    4 * slot - 1, 4 * slot, 4 * slot + 1, 3 * slot + line, 3 * slot + line + 1};
  if (std::getenv("WEFT_TEST_QUICK") == nullptr) sizes.push_back(std::size_t{64} << 20);  // not under the sanitizers
  failures sink;
  run_world(2, small_slots(slot, 4), sink, [&](shm_comm& comm) {
    auto& transport = comm.underlying_transport();
    const int peer = 1 - comm.rank();
    for (std::size_t index = 0; index < sizes.size(); ++index) {
      const std::size_t bytes = sizes[index];
      std::vector<std::byte> out(bytes), in(bytes, std::byte{0xee});
      for (std::size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::byte>((i * 131 + bytes + comm.rank()) & 0xff);
      auto received = transport.recv(peer, std::span(in), index);
      auto sent = transport.send(peer, std::span<const std::byte>(out), index);
      if (!wait_for(transport, sent) || !wait_for(transport, received)) {
        sink.add("a message of " + std::to_string(bytes) + " bytes did not complete");
        return;
      }
      for (std::size_t i = 0; i < bytes; ++i) {
        if (in[i] != static_cast<std::byte>((i * 131 + bytes + peer) & 0xff)) {
          sink.add("a message of " + std::to_string(bytes) + " bytes differs at byte " + std::to_string(i));
          break;
        }
      }
    }
  });
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("shm: messages that arrive before their receive, and a receive of the wrong size", "[shm]") {
  failures sink;
  run_world(2, small_slots(64, 64), sink, [&](shm_comm& comm) {
    auto& transport = comm.underlying_transport();
    std::vector<int> first(100, 1), second(300, 2);
    if (comm.rank() == 0) {
      auto a = transport.send(1, std::as_bytes(std::span(first)), 5);
      auto b = transport.send(1, std::as_bytes(std::span(second)), 6);
      auto c = transport.send(1, std::as_bytes(std::span(first)), 7);
      if (!wait_for(transport, a) || !wait_for(transport, b) || !wait_for(transport, c)) sink.add("sends");
      return;
    }
    std::this_thread::sleep_for(50ms);  // every message arrived, none has its receive
    std::vector<int> got_second(300), got_first(100), wrong(99);
    auto rb = transport.recv(0, std::as_writable_bytes(std::span(got_second)), 6);
    auto ra = transport.recv(0, std::as_writable_bytes(std::span(got_first)), 5);
    if (!wait_for(transport, rb) || !wait_for(transport, ra) || got_second != second || got_first != first)
      sink.add("early messages are delivered by tag");
    auto rc = transport.recv(0, std::as_writable_bytes(std::span(wrong)), 7);
    try {
      wait_for(transport, rc);
      sink.add("a receive of 99 ints matched a message of 100");
    } catch (const weft::error& failure) {
      if (failure.code() != weft::errc::mismatch) sink.add(std::string("not mismatch: ") + failure.what());
    }
  });
  INFO(sink.summary());
  CHECK(sink.empty());
}

TEST_CASE("shm: a rank that closes its transport is peer_lost on the rank waiting for it", "[shm]") {
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
    scoped_environment set({{"WEFT_SHM_SLOT_BYTES", "16K"}, {"WEFT_SHM_SLOTS", "8"}, {"WEFT_SHM_SPIN_US", "100"}});
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
  CHECK_THAT(said, Catch::Contains("WEFT_SHM_SLOTS and WEFT_SHM_SLOT_BYTES must be the same"));
}
