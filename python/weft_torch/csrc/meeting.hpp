// weft_torch/csrc/meeting.hpp — what every transport's process group settles before it connects:
// the communicator's options, the job's secret, and the store wrapped for weft.
#pragma once

#include "process_group.hpp"
#include "store.hpp"

#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "weft/bootstrap/secret.hpp"
#include "weft/detail/env.hpp"
#include "weft/error.hpp"
#include "weft/options.hpp"

#include <chrono>
#include <string>

namespace weft_torch {

// What a transport's maker gets from torch.distributed.
struct group_request {
  c10::intrusive_ptr<c10d::Store> store;
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{};  // init_process_group's / new_group's timeout
};

// WEFT_TIMEOUT_MS when set, else torch.distributed's timeout: how long any wait may block, and
// how long the start-up may take.
inline std::chrono::milliseconds timeout_of(const group_request& request) {
  if (const auto value = weft::detail::env::timeout()) return *value;
  return request.timeout;
}

// weft's options from the environment (WEFT_ALGO, WEFT_CHECK, ...) with the group's timeout.
inline weft::options options_for(const group_request& request) {
  auto settings = weft::options::from_environment();
  settings.timeout = timeout_of(request);
  return settings;
}

// WEFT_SECRET, else one rank 0 draws and hands the others through the store: connections
// between the group's ranks must present it.
inline std::string group_secret(weft::bootstrap::store& meeting, const group_request& request) {
  if (const auto value = weft::detail::env::text("WEFT_SECRET")) return std::string(*value);
  if (request.size == 1) return {};
  return weft::bootstrap::shared_secret(meeting, request.rank,
                                        weft::deadline_clock::now() + timeout_of(request));
}

// The makers, one per transport built (tcp.cpp, shm.cpp, ofi.cpp).
c10::intrusive_ptr<process_group> make_tcp(const group_request& request);
c10::intrusive_ptr<process_group> make_shm(const group_request& request);
c10::intrusive_ptr<process_group> make_ofi(const group_request& request);

}  // namespace weft_torch
