// weft/bootstrap/session.hpp — a ready job from the launcher's environment, for any transport
// that meets its peers through the bootstrap store.
//
//   auto job = weft::tcp::session::from_environment();   // = basic_session<tcp::transport, ...>
//   weft::allreduce(job.comm(), std::span<float>(data), weft::sum{});
//
// It holds, in this order, the rendezvous (rank 0's TCP store, or the file store at
// WEFT_STORE_PATH, and the job's secret), the transport built over it, and the world
// communicator. A transport's config may take what the launch settled before the transport is
// built by defining adopt(const bootstrap::launch&, const std::string& secret) (the TCP
// transport takes the secret and the bind address).
#pragma once

#include "weft/bootstrap/environment.hpp"
#include "weft/bootstrap/rendezvous.hpp"
#include "weft/communicator.hpp"

#include <memory>
#include <string>

namespace weft {

template <class Transport, class Config>
class basic_session {
 public:
  using transport_type = Transport;
  using config_type = Config;

  static basic_session from_environment(options settings = options::from_environment()) {
    return basic_session(bootstrap::from_environment(), settings, Config::from_environment());
  }

  basic_session(const bootstrap::launch& where, options settings, Config config)
      : meeting_(where, deadline_clock::now() + config.connect_timeout) {
    if constexpr (requires { config.adopt(where, meeting_.secret()); }) {
      config.adopt(where, meeting_.secret());
    }
    transport_ = std::make_unique<Transport>(where.rank, where.size, meeting_.get(), config);
    comm_ = std::make_unique<communicator<Transport>>(*transport_, settings);
  }

  communicator<Transport>& comm() { return *comm_; }
  Transport& endpoint() { return *transport_; }
  bootstrap::store* meeting() { return meeting_.get(); }
  const bootstrap::launch& launch() const { return meeting_.launched(); }
  // Closes the communicator and the transport (a transport that says goodbye to its peers does),
  // keeping the store (rank 0 goes on serving it) so a new transport can be built over it.
  void close_transport() {
    comm_.reset();
    transport_.reset();
  }

 private:
  bootstrap::rendezvous meeting_;  // declared first: outlives the transport
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<communicator<Transport>> comm_;
};

}  // namespace weft
