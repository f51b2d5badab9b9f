// The one environment reader (weft/detail/env.hpp) and the communicator's variables read through
// it: unset and empty keep the default; garbage, negative numbers, units and overflow are refused
// naming the variable and its value; sizes take K, M, G and T suffixes.
#include "../scoped_environment.hpp"

#include <weft/communicator.hpp>
#include <weft/detail/env.hpp>
#include <weft/dispatch/selection.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <string>

using weft_test::scoped_environment;
using namespace std::chrono_literals;
namespace env = weft::detail::env;

namespace {

// Throws invalid_argument naming the variable and the value it was given.
void refused(const char* name, const char* value, auto read) {
  scoped_environment set(name, value);
  try {
    read();
    FAIL_CHECK(name << "='" << value << "' was accepted");
  } catch (const weft::error& failure) {
    CHECK(failure.code() == weft::errc::invalid_argument);
    CHECK_THAT(failure.what(), Catch::Contains(std::string(name) + "='" + value + "'"));
  }
}

}  // namespace

TEST_CASE("whole numbers: exact digits within the limit, nothing else", "[env]") {
  CHECK(env::parse_count("0", 10) == 0u);
  CHECK(env::parse_count("10", 10) == 10u);
  CHECK(env::parse_count("18446744073709551615", UINT64_MAX) == UINT64_MAX);
  CHECK_FALSE(env::parse_count("18446744073709551616", UINT64_MAX));
  CHECK_FALSE(env::parse_count("11", 10));
  CHECK_FALSE(env::parse_count("2", 1));
  CHECK(env::parse_count("1", 1) == 1u);
  for (const char* bad : {"", "-1", "+1", " 1", "1 ", "1.5", "1e3", "0x10", "abc", "3000ms"})
    CHECK_FALSE(env::parse_count(bad, UINT64_MAX));
}

TEST_CASE("sizes: bytes with binary K, M, G, T suffixes", "[env]") {
  CHECK(env::parse_bytes("65536", UINT64_MAX) == 65536u);
  CHECK(env::parse_bytes("64K", UINT64_MAX) == 64u << 10);
  CHECK(env::parse_bytes("64k", UINT64_MAX) == 64u << 10);
  CHECK(env::parse_bytes("64KiB", UINT64_MAX) == 64u << 10);
  CHECK(env::parse_bytes("64KB", UINT64_MAX) == 64u << 10);
  CHECK(env::parse_bytes("4M", UINT64_MAX) == 4u << 20);
  CHECK(env::parse_bytes("1G", UINT64_MAX) == 1u << 30);
  CHECK(env::parse_bytes("2T", UINT64_MAX) == std::uint64_t{2} << 40);
  CHECK(env::parse_bytes("100B", UINT64_MAX) == 100u);
  CHECK_FALSE(env::parse_bytes("16777216T", UINT64_MAX));  // 2^64: wraps
  CHECK_FALSE(env::parse_bytes("2G", (std::uint64_t{1} << 31) - 1));
  for (const char* bad : {"K", "B", "iB", "4iB", "4X", "4 M", "-4M", "4.5M", "M4"})
    CHECK_FALSE(env::parse_bytes(bad, UINT64_MAX));
}

TEST_CASE("unset and empty variables alike keep the default", "[env]") {
  const weft::options defaults;
  for (const char* name : {"WEFT_TIMEOUT_MS", "WEFT_CHUNK_BYTES", "WEFT_REDUCE_CHUNK_BYTES",
                           "WEFT_HANDSHAKE_BYTES", "WEFT_CHECK", "WEFT_ALGO"}) {
    for (const char* value : {static_cast<const char*>(nullptr), ""}) {
      scoped_environment set(name, value);
      const auto read = weft::options::from_environment();
      CHECK(read.timeout == defaults.timeout);
      CHECK(read.chunk_bytes == defaults.chunk_bytes);
      CHECK(read.reduce_chunk_bytes == defaults.reduce_chunk_bytes);
      CHECK(read.handshake_bytes == defaults.handshake_bytes);
      CHECK(read.check == defaults.check);
      CHECK(weft::tuning::algorithm_override(weft::collective::allreduce).empty());
    }
  }
}

