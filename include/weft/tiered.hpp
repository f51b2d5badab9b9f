// weft/tiered.hpp — one world over two transports: a node-local one between the ranks of a host
// and a network one between hosts.
//
//   using job_type = weft::tiered_session<weft::shm::transport, weft::tcp::transport>;
//   auto job = job_type::from_environment();
//   weft::allreduce(job.comm(), std::span<float>(data), weft::sum{});   // may run hierarchical
//
// A message to a rank of this host goes over Local (shared memory, CUDA IPC; or threads), any
// other over Network (tcp, ofi), which connects every rank of the job (so ranks of a host with no
// node-local transport use it too: weft::no_local_transport). The transport knows the host
// layout (weft/hosts.hpp), so its communicators split by host and by rail without a message, and
// weft::automatic costs weft::hierarchical with each tier's row of the cost model: flat
// algorithms are costed with the network's, which their slowest step pays.
//
// Progress. Neither transport needs a thread of its own, but each moves only while it is waited
// on or tested. A wait on one tier waits in slices (tiered::slice) and between them lets the other
// tier move (its progress()): a send to another host that did not fit its socket goes on while
// this rank waits for a rank of its host, and a rank the network has lost ends a wait on the
// node-local tier too, within a slice.
//
// Reductions. A reducing receive from a rank of this host combines straight from the sender's
// buffer where Local can (weft::reducing_transport); from another host, the message lands in
// scratch and is combined as the receive completes.
#pragma once

#include "weft/error.hpp"
#include "weft/hosts.hpp"
#include "weft/transport.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace weft {

// Local for a tiered world whose ranks of one host talk over the network.
struct no_local_transport {};

namespace detail {

template <class T>
constexpr std::string_view tuning_key_of() {
  if constexpr (requires { T::tuning_key; })
    return T::tuning_key;
  else
    return "default";
}

template <class Local, class Network>
struct tier_types {
  using memory = memory_space_of<Local>;
  using local_request = typename Local::request;
};
template <class Network>
struct tier_types<no_local_transport, Network> {
  using memory = memory_space_of<Network>;
  struct local_request {};
};

}  // namespace detail

template <class Local, class Network>
class tiered {
 public:
  static constexpr bool has_local = !std::is_same_v<Local, no_local_transport>;
  static constexpr std::string_view tuning_key = detail::tuning_key_of<Network>();
  static constexpr std::string_view local_tuning_key =
      has_local ? detail::tuning_key_of<Local>() : detail::tuning_key_of<Network>();
  using memory_type = typename detail::tier_types<Local, Network>::memory;
  using local_type = Local;
  using network_type = Network;

  // How long a wait on one tier lasts before the other tier is let move.
  static constexpr std::chrono::microseconds slice{200};

  class request {
   public:
    request() = default;

   private:
    friend class tiered;
    struct release {
      memory_type* memory = nullptr;
      std::size_t size = 0;
      void operator()(std::byte* data) const { memory->deallocate(data, size); }
    };
    // Declared first, destroyed last: the receive into it is cancelled before it goes.
    std::unique_ptr<std::byte, release> staging_;
    std::optional<typename detail::tier_types<Local, Network>::local_request> local_;
    std::optional<typename Network::request> network_;
    // A reducing receive that lands in staging_ first: target = combine(own, staging).
    const detail::reducer* combine_ = nullptr;
    std::span<std::byte> target_;
    std::span<const std::byte> own_;
  };

  // Local's ranks are this host's (layout.ranks_on(this host), in order); Network's are the job's.
  tiered(host_layout layout, Network network, Local local = {})
      : layout_(std::move(layout)), network_(std::move(network)), local_(std::move(local)) {
    if (layout_.size() != network_.size()) {
      throw error(errc::invalid_argument,
                  "tiered transport: the host layout has " + std::to_string(layout_.size()) +
                      " ranks and the network " + std::to_string(network_.size()));
    }
    if constexpr (has_local) {
      const auto here = layout_.ranks_on(layout_.host_of(network_.rank()));
      if (local_.size() != static_cast<int>(here.size()) ||
          here[static_cast<std::size_t>(local_.rank())] != network_.rank()) {
        throw error(errc::invalid_argument,
                    "tiered transport: rank " + std::to_string(network_.rank()) +
                        "'s node-local transport is rank " + std::to_string(local_.rank()) +
                        " of " + std::to_string(local_.size()) + ", but its host has " +
                        std::to_string(here.size()) + " ranks");
      }
    }
  }

  int rank() const { return network_.rank(); }
  int size() const { return network_.size(); }
  const host_layout* hosts() const { return &layout_; }
  memory_type& memory() {
    if constexpr (has_local)
      return local_.memory();
    else
      return network_.memory();
  }
  Network& network() { return network_; }
  Local& local() { return local_; }

  // True when messages to `peer` go over the node-local transport.
  bool is_local(int peer) const {
    return has_local && layout_.host_of(peer) == layout_.host_of(rank());
  }

