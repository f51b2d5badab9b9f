// weft/transport/ofi/wire.hpp — what the libfabric transport keeps per posted send or
// receive (split into pieces no longer than the provider's largest message) and per memory
// registration.
#pragma once

#include "weft/error.hpp"
#include "weft/transport.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::ofi::detail {

enum class status : std::uint8_t { idle, queued, posted, done, failed };

struct operation;

// One fabric-level post: a whole message, or one piece of a message longer than the provider's
// largest. The fi_context2 comes first: providers that ask for FI_CONTEXT2 write into it.
struct piece {
  fi_context2 context{};
  operation* owner = nullptr;
  std::byte* data = nullptr;
  std::size_t size = 0;
  bool posted = false;
};

struct registration {
  fid_mr* mr = nullptr;
  std::uintptr_t begin = 0, end = 0;
  int users = 0;
  std::uint64_t last_use = 0;
};

struct operation {
  bool is_send = false;
  int peer = 0;
  tag_t tag = 0;
  std::byte* data = nullptr;  // receive buffer, or the send buffer (never written)
  std::size_t size = 0;
  status state = status::idle;
  std::vector<piece> pieces;
  std::size_t completed = 0;
  registration* memory = nullptr;
  bool orphan = false;  // its request is gone; freed once the fabric is done with it
  bool cancelling = false;
  errc code = errc::transport;
  std::string failure;
  int culprit = -1;              // a failure's lost rank, -1 when none
  operation* partner = nullptr;  // self-sends: the matching operation
};

inline std::string text_of(int code) { return fi_strerror(code < 0 ? -code : code); }

}  // namespace weft::ofi::detail
