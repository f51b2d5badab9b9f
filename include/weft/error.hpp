// weft/error.hpp — the one exception type weft throws, sorted by what the caller does next.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace weft {

// What went wrong, grouped by what the caller should do next.
enum class errc {
  invalid_argument,  // fix the call: nothing was sent
  mismatch,          // ranks called different collectives / counts / types / ops / roots
  timeout,           // a peer did not answer in time: it is slow, stuck or absent
  peer_lost,         // a peer failed or went away: rebuild the communicator without it
  transport,         // the transport itself failed
  revoked,           // a rank revoked the communicator (after a failure): shrink it and go on
};

constexpr std::string_view to_string(errc code) noexcept {
  switch (code) {
    case errc::invalid_argument:
      return "invalid_argument";
    case errc::mismatch:
      return "mismatch";
    case errc::timeout:
      return "timeout";
    case errc::peer_lost:
      return "peer_lost";
    case errc::transport:
      return "transport";
    case errc::revoked:
      return "revoked";
  }
  return "unknown";
}

// Every message starts with "weft: <code>:" and names the rank, and where one is involved,
// the peer, the collective, the algorithm and the step.
class error : public std::runtime_error {
 public:
  error(errc code, const std::string& message)
      : std::runtime_error("weft: " + std::string(to_string(code)) + ": " + message), code_(code) {}
  // `culprit`: the rank whose failure is the cause (see culprit()).
  error(errc code, const std::string& message, int culprit) : error(code, message) {
    culprit_ = culprit;
  }

  errc code() const noexcept { return code_; }
  // For peer_lost: the rank first lost, as the job numbers its ranks (the world's rank, whatever
  // communicator the call was on), when the thrower knows it; -1 otherwise. A rank that fails
  // because a live peer gave up after a loss names the rank that was lost, not that peer.
  int culprit() const noexcept { return culprit_; }

 private:
  errc code_;
  int culprit_ = -1;
};

namespace detail {
// A job-wide notice of a mismatch (weft/communicator/consistency.hpp) starts with
// mismatch_notice and ends with mismatch_advice: a rank that hears it fails with
// errc::mismatch, quoting it, however its transport words the notice.
inline constexpr std::string_view mismatch_notice = "calls differ: ";
inline constexpr std::string_view mismatch_advice =
    "every rank must make the same collective calls in the same order with matching arguments "
    "(WEFT_CHECK=1 compares every call in full)";

// The notice from `start` to the end of `end` quoted in `message`, or empty.
inline std::string_view quoted_notice(std::string_view message, std::string_view start,
                                      std::string_view end) {
  const auto at = message.find(start);
  if (at == std::string_view::npos) return {};
  const auto last = message.find(end, at);
  return message.substr(
      at, last == std::string_view::npos ? std::string_view::npos : last + end.size() - at);
}

// The mismatch notice quoted in `message`, or empty.
inline std::string_view quoted_mismatch(std::string_view message) {
  return quoted_notice(message, mismatch_notice, mismatch_advice);
}

// A job-wide notice that a rank's call ended by an exception of its own (a user reduction threw,
// memory ran out): it starts with thrown_notice and ends with thrown_end, and carries the
// exception's text. A rank that hears it fails with errc::peer_lost quoting it: the thrower is
// alive, but its communicator is out of step with the others' for good.
inline constexpr std::string_view thrown_notice = "a call threw on ";
inline constexpr std::string_view thrown_end = " (that rank's own exception)";

inline std::string_view quoted_thrown(std::string_view message) {
  return quoted_notice(message, thrown_notice, thrown_end);
}

// A job-wide notice that a rank revoked its communicator (communicator::revoke): it starts with
// revoked_notice and ends with revoked_end. A rank that hears it fails with errc::revoked quoting
// it, whether or not it noticed a failure itself.
inline constexpr std::string_view revoked_notice = "communicator revoked by ";
inline constexpr std::string_view revoked_end = " (revoked: shrink it to go on)";

inline std::string_view quoted_revoked(std::string_view message) {
  return quoted_notice(message, revoked_notice, revoked_end);
}

// A start-up notice that ranks were given different world sizes (a transport's meeting finds it):
// every rank fails with errc::mismatch quoting it.
inline constexpr std::string_view sizes_notice = "world sizes differ: ";
inline constexpr std::string_view sizes_advice =
    "every rank must be given the same world size (WEFT_SIZE, the launcher's task count, "
    "torch.distributed's world_size)";

// The notice: `started` ("rank 1") was started for a world of `size` ranks, `other` for one of
// `other_size`.
inline std::string sizes_differ(const std::string& started, std::string_view size,
                                const std::string& other, std::string_view other_size) {
  return std::string(sizes_notice) + started + " was started for a world of " + std::string(size) +
         " ranks, " + other + " for one of " + std::string(other_size) + "; " +
         std::string(sizes_advice);
}

inline std::string_view quoted_sizes(std::string_view message) {
  return quoted_notice(message, sizes_notice, sizes_advice);
}

// A message of weft's without its "weft: <code>: " and the first clause after it (the rank), to be
// quoted inside another rank's or call's message.
inline std::string strip_prefix(const char* message) {
  std::string_view text(message);
  if (text.starts_with("weft: ")) {
    text.remove_prefix(6);
    if (const auto colon = text.find(": "); colon != std::string_view::npos)
      text.remove_prefix(colon + 2);
  }
  return std::string(text);
}
}  // namespace detail

}  // namespace weft
