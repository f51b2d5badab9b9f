// weft/transport/tcp/wire.hpp — what the TCP transport puts on the wire and what it keeps per
// operation and per connection.
//
// A connection opens with a hello (magic "WEFTTCP1", protocol version, the connecting rank, the
// world size, the job's secret), answered by an acknowledgement (magic, version, the accepting
// rank); then frames follow: a 24-byte header (kind, tag, payload length, little-endian) and
// the payload. Kinds: data, abort (a failure
// notice with its reason), goodbye (an orderly close).
#pragma once

#include "weft/detail/little_endian.hpp"
#include "weft/error.hpp"
#include "weft/transport.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

namespace weft::tcp::detail {

namespace asio = boost::asio;
using asio::ip::tcp;
using weft::detail::get32;
using weft::detail::get64;
using weft::detail::put32;
using weft::detail::put64;

inline constexpr char hello_magic[8] = {'W', 'E', 'F', 'T', 'T', 'C', 'P', '1'};
inline constexpr std::uint32_t protocol_version = 1;
inline constexpr std::size_t hello_bytes = 24;  // magic | version | rank | size | secret bytes
inline constexpr std::size_t ack_bytes = 16;    // magic | version | rank
// An acknowledgement with this rank refuses the hello: the reason's length (32 bits) and text
// follow.
inline constexpr std::uint32_t refusal = 0xffffffff;
inline constexpr std::size_t max_refusal_bytes = 1024;
inline constexpr std::size_t header_bytes = 24;  // kind | zero | tag | length
inline constexpr std::size_t inbox_bytes = 64 << 10;
inline constexpr std::size_t direct_read_bytes = 16 << 10;  // read payloads this large in place
inline constexpr std::size_t max_abort_bytes = 4096;

enum class frame : std::uint32_t { data = 1, abort = 2, goodbye = 3 };

enum class status : std::uint8_t { idle, posted, active, done, failed };

struct message;

// One posted send or receive (or a control frame the transport sends on its own).
struct operation {
  bool is_send = false;
  int peer = 0;
  tag_t tag = 0;
  const std::byte* out = nullptr;  // send payload
  std::byte* in = nullptr;         // receive buffer
  std::size_t size = 0;
  std::size_t offset = 0;  // send: header + payload bytes written; receive: payload bytes in
  std::array<std::byte, header_bytes> header{};
  status state = status::idle;
  bool size_mismatch = false;    // a receive whose message had another size ...
  std::size_t other_size = 0;    // ... namely this one
  bool orphan = false;           // its request is gone; the transport frees it when written
  std::vector<std::byte> owned;  // payload an orphaned or control send owns
  message* source = nullptr;     // receive matched to an unexpected message still arriving
};

// A block of memory and how many bytes it holds.
struct buffer {
  std::unique_ptr<std::byte[]> data;
  std::size_t capacity = 0;
};

// A message that arrived before its receive was posted. Its buffer (from the engine's cache of
// earlier ones, or new and not zeroed) is filled by the socket.
struct message {
  message(tag_t t, std::size_t n, buffer b) : tag(t), size(n), storage(std::move(b)) {}
  std::byte* bytes() const { return storage.data.get(); }
  tag_t tag = 0;
  std::size_t size = 0;
  buffer storage;
  bool complete = false;
  operation* claimed = nullptr;  // a receive waiting for the rest of it
};

struct connection {
  explicit connection(asio::io_context& io) : socket(io), inbox(inbox_bytes) {}
  int peer = -1;
  tcp::socket socket;
  bool open = false;
  bool goodbye = false;  // the peer announced an orderly close
  bool read_armed = false;
  bool write_armed = false;
  bool paused = false;           // a header waits for a receive or for room in the unexpected queue
  std::deque<operation*> sends;  // the front one is being written
  std::vector<std::byte> inbox;
  std::size_t begin = 0, end = 0;
  // The frame being read.
  bool in_payload = false;
  frame kind = frame::data;
  tag_t tag = 0;
  std::size_t length = 0, filled = 0;
  std::byte* sink = nullptr;       // where the payload goes; nullptr: dropped
  operation* target = nullptr;     // the receive it fills, if any
  message* early = nullptr;        // or the unexpected message it fills
  std::vector<std::byte> control;  // an abort frame's payload
};

}  // namespace weft::tcp::detail
