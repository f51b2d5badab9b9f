// weft/transport/ofi/config.hpp — what the libfabric transport can be tuned with, and the
// variables that set it (docs/tuning.md lists them all).
#pragma once

#include "weft/detail/env.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::ofi {

struct config {
  std::string provider;  // e.g. "shm", "tcp;ofi_rxm", "verbs;ofi_rxm", "efa", "cxi"; empty: the
                         // first RDM provider fi_getinfo offers
  std::string node;      // address to open the endpoint on (tcp-family providers), empty: default
  std::string prefix = "weft";  // store keys start with it
  std::chrono::milliseconds connect_timeout{std::chrono::minutes(5)};
  bool always_register = false;  // register buffers even when the provider does not ask (testing)
  std::size_t max_message = 0;   // split messages above this many bytes (0: the provider's limit)
  bool log =
      true;  // rank 0 prints the chosen provider and fabric at start-up (WEFT_OFI_QUIET=1: not)
  std::chrono::microseconds spin{1000};  // how long a wait polls before it also naps

  // WEFT_OFI_PROVIDER, else FI_PROVIDER; WEFT_OFI_NODE; WEFT_TIMEOUT_MS; WEFT_OFI_QUIET;
  // WEFT_OFI_REGISTER; WEFT_OFI_MAX_MESSAGE; WEFT_OFI_SPIN_US (docs/tuning.md); a value that
  // cannot be read is refused.
  static config from_environment() {
    namespace env = weft::detail::env;
    config result;
    if (const auto value = env::text("WEFT_OFI_PROVIDER")) {
      result.provider = *value;
    } else if (const auto fallback = env::text("FI_PROVIDER")) {
      result.provider = *fallback;
    }
    if (const auto value = env::text("WEFT_OFI_NODE")) result.node = *value;
    if (const auto value = env::timeout()) result.connect_timeout = *value;
    if (const auto value = env::flag("WEFT_OFI_QUIET")) result.log = !*value;
    if (const auto value = env::bytes("WEFT_OFI_MAX_MESSAGE", SIZE_MAX))
      result.max_message = static_cast<std::size_t>(*value);
    if (const auto value = env::flag("WEFT_OFI_REGISTER")) result.always_register = *value;
    if (const auto value = env::microseconds("WEFT_OFI_SPIN_US")) result.spin = *value;
    return result;
  }
};

}  // namespace weft::ofi