  request send(int peer, std::span<const std::byte> data, tag_t tag) {
    detail::check_peer(rank(), size(), peer, "send to");
    request made;
    if constexpr (has_local) {
      if (is_local(peer)) {
        made.local_.emplace(local_.send(layout_.local_index(peer), data, tag));
        return made;
      }
    }
    made.network_.emplace(network_.send(peer, data, tag));
    return made;
  }

  request recv(int peer, std::span<std::byte> data, tag_t tag) {
    detail::check_peer(rank(), size(), peer, "receive from");
    request made;
    if constexpr (has_local) {
      if (is_local(peer)) {
        made.local_.emplace(local_.recv(layout_.local_index(peer), data, tag));
        return made;
      }
    }
    made.network_.emplace(network_.recv(peer, data, tag));
    return made;
  }

  request recv_reduce(int peer, std::span<std::byte> target, std::span<const std::byte> own,
                      tag_t tag, const detail::reducer& combine) {
    detail::check_peer(rank(), size(), peer, "receive from");
    request made;
    if constexpr (has_local) {
      if (is_local(peer)) {
        if constexpr (reducing_transport<Local>) {
          made.local_.emplace(
              local_.recv_reduce(layout_.local_index(peer), target, own, tag, combine));
        } else {
          made.local_.emplace(
              local_.recv(layout_.local_index(peer), stage(made, target, own, combine), tag));
        }
        return made;
      }
    }
    if constexpr (reducing_transport<Network>) {
      made.network_.emplace(network_.recv_reduce(peer, target, own, tag, combine));
    } else {
      made.network_.emplace(network_.recv(peer, stage(made, target, own, combine), tag));
    }
    return made;
  }

  bool wait(request& operation, deadline_clock::time_point deadline) {
    if (!has_local || !operation.local_) {
      if constexpr (has_local) {
        while (!network_.wait(*operation.network_,
                              std::min(deadline, deadline_clock::now() + slice))) {
          progress(local_);
          if (deadline_clock::now() >= deadline) return false;
        }
        return complete(operation);
      } else {
        return network_.wait(*operation.network_, deadline) && complete(operation);
      }
    } else {
      if constexpr (has_local) {
        while (!local_.wait(*operation.local_, std::min(deadline, deadline_clock::now() + slice))) {
          progress(network_);
          if (deadline_clock::now() >= deadline) return false;
        }
      }
      return complete(operation);
    }
  }

  bool test(request& operation) {
    if constexpr (has_local) {
      if (operation.local_) {
        progress(network_);
        return local_.test(*operation.local_) && complete(operation);
      }
      progress(local_);
    }
    return network_.test(*operation.network_) && complete(operation);
  }

  // The communicator gave up on `culprit`: the network tells every rank of the job; the ranks of
  // this host hear it from the node-local transport too when the culprit is one of them.
  void abort(int culprit, std::string_view reason) {
    if constexpr (requires { network_.abort(culprit, reason); }) network_.abort(culprit, reason);
    if constexpr (has_local) {
      if constexpr (requires { local_.abort(culprit, reason); }) {
        if (culprit >= 0 && culprit < size() && is_local(culprit))
          local_.abort(layout_.local_index(culprit), reason);
      }
    }
  }

  // Messages that arrived before their receive on either tier, as world ranks
  // (weft::early_message_transport), where both tiers can tell.
  std::size_t early_messages(std::span<early_message> found) requires
      early_message_transport<Network> &&(!has_local || early_message_transport<Local>) {
    std::size_t count = network_.early_messages(found);
    if constexpr (has_local) {
      const std::size_t room = found.size() - std::min(count, found.size());
      const std::size_t local = local_.early_messages(found.subspan(found.size() - room));
      const auto here = layout_.ranks_on(layout_.host_of(rank()));
      for (std::size_t i = found.size() - room; i < found.size() - room + std::min(local, room);
           ++i) {
        found[i].peer = here[static_cast<std::size_t>(found[i].peer)];
      }
      count += local;
    }
    return count;
  }

  // "2 hosts: 2 + 2 ranks; within a host shm, between hosts tcp".
  std::string describe() const {
    return layout_.describe() + "; within a host " +
           std::string(has_local ? detail::tuning_key_of<Local>()
                                 : detail::tuning_key_of<Network>()) +
           ", between hosts " + std::string(detail::tuning_key_of<Network>());
  }

 private:
  template <class Tier>
  static void progress(Tier& tier) {
    if constexpr (requires { tier.progress(); }) tier.progress();
  }

  std::span<std::byte> stage(request& made, std::span<std::byte> target,
                             std::span<const std::byte> own, const detail::reducer& combine) {
    memory_type& space = memory();
    made.staging_ = {space.allocate(target.size()),
                     typename request::release{&space, target.size()}};
    made.combine_ = &combine;
    made.target_ = target;
    made.own_ = own;
    return {made.staging_.get(), target.size()};
  }

  // Done: a staged reducing receive combines now.
  static bool complete(request& operation) {
    if (operation.combine_ != nullptr) {
      (*operation.combine_)(operation.target_, operation.own_,
                            {operation.staging_.get(), operation.target_.size()});
      operation.combine_ = nullptr;
      operation.staging_.reset();
    }
    return true;
  }

  host_layout layout_;
  Network network_;
  [[no_unique_address]] Local local_;
};

}  // namespace weft
