// weft/bootstrap/tiered_session.hpp — a ready job over two transports, node-local within each
// host and network between hosts (weft/tiered.hpp), from one launcher environment.
//
//   using job_type = weft::tiered_session<weft::shm::transport, weft::tcp::transport>;
//   auto job = job_type::from_environment();          // weft-run, mpirun, srun, torchrun
//   weft::allreduce(job.comm(), std::span<float>(data), weft::sum{});
//
// Start-up: the rendezvous (as basic_session's), then every rank publishes its host
// (weft::this_host(): WEFT_HOST, else this boot and network namespace) in the store and reads
// everyone's: the host layout. The network transport joins every rank of the job; the node-local
// one joins the ranks of this host only, under a key prefix of its host's own, and names ranks in
// its messages as the job does. With weft::no_local_transport as Local, the ranks of a host talk
// over the network; rank 0 says so once when some host has more than one rank.
#pragma once

#include "weft/bootstrap/environment.hpp"
#include "weft/bootstrap/rendezvous.hpp"
#include "weft/bootstrap/session.hpp"
#include "weft/communicator.hpp"
#include "weft/hosts.hpp"
#include "weft/tiered.hpp"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace weft {

namespace detail {
template <class Transport>
struct config_of {
  using type = typename Transport::config_type;
};
template <>
struct config_of<no_local_transport> {
  struct type {
    static type from_environment() { return {}; }
  };
};
}  // namespace detail

template <class Local, class Network>
class tiered_session {
 public:
  using transport_type = tiered<Local, Network>;
  using local_config = typename detail::config_of<Local>::type;
  using network_config = typename detail::config_of<Network>::type;

  static tiered_session from_environment(options settings = options::from_environment()) {
    return tiered_session(bootstrap::from_environment(), settings,
                          network_config::from_environment(), local_config::from_environment());
  }

  tiered_session(const bootstrap::launch& where, options settings, network_config network,
                 local_config local)
      : meeting_(where, deadline_clock::now() + network.connect_timeout) {
    if constexpr (requires { network.adopt(where, meeting_.secret()); })
      network.adopt(where, meeting_.secret());
    const auto deadline = deadline_clock::now() + network.connect_timeout;
    host_layout layout = learn_layout(where, network.prefix, deadline);
    const int host = layout.host_of(where.rank);
    const auto here = layout.ranks_on(host);
    Network across(where.rank, where.size, meeting_.get(), network);
    if constexpr (tiered<Local, Network>::has_local) {
      if constexpr (requires { local.adopt(where, meeting_.secret()); })
        local.adopt(where, meeting_.secret());
      local.prefix = network.prefix + "/host-" + std::to_string(host);
      local.job_ranks.assign(here.begin(), here.end());
      const int index = layout.local_index(where.rank);
      const int count = static_cast<int>(here.size());
      Local within(index, count, count > 1 ? meeting_.get() : nullptr, local);
      transport_ =
          std::make_unique<transport_type>(std::move(layout), std::move(across), std::move(within));
    } else {
      if (where.rank == 0 && layout.largest_host() > 1) {
        std::fprintf(stderr,
                     "weft: no node-local transport is compiled in: the ranks of each host talk "
                     "over %s (%s)\n",
                     std::string(detail::tuning_key_of<Network>()).c_str(),
                     layout.describe().c_str());
      }
      transport_ = std::make_unique<transport_type>(std::move(layout), std::move(across));
    }
    comm_ = std::make_unique<communicator<transport_type>>(*transport_, settings);
    bootstrap::say_what_runs(where.rank, describe());
  }

  // What the job runs on, one line (as basic_session::describe(): the hosts and both tiers).
  std::string describe() const {
    return bootstrap::describe_job(meeting_.launched(), meeting_.get(), *transport_);
  }

  communicator<transport_type>& comm() { return *comm_; }
  transport_type& endpoint() { return *transport_; }
  bootstrap::store* meeting() { return meeting_.get(); }
  const bootstrap::launch& launch() const { return meeting_.launched(); }
  const host_layout& hosts() const { return *transport_->hosts(); }

 private:
  // Every rank's host, through the store: published by each, read by all.
  host_layout learn_layout(const bootstrap::launch& where, const std::string& prefix,
                           deadline_clock::time_point deadline) {
    const std::string key = prefix + "/host/";
    const std::string mine = this_host();
    if (where.size == 1) return host_layout::from_keys(std::span<const std::string>(&mine, 1));
    meeting_.get()->set(key + std::to_string(where.rank), mine);
    std::vector<std::string> names(static_cast<std::size_t>(where.size));
    for (int r = 0; r < where.size; ++r) {
      auto value = meeting_.get()->get(key + std::to_string(r), deadline);
      if (!value) {
        throw error(errc::timeout,
                    "rank " + std::to_string(where.rank) + ": rank " + std::to_string(r) +
                        " did not say which host it runs on in the " + meeting_.get()->describe() +
                        " before the start-up deadline");
      }
      names[static_cast<std::size_t>(r)] = std::move(*value);
    }
    return host_layout::from_keys(std::span<const std::string>(names));
  }

  bootstrap::rendezvous meeting_;  // declared first: outlives the transports
  std::unique_ptr<transport_type> transport_;
  std::unique_ptr<communicator<transport_type>> comm_;
};

}  // namespace weft
