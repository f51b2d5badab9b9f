// The weft process group over TCP (weft/transport/tcp.hpp), the default transport.
#include "meeting.hpp"

#include "weft/transport/tcp.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>

#include <cstdlib>
#include <memory>
#include <string>

namespace weft_torch {

namespace {

// The address of this host's side of the route to MASTER_ADDR (torchrun's and env://'s rank 0
// host), found by connecting a UDP socket (nothing is sent); empty when unset or unreachable:
// the transport then takes the first IPv4 address of this host's name.
std::string route_to_master() {
  const char* master = std::getenv("MASTER_ADDR");
  if (master == nullptr || *master == '\0') return {};
  namespace ip = boost::asio::ip;
  boost::asio::io_context io;
  boost::system::error_code failure;
  ip::udp::resolver resolver(io);
  const auto found = resolver.resolve(master, "9", failure);
  if (failure || found.empty()) return {};
  ip::udp::socket socket(io);
  socket.connect(*found.begin(), failure);
  if (failure) return {};
  const auto local = socket.local_endpoint(failure);
  return failure ? std::string() : local.address().to_string();
}

}  // namespace

c10::intrusive_ptr<process_group> make_tcp(const group_request& request) {
  auto meeting = std::make_unique<c10d_store>(request.store);
  auto config = weft::tcp::config::from_environment();
  config.connect_timeout = timeout_of(request);
  config.secret = group_secret(*meeting, request);
  if (config.bind_address.empty()) config.bind_address = route_to_master();
  auto transport =
      std::make_unique<weft::tcp::transport>(request.rank, request.size, meeting.get(), config);
  return c10::make_intrusive<process_group_over<weft::tcp::transport>>(
      std::move(meeting), std::move(transport), options_for(request), "tcp");
}

}  // namespace weft_torch
