// weft/bootstrap/tcp_store_protocol.hpp — what the tcp store's server and client share: the
// wire constants (the protocol itself is in weft/bootstrap/tcp_store.hpp; the secret's size and
// comparison in weft/bootstrap/secret.hpp), the log of refused connections, and running Asio
// until a deadline.
#pragma once

#include "weft/bootstrap/secret.hpp"
#include "weft/bootstrap/store.hpp"
#include "weft/detail/little_endian.hpp"
#include "weft/detail/owning_process.hpp"
#include "weft/error.hpp"

#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace weft::bootstrap {

namespace store_detail {

namespace asio = boost::asio;
using asio::ip::tcp;

inline constexpr char magic[8] = {'W', 'E', 'F', 'T', 'S', 'T', 'O', 'R'};
inline constexpr std::uint32_t version = 2;
// The answer to a waiting get when the server closes in order (in place of a value's size).
inline constexpr std::uint32_t closing = 0xFFFFFFFFu;
// The answer to a look (op 6) at a key that is not set.
inline constexpr std::uint32_t absent = 0xFFFFFFFEu;
inline constexpr std::size_t max_clients = 4096;
inline constexpr auto hello_time = std::chrono::seconds(5);

using weft::detail::get32;
using weft::detail::put32;

// Logs the first few rejected connections, then one line per thousand.
class rejection_log {
 public:
  void note(const std::string& who, const std::string& why) {
    const auto n = ++count_;
    if (n <= 10 || n % 1000 == 0) {
      std::fprintf(stderr, "weft: %s dropped a connection %s%s\n", who.c_str(), why.c_str(),
                   n == 10  ? " (further ones are counted, one line per thousand)"
                   : n > 10 ? (" [" + std::to_string(n) + " so far]").c_str()
                            : "");
    }
  }
  std::uint64_t count() const { return count_; }

 private:
  std::atomic<std::uint64_t> count_{0};
};

// Runs io until `done` or the deadline; on the deadline, calls `close` (which closes the socket,
// cancelling what waits on it) and drains the handlers.
template <class Close>
bool run_until(asio::io_context& io, Close close, const bool& done,
               deadline_clock::time_point deadline) {
  io.restart();
  while (!done && io.run_one_until(deadline) != 0) {
  }
  if (done) return true;
  close();
  io.restart();
  io.run();
  return false;
}

}  // namespace store_detail

}  // namespace weft::bootstrap
