// weft/transport/tcp/listener.hpp — the socket a TCP rank accepts its higher peers on, and the
// connections it turns away.
//
// The listener is open for the life of the transport: after start-up a connection is a
// stranger's, turned away like any that does not open with the expected hello (tcp/meeting.hpp
// reads it). What was turned away is logged (bootstrap's rejection log: the first few, then a
// count) and counted. At most max_greetings connections are in their hello at once: past that a
// flood gets no buffers.
#pragma once

#include "weft/bootstrap/tcp_store_protocol.hpp"
#include "weft/error.hpp"
#include "weft/transport/tcp/wire.hpp"

#include <boost/asio/ip/host_name.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace weft::tcp::detail {

class listener {
 public:
  static constexpr int max_greetings = 256;

  explicit listener(asio::io_context& io) : acceptor_(io) {}

  // Listens on `ip`, any port; `prepare` is given the socket's handle after it opens and before
  // it binds (options accepted connections inherit), and `buffer_bytes` (if > 0) sizes its
  // receive buffer before it listens, so that window scaling sees it. Throws naming `rank`.
  template <class Prepare>
  void open(const asio::ip::address& ip, int rank, int buffer_bytes, Prepare prepare) {
    const tcp::endpoint where(ip, 0);
    boost::system::error_code failure;
    acceptor_.open(where.protocol(), failure);
    if (!failure) prepare(acceptor_.native_handle());
    if (!failure && buffer_bytes > 0)
      acceptor_.set_option(asio::socket_base::receive_buffer_size(buffer_bytes), failure);
    if (!failure) acceptor_.bind(where, failure);
    if (!failure) acceptor_.listen(asio::socket_base::max_listen_connections, failure);
    if (failure) {
      throw error(errc::transport, "rank " + std::to_string(rank) + " cannot listen on " +
                                       ip.to_string() + ": " + failure.message());
    }
    std::string shown = ip.is_unspecified() ? asio::ip::host_name() : ip.to_string();
    if (ip.is_v6() && !ip.is_unspecified()) shown = "[" + shown + "]";
    address_ = shown + ":" + std::to_string(acceptor_.local_endpoint().port());
  }

  // host:port, as published in the bootstrap store.
  const std::string& address() const { return address_; }

  // Accepts connections until closed, handing each to `greet` (a shared socket) unless
  // max_greetings are in their hello already; `who` names this rank in the log.
  template <class Greet>
  void accept(std::string who, Greet greet) {
    acceptor_.async_accept(
        [this, who, greet](boost::system::error_code failure, tcp::socket socket) mutable {
          if (failure == asio::error::operation_aborted) return;
          if (!failure) {
            if (greetings_ >= max_greetings) {
              turn_away(who, "(too many connections in their hello at once)");
            } else {
              ++greetings_;
              greet(std::make_shared<tcp::socket>(std::move(socket)));
            }
          }
          accept(std::move(who), std::move(greet));
        });
  }

  // A hello handed to greet ended, let in or turned away.
  void greeted() { --greetings_; }

  // Logs a connection turned away.
  void turn_away(std::string_view who, std::string_view why) {
    rejected_.note(std::string(who), std::string(why));
  }

  std::uint64_t turned_away() const { return rejected_.count(); }

  void close() {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
  }

 private:
  tcp::acceptor acceptor_;
  std::string address_;
  int greetings_ = 0;  // connections in their hello
  bootstrap::store_detail::rejection_log rejected_;
};

}  // namespace weft::tcp::detail