TEST_CASE("the communicator's variables are read exactly", "[env]") {
  {
    scoped_environment set({{"WEFT_TIMEOUT_MS", "2500"},
                            {"WEFT_CHUNK_BYTES", "256K"},
                            {"WEFT_REDUCE_CHUNK_BYTES", "64KiB"},
                            {"WEFT_HANDSHAKE_BYTES", "0"},
                            {"WEFT_CHECK", "yes"}});
    const auto read = weft::options::from_environment();
    CHECK(read.timeout == 2500ms);
    CHECK(read.chunk_bytes == 256u << 10);
    CHECK(read.reduce_chunk_bytes == 64u << 10);
    CHECK(read.handshake_bytes == 0u);
    CHECK(read.check);
  }
  {
    scoped_environment set(
        {{"WEFT_CHECK", "0"}, {"WEFT_CHUNK_BYTES", "4K"}, {"WEFT_REDUCE_CHUNK_BYTES", "0"}});
    const auto read = weft::options::from_environment();
    CHECK_FALSE(read.check);
    CHECK(read.chunk_bytes == 4096u);      // the smallest piece the environment may ask for
    CHECK(read.reduce_chunk_bytes == 0u);  // 0: the transport's measured size
  }
}

TEST_CASE("a timeout of 0 and pieces under the floor are refused, naming the variable", "[env]") {
  auto options = [] { return weft::options::from_environment(); };
  refused("WEFT_TIMEOUT_MS", "0", options);
  for (const char* value : {"0", "1", "4095", "1K"}) refused("WEFT_CHUNK_BYTES", value, options);
  for (const char* value : {"1", "4095"}) refused("WEFT_REDUCE_CHUNK_BYTES", value, options);
  scoped_environment set("WEFT_CHUNK_BYTES", "1");
  try {
    (void)weft::options::from_environment();
    FAIL("WEFT_CHUNK_BYTES=1 was taken");
  } catch (const weft::error& failure) {
    CHECK_THAT(failure.what(),
               Catch::Contains("WEFT_CHUNK_BYTES") && Catch::Contains("at least 4096 bytes"));
  }
  // Every reader of WEFT_TIMEOUT_MS (the transports' start-up too) goes through env::timeout().
  refused("WEFT_TIMEOUT_MS", "0", [] { (void)weft::detail::env::timeout(); });
}

TEST_CASE("the communicator's variables refuse what they cannot read", "[env]") {
  auto options = [] { return weft::options::from_environment(); };
  for (const char* value : {"abc", "3000ms", "-1", "1.5", "1e4", "99999999999999999999"})
    refused("WEFT_TIMEOUT_MS", value, options);
  for (const char* name : {"WEFT_CHUNK_BYTES", "WEFT_REDUCE_CHUNK_BYTES", "WEFT_HANDSHAKE_BYTES"}) {
    for (const char* value : {"abc", "-1", "4X", "1.5M", "99999999999999999999"})
      refused(name, value, options);
  }
  // A piece of more than 1 TiB is refused rather than left to wrap a piece count.
  refused("WEFT_CHUNK_BYTES", "2T", options);
  refused("WEFT_REDUCE_CHUNK_BYTES", "18446744073709551615", options);
  for (const char* value : {"2", "maybe", "TRUE "}) refused("WEFT_CHECK", value, options);
}

TEST_CASE("WEFT_ALGO: every item is read, and a malformed one is refused", "[env]") {
  using weft::collective;
  {
    scoped_environment set("WEFT_ALGO", "broadcast=ring,,allreduce=recursive_halving,");
    CHECK(weft::tuning::algorithm_override(collective::allreduce) == "recursive_halving");
    CHECK(weft::tuning::algorithm_override(collective::broadcast) == "ring");
    CHECK(weft::tuning::algorithm_override(collective::alltoall).empty());
  }
  for (const char* bad :
       {"Allreduce=ring", "allreduce = ring", "allreduce= ring", "banana",
        "allreduce=", "allreduce=ring,banana", "allreduce=ring=direct", "sendrecv=direct"}) {
    INFO(bad);
    scoped_environment set("WEFT_ALGO", bad);
    try {
      static_cast<void>(weft::tuning::algorithm_override(collective::allreduce));
      FAIL("accepted WEFT_ALGO=" << bad);
    } catch (const weft::error& failure) {
      CHECK(failure.code() == weft::errc::invalid_argument);
      CHECK_THAT(failure.what(),
                 Catch::Contains("WEFT_ALGO") && Catch::Contains("collective=algorithm"));
    }
  }
}
