// weft/bootstrap/secret.hpp — the job's secret: how it is settled, presented and compared.
//
// Every connection between a job's ranks presents the job's secret (WEFT_SECRET, or one rank 0
// draws and hands out through the store): the TCP store's hello, the tcp transport's handshake,
// the shm transport's region handover. A presented secret is at most max_secret_bytes long and
// compared in time independent of where it differs.
#pragma once

#include "weft/bootstrap/environment.hpp"
#include "weft/bootstrap/store.hpp"
#include "weft/error.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <string_view>

namespace weft::bootstrap {

inline constexpr std::size_t max_secret_bytes = 256;

// Compares in time independent of where the first difference is.
inline bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (std::size_t i = 0; i < a.size(); ++i) difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  return difference == 0;
}

// 64-bit FNV-1a, in hex: a short stand-in for a name too long, or not a file name.
inline std::string short_hash(std::string_view text) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(hash));
  return out;
}

// What a connection to the job's store presents: WEFT_SECRET and the job's identity, so that a
// rank of another job reaching this job's store is refused at once (an identity that would make
// it longer than max_secret_bytes is replaced by its hash).
inline std::string presented_secret(const launch& where) {
  if (where.job.empty() || where.secret.size() > max_secret_bytes) return where.secret;
  std::string presented = where.secret + "\njob " + where.job;
  if (presented.size() > max_secret_bytes) {
    presented = where.secret.substr(0, max_secret_bytes - 24) + "\njob#" + short_hash(where.job);
  }
  return presented;
}

// A fresh secret: 128 random bits, in hex.
inline std::string drawn_secret() {
  std::random_device entropy;
  std::string secret;
  for (int i = 0; i < 4; ++i) {
    char piece[9];
    std::snprintf(piece, sizeof piece, "%08x", entropy());
    secret += piece;
  }
  return secret;
}

// The job's secret, which every connection between its ranks presents: rank 0 draws one and
// sets it under "weft/secret"; the others read it, waiting until `deadline`, then throw
// errc::timeout.
inline std::string shared_secret(store& meeting, int rank, deadline_clock::time_point deadline) {
  if (rank == 0) {
    const std::string secret = drawn_secret();
    meeting.set("weft/secret", secret);
    return secret;
  }
  auto secret = meeting.get("weft/secret", deadline);
  if (!secret) {
    throw error(errc::timeout, "rank " + std::to_string(rank) +
                                   " timed out at start-up waiting for rank 0 in the " +
                                   meeting.describe());
  }
  return *secret;
}

}  // namespace weft::bootstrap
