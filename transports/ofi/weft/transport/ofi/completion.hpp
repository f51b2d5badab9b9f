// weft/transport/ofi/completion.hpp — how the libfabric transport learns what finished.
//
// Progress is manual: a waiting rank reads its completion queue, which is also what moves its
// peers' data on most providers. A message completes when its last piece does; an error entry
// is read by ofi/failure.hpp.
#pragma once

#include "weft/error.hpp"
#include "weft/transport/ofi/engine.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

#include <cstddef>

namespace weft::ofi::detail {

// Reads the completion queue once (and retries deferred posts); true if anything happened.
inline bool engine::progress() {
  if (ep_ == nullptr) return false;
  fi_cq_tagged_entry entries[16];
  bool any = false;
  {  // counted as one call into the provider (drain_backlog counts its own)
    provider_call call(calls_);
    while (true) {
      const ssize_t count = fi_cq_read(cq_, entries, 16);
      if (count == -FI_EAGAIN) break;
      if (count == -FI_EAVAIL) {
        read_error();
        any = true;
        continue;
      }
      if (count < 0) fail_call("fi_cq_read", static_cast<int>(count));
      for (ssize_t i = 0; i < count; ++i) {
        auto* p = static_cast<piece*>(entries[i].op_context);
        if (p == &peek_piece_) {  // a peek that found a message
          peeked_tag_ = entries[i].tag;
          peek_state_ = peek_state::found;
          continue;
        }
        complete(p, &entries[i]);
      }
      any = any || count > 0;
      if (count < 16) break;
    }
  }
  if (!backlog_.empty()) drain_backlog();
  return any;
}

inline void engine::complete(piece* p, const fi_cq_tagged_entry* entry) {
  operation* op = p->owner;
  if (entry != nullptr && !op->is_send && entry->len != p->size && op->state != status::failed) {
    fail(op, errc::mismatch, size_mismatch(op->size, entry->len, op->tag));
  }
  if (++op->completed < op->pieces.size()) return;
  --in_flight_;
  if (op->state == status::posted) op->state = status::done;
  registrations_.release(op->memory);
  op->memory = nullptr;
  if (op->orphan) release(op);
}

}  // namespace weft::ofi::detail
