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

#include "weft/bootstrap/agreement.hpp"
#include "weft/bootstrap/environment.hpp"
#include "weft/bootstrap/failure_watch.hpp"
#include "weft/bootstrap/rendezvous.hpp"
#include "weft/communicator.hpp"
#include "weft/communicator/owner.hpp"
#include "weft/detail/env.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

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
  using communicator_type = communicator<Transport>;

  static basic_session from_environment(options settings = options::from_environment()) {
    return basic_session(bootstrap::from_environment(), settings, Config::from_environment());
  }

  basic_session(const bootstrap::launch& where, options settings, Config config)
      : world_(std::make_unique<world>(where, settings, std::move(config))) {
    bootstrap::say_what_runs(where.rank, describe());
  }

  // What the job runs on, one line: ranks, launcher, transport (its describe()), meeting. Rank 0
  // prints it at start-up when WEFT_VERBOSE=1.
  std::string describe() const {
    return bootstrap::describe_job(world_->launched, world_->meeting.get(), *world_->transport);
  }

  communicator_type& comm() { return *world_->comm; }
  Transport& endpoint() { return *world_->transport; }
  bootstrap::store* meeting() { return world_->meeting.get(); }
  // The launch, with the rank and size of the world now (after a shrink: the survivors').
  const bootstrap::launch& launch() const { return world_->launched; }
  // The rank each rank of the world now had when the job started, in the world's rank order.
  const std::vector<int>& members() const { return world_->members; }
  // Closes the communicator and the transport (a transport that says goodbye to its peers does),
  // keeping the store (rank 0 goes on serving it) so a new transport can be built over it.
  void close_transport() {
    world_->comm.reset();
    world_->transport.reset();
  }

 private:
  // The session's state, at one address for as long as the session lives: the world communicator
  // points at it (weft::shrink(comm) rebuilds the world through it), whatever moves the session.
  struct world final : detail::world_owner<communicator_type> {
    world(const bootstrap::launch& where, options chosen, Config config)
        : meeting(where, deadline_clock::now() + config.connect_timeout),
          launched(meeting.launched()),  // with what the rendezvous settled (the store's address)
          settings(chosen),
          made(std::move(config)) {
      if constexpr (requires { made.adopt(where, meeting.secret()); }) {
        made.adopt(where, meeting.secret());
      }
      transport = std::make_unique<Transport>(where.rank, where.size, meeting.get(), made);
      comm = std::make_unique<communicator_type>(*transport, settings);
      comm->set_owner(this);
      for (int rank = 0; rank < where.size; ++rank) members.push_back(rank);
      id = where.rank;
      // What the others need to tell, in an agreement, that this process has ended.
      if (meeting.get() != nullptr)
        alive = std::make_unique<bootstrap::liveness>(*meeting.get(), recovery_prefix(), id);
    }

    world(const world&) = delete;
    world& operator=(const world&) = delete;
    ~world() {
      comm.reset();
      transport.reset();
      while (!retired.empty()) retired.pop_back();  // the newest first: its splits go before it
    }

    agreement agree(std::uint64_t flag) override;
    communicator_type& shrink() override;

    // The members not counted lost, in rank order: who takes part in the next agreement and
    // whom the next shrink keeps.
    std::vector<int> remaining() const {
      std::vector<int> out;
      for (const int member : members) {
        if (std::find(excluded.begin(), excluded.end(), member) == excluded.end())
          out.push_back(member);
      }
      return out;
    }

    // Where the agreements' keys go in the store.
    std::string recovery_prefix() const {
      if constexpr (requires { made.prefix; }) {
        return made.prefix + "/recovery";
      } else {
        return "weft/recovery";
      }
    }

    bootstrap::rendezvous meeting;  // declared first: outlives the transports
    bootstrap::launch launched;
    options settings;
    Config made;
    std::unique_ptr<Transport> transport;
    std::unique_ptr<communicator_type> comm;
    // Worlds given up by shrink, revoked: communicators split from them stay safe to call (they
    // fail with errc::revoked) until the session ends.
    struct given_up {
      std::unique_ptr<Transport> transport;
      std::unique_ptr<communicator_type> comm;  // declared last: goes first
    };
    std::vector<given_up> retired;
    std::vector<int> members;   // the job's rank of each rank of the world now
    std::vector<int> excluded;  // the job's ranks counted lost and not yet shrunk away
    std::unique_ptr<bootstrap::liveness> alive;  // null in a world of one rank
    int id = 0;                                  // this rank's rank when the job started
    int rounds = 0;                              // agreements so far
    int worlds = 0;                              // worlds built by shrink so far
  };

  std::unique_ptr<world> world_;
};

