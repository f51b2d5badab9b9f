// weft/call.hpp — what a collective call is and what it did: the collective's name, the report
// every call returns (algorithm, steps, bytes sent), and the description of a call that ranks
// compare in check mode (call_signature).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace weft {

enum class collective : std::uint8_t {
  allreduce,
  broadcast,
  reduce,
  allgather,
  allgatherv,
  reduce_scatter,
  alltoall,
  alltoallv,
  gather,
  scatter,
  barrier,
  send,
  recv,
  split,
  sendrecv,
};

constexpr std::string_view to_string(collective kind) noexcept {
  constexpr std::array<std::string_view, 15> names = {
      "allreduce",      "broadcast", "reduce",    "allgather", "allgatherv",
      "reduce_scatter", "alltoall",  "alltoallv", "gather",    "scatter",
      "barrier",        "send",      "recv",      "split",     "sendrecv"};
  return names[static_cast<std::size_t>(kind)];
}

namespace detail {
// The calls only some ranks of a communicator make (with a user tag), not the collectives.
constexpr bool point_to_point(collective kind) noexcept {
  return kind == collective::send || kind == collective::recv || kind == collective::sendrecv;
}
}  // namespace detail

// What one collective call did on this rank.
struct report {
  std::string_view collective;
  std::string_view algorithm;
  int steps = 0;                 // communication steps this rank took part in
  std::uint64_t bytes_sent = 0;  // bytes this rank handed to the transport
  int calls = 1;                 // calls it ran: more than one where weft::group fused them
};

// What a rank was asked to do, compared across ranks in check mode.
struct call_signature {
  collective kind = collective::barrier;
  std::uint32_t element_size = 0;
  std::int32_t root = -1;
  std::uint64_t count = 0;
  std::array<char, 16> type{};
  std::array<char, 16> op{};
  std::array<char, 24> algorithm{};

  static void assign(std::array<char, 16>& field, std::string_view text) {
    copy_text(field.data(), field.size(), text);
  }
  static void assign(std::array<char, 24>& field, std::string_view text) {
    copy_text(field.data(), field.size(), text);
  }
  static void copy_text(char* field, std::size_t capacity, std::string_view text) {
    const std::size_t length = std::min(capacity - 1, text.size());
    std::memcpy(field, text.data(), length);
    field[length] = '\0';
  }

  std::string describe() const {
    std::string text(to_string(kind));
    text += "(count " + std::to_string(count) + ", " + type.data();
    if (op[0] != '\0') text += std::string(", ") + op.data();
    if (root >= 0) text += ", root " + std::to_string(root);
    text += std::string(", algorithm ") + algorithm.data() + ")";
    return text;
  }
  bool same_call(const call_signature& other) const {
    return kind == other.kind && element_size == other.element_size && root == other.root &&
           count == other.count && type == other.type && op == other.op &&
           algorithm == other.algorithm;
  }
};

namespace detail {
// Eight bits of what ranks must agree on in a call besides its kind (element size, root, count,
// type, op, algorithm), carried in its messages' tags: calls that differ there almost never
// match each other's messages (1 in 256 differences goes unseen this way; WEFT_CHECK=1 sees all).
inline std::uint8_t digest(const call_signature& call) noexcept {
  std::uint64_t h = 0x243f6a8885a308d3ull;
  auto add = [&h](std::uint64_t word) {
    h = (h ^ word) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  };
  add((std::uint64_t{call.element_size} << 32) | static_cast<std::uint32_t>(call.root));
  add(call.count);
  auto add_text = [&](const char* text, std::size_t bytes) {  // (zero-filled past the text)
    for (std::size_t at = 0; at < bytes; at += 8) {
      std::uint64_t word;
      std::memcpy(&word, text + at, 8);
      add(word);
    }
  };
  add_text(call.type.data(), call.type.size());
  add_text(call.op.data(), call.op.size());
  add_text(call.algorithm.data(), call.algorithm.size());
  h ^= h >> 32;
  h ^= h >> 16;
  h ^= h >> 8;
  return static_cast<std::uint8_t>(h);
}
}  // namespace detail

}  // namespace weft
