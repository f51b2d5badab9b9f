// weft/transport/shm/config.hpp — what the shared-memory transport can be tuned with, and the
// variables that set it (docs/tuning.md lists them all).
#pragma once

#include "weft/bootstrap/environment.hpp"
#include "weft/detail/env.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::shm {

struct config {
  std::string prefix = "weft";  // store keys start with it
  std::string secret;           // a peer must present it to be handed this rank's region
  // The rank of the job each rank here is, for messages, when these ranks are one host of a
  // larger job (weft::tiered); empty: the ranks are the job's.
  std::vector<int> job_ranks;
  std::chrono::milliseconds connect_timeout{std::chrono::minutes(5)};  // the whole start-up
  std::size_t slot_bytes = std::size_t{64} << 10;                      // payload of one slot
  std::size_t slots = 16;                 // slots per pair and direction
  std::chrono::microseconds spin{20000};  // how long a wait polls before it sleeps
  std::size_t pool_bytes = std::size_t{1}
                           << 30;  // the pool peers map (0: none); untouched pages cost nothing
  std::size_t lend_bytes = std::size_t{64}
                           << 10;  // a send from the pool this large is lent, not copied
  std::size_t cma_bytes =
      std::size_t{1}
      << 20;  // a send from other memory this large is read by process_vm_readv (0: never)

  // WEFT_TIMEOUT_MS; WEFT_SHM_SLOT_BYTES; WEFT_SHM_SLOTS; WEFT_SHM_SPIN_US; WEFT_SHM_POOL_BYTES;
  // WEFT_SHM_LEND_BYTES; WEFT_SHM_CMA_BYTES (docs/tuning.md); a value that cannot be read is
  // refused.
  static config from_environment() {
    namespace env = weft::detail::env;
    config result;
    if (const auto value = env::timeout()) result.connect_timeout = *value;
    if (const auto value = env::bytes("WEFT_SHM_SLOT_BYTES", std::size_t{64} << 20)) {
      if (*value < 64)
        env::refuse("WEFT_SHM_SLOT_BYTES", std::to_string(*value), "at least 64 bytes");
      result.slot_bytes = static_cast<std::size_t>(*value);
    }
    if (const auto value = env::count("WEFT_SHM_SLOTS", 4096)) {
      if (*value < 2) env::refuse("WEFT_SHM_SLOTS", std::to_string(*value), "at least 2 slots");
      result.slots = static_cast<std::size_t>(*value);
    }
    if (const auto value = env::microseconds("WEFT_SHM_SPIN_US")) result.spin = *value;
    if (const auto value = env::bytes("WEFT_SHM_POOL_BYTES", std::uint64_t{1} << 40)) {
      result.pool_bytes = static_cast<std::size_t>(*value);
    }
    if (const auto value = env::bytes("WEFT_SHM_LEND_BYTES", std::uint64_t{1} << 40)) {
      result.lend_bytes = static_cast<std::size_t>(*value);
    }
    if (const auto value = env::bytes("WEFT_SHM_CMA_BYTES", std::uint64_t{1} << 40)) {
      result.cma_bytes = static_cast<std::size_t>(*value);
    }
    return result;
  }

  // What the launch settled (weft::basic_session calls it): the job's secret.
  void adopt(const bootstrap::launch&, const std::string& job_secret) { secret = job_secret; }
};

}  // namespace weft::shm
