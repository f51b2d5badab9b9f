// weft/bootstrap/session.hpp — a ready job from the launcher's environment, for any transport
// that meets its peers through the bootstrap store.
//
//   auto job = weft::tcp::session::from_environment();   // = basic_session<tcp::transport, ...>
//   weft::allreduce(job.comm(), std::span<float>(data), weft::sum{});
//
// It holds, in this order, the rendezvous (the store rank 0 serves, or the file store at
// WEFT_STORE_PATH, and the job's secret: weft/bootstrap/rendezvous.hpp), the transport built
// over it, and the world communicator. A transport's config may take what the launch settled before
// the transport is built by defining adopt(const bootstrap::launch&, const std::string& secret)
// (the TCP transport takes the secret and the bind address).
#pragma once

#include "weft/bootstrap/environment.hpp"
#include "weft/bootstrap/rendezvous.hpp"
#include "weft/communicator.hpp"
#include "weft/detail/env.hpp"

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

namespace weft {

namespace bootstrap {

// What a job runs on, in one line: "4 ranks, launcher Slurm (job 1234.0); transport: <the
// transport's describe(), or its name>; meeting: <the store's describe()>".
template <class Transport>
std::string describe_job(const launch& where, const store* meeting, const Transport& transport) {
  std::string text = std::to_string(where.size) + (where.size == 1 ? " rank" : " ranks");
  if (!where.launcher.empty()) text += ", launcher " + where.launcher;
  if (!where.job.empty()) text += " (job " + where.job + ")";
  text += "; transport: ";
  if constexpr (requires { transport.describe(); }) {
    text += transport.describe();
  } else if constexpr (requires { Transport::tuning_key; }) {
    text += std::string(Transport::tuning_key);
  }
  const std::string met = meeting != nullptr ? meeting->describe() : std::string("none (one rank)");
  text += "; meeting: " + met;
  // Where the network store's address came from, when weft or torchrun chose it (not a file store)
  if (!where.store.empty() && !where.store_source.empty() && where.store_source != "WEFT_STORE" &&
      met.find(where.store) != std::string::npos)
    text += " (from " + where.store_source + ")";
  return text;
}

// Rank 0 prints the job's line once on stderr when WEFT_VERBOSE is set (a flag), so a user sees
// which transport, provider and meeting a job uses without inferring it.
inline void say_what_runs(int rank, const std::string& line) {
  if (rank == 0 && weft::detail::env::flag("WEFT_VERBOSE").value_or(false))
    std::fprintf(stderr, "weft: %s\n", line.c_str());
}

}  // namespace bootstrap

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
    bootstrap::say_what_runs(where.rank, describe());
  }

  // What the job runs on, one line: ranks, launcher, transport (its describe()), meeting. Rank 0
  // prints it at start-up when WEFT_VERBOSE=1.
  std::string describe() const {
    return bootstrap::describe_job(meeting_.launched(), meeting_.get(), *transport_);
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
