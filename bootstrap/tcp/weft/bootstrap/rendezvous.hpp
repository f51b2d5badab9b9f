// weft/bootstrap/rendezvous.hpp — where a job's ranks meet, from the launcher's environment.
//
// rank 0 serves the TCP store at launch.store and every rank (rank 0 too) connects to it; or,
// with launch.store_path, the ranks meet through a file store. Every transport that meets its
// peers through a store takes its store from here (weft::basic_session does).
#pragma once

#include "weft/bootstrap/environment.hpp"
#include "weft/bootstrap/file_store.hpp"
#include "weft/bootstrap/store.hpp"
#include "weft/bootstrap/tcp_store.hpp"
#include "weft/error.hpp"

#include <boost/asio/ip/address.hpp>

#include <cstdio>
#include <memory>
#include <random>
#include <string>

namespace weft::bootstrap {

// The meeting point of a job, from its launch: rank 0 serves the TCP store at launch.store and
// every rank (rank 0 too) connects to it; or, with launch.store_path, a file store. Also settles
// the job's secret: WEFT_SECRET, or one rank 0 draws and hands out through the store.
class rendezvous {
 public:
  rendezvous(const launch& where, deadline_clock::time_point deadline)
      : launch_(where), secret_(where.secret) {
    if (where.size == 1) return;  // one rank meets nobody
    if (!where.store.empty()) {
      auto [host, port] = split_address(where.store);
      if (where.rank == 0) {
        // Serve on the address the others are told to use; a host name: every interface.
        boost::system::error_code failure;
        const auto ip = boost::asio::ip::make_address(host, failure);
        const std::string listen = host == "localhost" ? "127.0.0.1"
                                   : failure           ? "0.0.0.0"
                                                       : ip.to_string();
        server_ = std::make_unique<tcp_store_server>(listen, port, where.secret);
      }
      store_ = std::make_unique<tcp_store>(host, port, where.secret, deadline);
    } else {
      store_ = std::make_unique<file_store>(where.store_path);
    }
    if (secret_.empty()) secret_ = shared_secret(deadline);
  }

  store* get() { return store_.get(); }
  const bootstrap::launch& launched() const { return launch_; }
  const std::string& secret() const { return secret_; }

 private:
  std::string shared_secret(deadline_clock::time_point deadline) {
    if (launch_.rank == 0) {
      std::random_device entropy;
      std::string secret;
      for (int i = 0; i < 4; ++i) {
        char piece[9];
        std::snprintf(piece, sizeof piece, "%08x", entropy());
        secret += piece;
      }
      store_->set("weft/secret", secret);
      return secret;
    }
    auto secret = store_->get("weft/secret", deadline);
    if (!secret) {
      throw error(errc::timeout, "rank " + std::to_string(launch_.rank) +
                                     " timed out at start-up waiting for rank 0 in the " +
                                     store_->describe());
    }
    return *secret;
  }

  bootstrap::launch launch_;
  std::string secret_;
  std::unique_ptr<tcp_store_server> server_;  // rank 0 only; declared first, destroyed last
  std::unique_ptr<store> store_;
};

}  // namespace weft::bootstrap