// ---- recovery: the members of basic_session::world that weft::agree and weft::shrink call -------

template <class Transport, class Config>
agreement basic_session<Transport, Config>::world::agree(std::uint64_t flag) {
  agreement out;
  out.flag = flag;
  bootstrap::store* store = meeting.get();
  if (store == nullptr) return out;  // a world of one rank agrees with itself
  const auto decided =
      bootstrap::agree_in_store(*alive, recovery_prefix() + "/round-" + std::to_string(++rounds),
                                remaining(), id, flag, deadline_after(settings.timeout));
  out.flag = decided.flag;
  for (std::size_t i = 0; i < decided.lost.size(); ++i) {
    excluded.push_back(decided.lost[i]);
    const auto at = std::find(members.begin(), members.end(), decided.lost[i]);
    out.lost.push_back(static_cast<int>(at - members.begin()));
    out.why.push_back(decided.why[i]);
  }
  return out;
}

template <class Transport, class Config>
typename basic_session<Transport, Config>::communicator_type&
basic_session<Transport, Config>::world::shrink() {
  if constexpr (
      !requires { made.prefix; } || requires { Transport::stream_ordered; }) {
    throw error(errc::invalid_argument,
                "rank " + std::to_string(launched.rank) +
                    ": weft::shrink cannot rebuild this transport's world yet (it rebuilds tcp, "
                    "shm and libfabric worlds; not stream-ordered ones such as CUDA IPC); "
                    "nothing was sent");
  } else {
    if (comm) comm->revoke();  // every rank's calls on the old world end, here and there
    for (;;) {
      agree(~std::uint64_t{0});  // who is left
      const std::vector<int> survivors = remaining();
      const int rank =
          static_cast<int>(std::find(survivors.begin(), survivors.end(), id) - survivors.begin());
      Config next = made;
      next.prefix = made.prefix + "/world-" + std::to_string(++worlds);
      std::unique_ptr<Transport> built;
      std::string failure;
      {
        // A survivor lost while the others meet again is told to the new world's failure watch
        // (where the store has one), so that no rank waits for its address to its timeout.
        const bootstrap::store::connector_type connect = meeting.get()->connector();
        std::atomic<bool> met{false};
        std::thread watching;
        if (connect) {
          watching = std::thread([&] {
            std::unique_ptr<bootstrap::store> own;
            try {
              own = connect(deadline_clock::now() + std::chrono::seconds(5));
              while (!met.load()) {
                for (std::size_t r = 0; r < survivors.size(); ++r) {
                  if (survivors[r] == id) continue;
                  if (const auto why = alive->gone(*own, survivors[r])) {
                    bootstrap::failure_watch::tell(*own, next.prefix, static_cast<int>(r), *why);
                    return;
                  }
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
              }
            } catch (const error&) {  // the store went: the transport's own watch says so
            }
          });
        }
        try {
          built = std::make_unique<Transport>(rank, static_cast<int>(survivors.size()),
                                              meeting.get(), next);
        } catch (const error& thrown) {
          failure = thrown.what();
        }
        met = true;
        if (watching.joinable()) watching.join();
        // A start-up that heard of a loss may have interrupted the session's connection to the
        // store: the next call on it throws once, then connects again. Have that happen here.
        if (!built) {
          try {
            static_cast<void>(meeting.get()->look(recovery_prefix() + "/settled"));
          } catch (const error&) {
          }
        }
      }
      const agreement confirmed = agree(built ? 1 : 0);  // did every survivor meet every other?
      if (confirmed.flag == 1 && confirmed.lost.empty()) {
        retired.push_back(given_up{std::move(transport), std::move(comm)});
        transport = std::move(built);
        // (a context of its own, so that flight records tell this world's calls from the last's)
        comm = std::make_unique<communicator_type>(
            *transport, settings, detail::tags::derived_context(1, 0x77000000u + worlds));
        comm->set_owner(this);
        members = survivors;
        excluded.clear();
        launched.rank = rank;
        launched.size = static_cast<int>(survivors.size());
        return *comm;
      }
      if (built) retired.push_back(given_up{std::move(built), nullptr});
      if (confirmed.lost.empty()) {  // nobody was lost, yet some rank could not meet the others
        throw error(errc::peer_lost,
                    "rank " + std::to_string(id) + " could not shrink: the survivors could not " +
                        "meet again over the " + meeting.get()->describe() +
                        (failure.empty() ? std::string(" (this rank met every other)")
                                         : " (" + detail::strip_prefix(failure.c_str()) + ")"));
      }
    }
  }
}

}  // namespace weft
