// weft/dispatch/argument_checks.hpp — the checks every collective call makes on its own arguments
// before anything is sent: a root or peer that is not a rank, a negative tag, buffers of the
// wrong size or too large to count in bytes, sizes whose product or sum overflows, input and
// output overlapping other than in place. Each throws
// errc::invalid_argument naming the rank, the collective and what is wrong, and saying that
// nothing was sent.
#pragma once

#include "weft/communicator.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/error.hpp"
#include "weft/ops.hpp"
#include "weft/types.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace weft::detail {

[[noreturn]] inline void invalid(int rank, collective kind, const std::string& what) {
  throw error(errc::invalid_argument, "rank " + std::to_string(rank) + ": " +
                                          std::string(to_string(kind)) + ": " + what +
                                          "; nothing was sent");
}

template <class Comm>
void check_root(const Comm& comm, collective kind, int root) {
  if (root < 0 || root >= comm.size()) {
    invalid(comm.rank(), kind,
            "root " + std::to_string(root) + " is not a rank of this communicator (size " +
                std::to_string(comm.size()) + ")");
  }
}

// Point-to-point: `role` names the peer ("peer", "destination", "source") in the message.
template <class Comm>
void check_peer(const Comm& comm, collective kind, const char* role, int peer, int tag) {
  if (peer < 0 || peer >= comm.size()) {
    invalid(comm.rank(), kind,
            std::string(role) + " " + std::to_string(peer) +
                " is not a rank of this communicator (size " + std::to_string(comm.size()) + ")");
  }
  if (tag < 0) invalid(comm.rank(), kind, "tag " + std::to_string(tag) + " is negative");
}

inline bool overlaps(const_bytes a, const_bytes b) {
  if (a.empty() || b.empty()) return false;
  const auto* a_begin = a.data();
  const auto* b_begin = b.data();
  return std::less<>{}(a_begin, b_begin + b.size()) && std::less<>{}(b_begin, a_begin + a.size());
}

// `in` and `out` must be disjoint, or (where allowed) `in` must be exactly `allowed`.
template <class Comm>
void check_overlap(const Comm& comm, collective kind, const_bytes in, const_bytes out,
                   const_bytes allowed = {}) {
  if (!overlaps(in, out)) return;
  if (!allowed.empty() && in.data() == allowed.data() && in.size() == allowed.size()) return;
  invalid(comm.rank(), kind,
          allowed.empty() ? "input and output buffers overlap; use separate buffers"
                          : "input and output buffers overlap other than in place (in place means "
                            "the input is exactly this rank's part of the output)");
}

// A blocking send (or receive) to this rank itself waits for its own matching call, which the
// same thread can never make: refused at once rather than after the whole timeout.
template <class Comm>
void check_not_self(const Comm& comm, collective kind, int peer) {
  if (peer == comm.rank()) {
    invalid(comm.rank(), kind,
            std::string("a blocking ") + (kind == collective::send ? "send to" : "receive from") +
                " this rank itself can never be matched; use sendrecv (which posts both first)");
  }
}

// A buffer whose byte count does not fit a size_t (a span made from a wrong count) would pass
// every other check with its byte count wrapped, and the call would do nothing.
template <class Comm, class T>
void check_extent(const Comm& comm, collective kind, std::string_view what, std::span<T> buffer) {
  if (buffer.size() > SIZE_MAX / sizeof(T)) {
    invalid(comm.rank(), kind,
            std::string(what) + " has " + std::to_string(buffer.size()) + " elements of " +
                std::to_string(sizeof(T)) + " bytes, more bytes than a size_t counts");
  }
}

// a * b elements, refused when the product overflows (it would wrap to a small size that the
// buffers could then match).
template <class Comm>
std::size_t product(const Comm& comm, collective kind, std::string_view what, std::size_t a,
                    std::size_t b) {
  std::size_t result = 0;
  if (__builtin_mul_overflow(a, b, &result)) {
    invalid(comm.rank(), kind,
            std::string(what) + ": " + std::to_string(a) + " x " + std::to_string(b) +
                " elements overflows");
  }
  return result;
}

// The sum of `counts`, refused when it overflows.
template <class Comm>
std::size_t total(const Comm& comm, collective kind, std::string_view what,
                  std::span<const std::size_t> counts) {
  std::size_t result = 0;
  for (const std::size_t count : counts) {
    if (__builtin_add_overflow(result, count, &result)) {
      invalid(comm.rank(), kind,
              std::string(what) + " add up to more elements than a size_t counts");
    }
  }
  return result;
}

template <class Comm>
void check_size(const Comm& comm, collective kind, std::string_view what, std::size_t actual,
                std::size_t expected) {
  if (actual != expected) {
    invalid(comm.rank(), kind,
            std::string(what) + " has " + std::to_string(actual) + " elements but must have " +
                std::to_string(expected));
  }
}

template <class T, class Op, class Comm>
void finalize_result(Comm& comm, const Op& op, std::span<T> result) {
  if constexpr (has_finalize_v<Op, T>) comm.memory().finalize(result, op, comm.size());
}

}  // namespace weft::detail
