// weft/bootstrap/tcp_meeting.hpp — the TCP store as the job's meeting point (Boost.Asio).
//
// A program that includes this header meets at a network address (WEFT_STORE=host:port, or
// torchrun's MASTER_ADDR and MASTER_PORT) through the TCP store: rank 0 serves it on a thread of
// its own for the life of the session and every rank (rank 0 too) connects to it. Without it, a
// session meets through a file store (WEFT_STORE_PATH) and needs no Boost at all. weft-run sets
// both, so a program built either way runs under it; weft/transport/tcp.hpp includes this header.
// Built with PMIx (dependency('weft-bootstrap-tcp') brings dependency('weft-bootstrap-pmix') where
// libpmix-dev is found), it also meets under mpirun and srun --mpi=pmix with nothing set: rank 0
// serves the store on a free port and hands the address out through PMIx.
//
//   #include <weft/bootstrap/tcp_meeting.hpp>   // Meson: dependency('weft-bootstrap-tcp')
//   #include <weft/transport/shm.hpp>
//   auto job = weft::shm::session::from_environment();   // meets at WEFT_STORE
#pragma once

#include "weft/bootstrap/environment.hpp"
#include "weft/bootstrap/rendezvous.hpp"
#include "weft/bootstrap/tcp_store.hpp"
#include "weft/bootstrap/tcp_store_server.hpp"

#include <boost/asio/ip/address.hpp>

#include <memory>
#include <string>

#if defined(WEFT_HAVE_PMIX)  // set by Meson's dependency('weft-bootstrap-pmix')
#include "weft/bootstrap/pmix_meeting.hpp"
#endif

namespace weft::bootstrap {

// Opens the TCP store at where.store for where.rank; rank 0 serves it first, on the address the
// others are told to use (a host name: every interface; port 0: a free one).
inline opened_store open_tcp_store(const launch& where, const std::string& secret,
                                   deadline_clock::time_point deadline) {
  auto [host, port] = split_address(where.store);
  opened_store opened;
  if (where.rank == 0) {
    boost::system::error_code failure;
    const auto ip = boost::asio::ip::make_address(host, failure);
    const std::string listen = host == "localhost" ? "127.0.0.1"
                               : failure           ? "0.0.0.0"
                                                   : ip.to_string();
    auto server = std::make_shared<tcp_store_server>(listen, port, secret);
    port = server->port();  // the one it chose, where given 0
    opened.service = std::move(server);
  }
  opened.connection = std::make_unique<tcp_store>(host, port, secret, deadline);
  opened.address =
      (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  return opened;
}

// Makes the TCP store every session's network store (done when this header is included; a
// program may call it again, for instance after plugging in another).
inline void use_tcp_store() { network_store_opener() = &open_tcp_store; }

namespace detail {
inline const bool tcp_store_plugged_in = (use_tcp_store(), true);
}  // namespace detail

}  // namespace weft::bootstrap
