// weft/communicator/tags.hpp — where a call sits in a 64-bit tag: written and read back in one
// place, and the context ids that keep communicators' tags apart.
//
// A collective's tag: context (32 bits) | 0 (the user-tag bit) | the collective (4 bits) | the
// call's digest (8 bits) | its number (11 bits) | channel (8 bits). The collective and the
// digest of the rest of the call (root, count, type, op, algorithm) are in the tag so that ranks
// whose calls differ never match each other's messages, even of the same size: they fail with
// errc::mismatch (weft/communicator/consistency.hpp) rather than return another call's
// data. The statement channel (check mode's and split's exchange) leaves both out, so that check
// mode can compare calls that differ in them.
//
// A user's point-to-point tag: context (32 bits) | 1 | the user's tag (31 bits).
#pragma once

#include "weft/call.hpp"
#include "weft/transport.hpp"

#include <cstdint>

namespace weft::detail::tags {

inline constexpr int statement_channel = 255;
// The zero-byte "this rank waits for you in this call" a slow receive sends its peer
// (communicator_consistency.hpp): where both sides only wait, it is what shows that they differ.
inline constexpr int waiting_channel = 254;

inline constexpr int kind_shift = 27, digest_shift = 19, number_shift = 8;
inline constexpr tag_t kind_mask = 0xf, digest_mask = 0xff, number_mask = 0x7ff,
                       channel_mask = 0xff;
inline constexpr tag_t user_bit = tag_t{1} << 31;
inline constexpr tag_t digest_bits = digest_mask << digest_shift;
// What a look for one call's messages ignores: the collective, the digest and the channel.
inline constexpr tag_t all_but_number = (kind_mask << kind_shift) | digest_bits | channel_mask;
static_assert(static_cast<int>(collective::sendrecv) < 0xf, "the collective takes 4 bits of a tag");

// The tag of call number `number` on `channel`.
constexpr tag_t of_call(std::uint32_t context, collective call, std::uint8_t digest,
                        std::uint32_t number, int channel) {
  const bool statement = channel == statement_channel;
  const tag_t kind = statement ? kind_mask : static_cast<tag_t>(call);
  const tag_t mixed = statement ? 0 : digest;
  return (tag_t{context} << 32) | (kind << kind_shift) | (mixed << digest_shift) |
         ((tag_t{number} & number_mask) << number_shift) | static_cast<tag_t>(channel);
}

// The bits of a call's number, the others zero (with all_but_number: any message of that call).
constexpr tag_t of_number(std::uint32_t context, std::uint32_t number) {
  return (tag_t{context} << 32) | ((tag_t{number} & number_mask) << number_shift);
}

// The context of a communicator derived from one with `context` (split, dup, a group, a call in
// flight), by `salt`: splitmix64's finaliser of both, never `context` itself.
constexpr std::uint32_t derived_context(std::uint32_t context, std::uint32_t salt) {
  std::uint64_t x = (std::uint64_t{context} << 32) ^ salt;
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  const auto mixed = static_cast<std::uint32_t>(x);
  return mixed == context ? mixed + 1 : mixed;
}

// A user's point-to-point tag (0 <= tag < 2^31).
constexpr tag_t of_user(std::uint32_t context, int tag) {
  return (tag_t{context} << 32) | user_bit | static_cast<tag_t>(tag);
}

// What a tag says, read back.
struct fields {
  std::uint32_t context;
  bool user;      // a user's point-to-point tag: the rest means nothing
  unsigned kind;  // the collective, or kind_mask for a statement
  std::uint8_t digest;
  std::uint32_t number;  // the call's number, modulo number_mask + 1
  int channel;
};

constexpr fields read(tag_t tag) {
  return {static_cast<std::uint32_t>(tag >> 32),
          (tag & user_bit) != 0,
          static_cast<unsigned>((tag >> kind_shift) & kind_mask),
          static_cast<std::uint8_t>((tag >> digest_shift) & digest_mask),
          static_cast<std::uint32_t>((tag >> number_shift) & number_mask),
          static_cast<int>(tag & channel_mask)};
}

}  // namespace weft::detail::tags
