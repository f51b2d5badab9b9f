// weft/transport/ofi/meeting.hpp — how a libfabric rank opens its endpoint, meets its peers and
// parts from them.
//
// Opening asks fi_getinfo for a reliable datagram endpoint with tagged messages matched by
// source, in send order, on the provider config::provider names (any, if empty), and honours
// what comes back: the largest message, the tag bits the provider leaves, registration. Each
// rank publishes "provider|endpoint name in hex|process identity" in the bootstrap store and
// inserts every peer's name into its address vector; ranks on other providers are refused by
// name, and peer processes on this host are watched (ofi/peer_watch.hpp). Closing says
// farewell to every peer first (see farewell_tag), then closes the fabric's objects in order.
#pragma once

#include "weft/bootstrap/store.hpp"
#include "weft/detail/hex.hpp"
#include "weft/error.hpp"
#include "weft/transport/ofi/engine.hpp"
#include "weft/transport/ofi/peer_watch.hpp"
#include "weft/transport/ofi/shm_region.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace weft::ofi::detail {

// Before the endpoint closes, each rank sends every peer an empty message under a reserved tag
// and waits, for at most farewell_wait, for the same from each. A rank whose last call finished
// early so keeps its endpoint open until its peers are done: providers that report a send
// complete before its data has left (net, with its own progress thread) would otherwise drop it
// when the endpoint closes, and the peer would wait for it in vain. Skipped when a peer has
// failed (sending to a dead peer is not safe on every provider).
inline constexpr tag_t farewell_tag = 0xffffffff7fffffffu;  // no communicator makes this tag
inline constexpr std::chrono::milliseconds farewell_wait{2000};

// An endpoint name as text for the store, and back.
using weft::detail::from_hex;
using weft::detail::to_hex;

// What a rank publishes in the store: "world size|provider|endpoint name in hex|process identity".
struct published_address {
  std::string size, provider, name, process;  // name: decoded; process: empty when not given
};
inline std::string publish_address(int size, const std::string& provider, const std::string& name,
                                   const std::string& process) {
  return std::to_string(size) + "|" + provider + "|" + to_hex(name) + "|" + process;
}
inline published_address read_address(std::string_view value) {
  published_address out;
  auto next = [&value] {
    const auto bar = std::min(value.find('|'), value.size());
    const std::string_view field = value.substr(0, bar);
    value.remove_prefix(std::min(bar + 1, value.size()));
    return std::string(field);
  };
  out.size = next();
  out.provider = next();
  out.name = from_hex(next());
  out.process = std::string(value);
  return out;
}

inline engine::engine(int rank, int size, bootstrap::store* meeting, const config& settings)
    : rank_(rank), size_(size), settings_(settings) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw error(errc::invalid_argument,
                "ofi transport: rank " + std::to_string(rank) + " of " + std::to_string(size));
  }
  if (size > 1 && meeting == nullptr) {
    throw error(errc::invalid_argument,
                "ofi transport: " + std::to_string(size) + " ranks need a bootstrap store");
  }
  try {
    open();
    if (size > 1) meet(*meeting);
  } catch (...) {  // no destructor runs for an engine that was never made: close what opened
    close();
    if (info_ != nullptr) fi_freeinfo(info_);
    throw;
  }
}

inline void engine::close() {
  if (closed_) return;
  closed_ = true;
  if (owner_.forked()) {
    // A forked child's copy: the endpoint, the registrations and the watcher's thread are the
    // parent's. Say no farewell and close nothing (the parent's peers would lose it).
    static_cast<void>(watch_.release());
    static_cast<void>(failures_.release());
    registrations_.abandon();
    return;
  }
  failures_.reset();  // an orderly end: its lifeline is withdrawn
  try {
    farewell();
    // Give the fabric a moment to finish what it still holds (orphaned sends).
    const auto limit = deadline_clock::now() + std::chrono::milliseconds(200);
    while (ep_ != nullptr && in_flight_ > 0 && deadline_clock::now() < limit) {
      progress();
    }
  } catch (...) {  // closing goes on whatever the fabric says
  }
  if (watch_) watch_->stop();
  // Closing unmaps peers' regions: not while a watcher of this process replaces one.
  std::lock_guard closing(mapping_lock());
  if (ep_ != nullptr) fi_close(&ep_->fid);
  ep_ = nullptr;
  registrations_.close();
  if (av_ != nullptr) fi_close(&av_->fid);
  if (cq_ != nullptr) fi_close(&cq_->fid);
  if (domain_ != nullptr) fi_close(&domain_->fid);
  if (fabric_ != nullptr) fi_close(&fabric_->fid);
  av_ = nullptr;
  cq_ = nullptr;
  domain_ = nullptr;
  fabric_ = nullptr;
}

inline void engine::farewell() {
  if (ep_ == nullptr || !ready_ || broken_ || peer_failed_ || size_ <= 1) return;
  std::vector<operation*> ops;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    ops.push_back(post(false, peer, nullptr, 0, farewell_tag));
    ops.push_back(post(true, peer, nullptr, 0, farewell_tag));
  }
  const auto limit = deadline_clock::now() + farewell_wait;
  auto settled = [](const operation* op) {
    return op->state == status::done || op->state == status::failed;
  };
  while (!std::all_of(ops.begin(), ops.end(), settled) && deadline_clock::now() < limit) {
    if (!progress()) std::this_thread::yield();
  }
}

inline void engine::open() {
  fi_info* hints = fi_allocinfo();
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED | FI_DIRECTED_RECV;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAS;
  hints->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  if (!settings_.provider.empty())
    hints->fabric_attr->prov_name = strdup(settings_.provider.c_str());
  const char* node = settings_.node.empty() ? nullptr : settings_.node.c_str();
  const int found = fi_getinfo(FI_VERSION(1, 9), node, nullptr, 0, hints, &info_);
  fi_freeinfo(hints);
  if (found != 0 || info_ == nullptr) {
    info_ = nullptr;
    throw error(errc::transport,
                who() + ": no libfabric provider '" +
                    (settings_.provider.empty() ? std::string("(any)") : settings_.provider) +
                    "' offers reliable tagged messages here (fi_getinfo: " + text_of(found) +
                    "); `fi_info -t FI_EP_RDM -c FI_TAGGED` lists what this machine has");
  }
  max_message_ = static_cast<std::size_t>(
      std::min<std::uint64_t>(info_->ep_attr->max_msg_size, std::uint64_t{1} << 40));
  if (max_message_ == 0) max_message_ = std::size_t{1} << 30;
  if (settings_.max_message != 0) max_message_ = std::min(max_message_, settings_.max_message);
  const std::uint64_t format = info_->ep_attr->mem_tag_format;
  if (format != 0 && std::countl_zero(format) > 0)
    tag_mask_ = ~std::uint64_t{0} >> std::countl_zero(format);
  // FI_PEEK where the provider is known to keep its promise: rxm's own queue of early messages.
  // (libfabric 1.17's shm provider takes a peek for a plain receive and later faults.)
  can_peek_ =
      std::string_view(info_->fabric_attr->prov_name).find("ofi_rxm") != std::string_view::npos;

  check("fi_fabric", fi_fabric(info_->fabric_attr, &fabric_, nullptr));
  check("fi_domain", fi_domain(fabric_, info_, &domain_, nullptr));
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.wait_obj = FI_WAIT_NONE;
  check("fi_cq_open", fi_cq_open(domain_, &cq_attr, &cq_, nullptr));
  fi_av_attr av_attr{};
  av_attr.type =
      info_->domain_attr->av_type == FI_AV_UNSPEC ? FI_AV_TABLE : info_->domain_attr->av_type;
  check("fi_av_open", fi_av_open(domain_, &av_attr, &av_, nullptr));
  check("fi_endpoint", fi_endpoint(domain_, info_, &ep_, nullptr));
  check("fi_ep_bind (address vector)", fi_ep_bind(ep_, &av_->fid, 0));
  check("fi_ep_bind (completion queue)", fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV));
  check("fi_enable", fi_enable(ep_));
  registrations_.open(domain_, ep_, static_cast<std::uint64_t>(info_->domain_attr->mr_mode),
                      settings_.always_register, who(), provider_name());
  if (size_ == 1) {
    addresses_.assign(1, own_address_entry());
  }
}

inline std::string engine::endpoint_name() const {
  std::vector<char> name(256);
  std::size_t length = name.size();
  int code = fi_getname(&ep_->fid, name.data(), &length);
  if (code == -FI_ETOOSMALL) {
    name.resize(length);
    code = fi_getname(&ep_->fid, name.data(), &length);
  }
  check("fi_getname", code);
  return std::string(name.data(), length);
}

inline fi_addr_t engine::own_address_entry() {
  const std::string name = endpoint_name();
  fi_addr_t address = FI_ADDR_UNSPEC;
  if (fi_av_insert(av_, name.data(), 1, &address, 0, nullptr) != 1) {
    throw error(errc::transport,
                who() + ": fi_av_insert of its own address failed on '" + provider_name() + "'");
  }
  return address;
}

inline void engine::meet(bootstrap::store& meeting) {
  // Watched from the start: a rank killed while the others wait for its address is a notice
  // that ends their wait (weft/bootstrap/failure_watch.hpp).
  failures_ = std::make_unique<bootstrap::failure_watch>(meeting, settings_.prefix, rank_);
  try {
    exchange_addresses(meeting);
  } catch (const error& failure) {
    failures_->await_notice(failure);
    // (a rank lost, not one started for another world size: that one is alive)
    if (failures_->lost() >= 0 && weft::detail::quoted_sizes(failures_->why()).empty()) {
      forget_region_of(meeting, failures_->lost());
    }
    failures_->rethrow_if_lost(who());
    throw;
  }
  failures_->started();
}

// A rank lost at start-up, on this host, over shm: removes the region its endpoint made, which
// it cannot remove itself (the ranks that met it do so from the peer watch).
inline void engine::forget_region_of(bootstrap::store& meeting, int lost) {
  if (provider_name() != "shm" || lost == rank_) return;
  try {
    // The wait was interrupted: the store connects again, which a deadline of now would forbid.
    const auto value = meeting.get(settings_.prefix + "/ofi/" + std::to_string(lost),
                                   deadline_clock::now() + std::chrono::seconds(1));
    if (!value) return;  // it had not published its address
    const published_address address = read_address(*value);
    if (address.process.empty()) return;
    const pid_t pid = watchable_pid(address.process, process_identity());
    if (pid <= 0 || pid == ::getpid() || !process_ended(pid, std::chrono::seconds(2))) return;
    retire_shm_region(address.name, pid);
  } catch (const error&) {  // the store is gone too: nothing to read the address from
  }
}

// Publishes this endpoint's name and fills the address vector with every rank's.
inline void engine::exchange_addresses(bootstrap::store& meeting) {
  const auto deadline = deadline_clock::now() + settings_.connect_timeout;
  const std::string key = settings_.prefix + "/ofi/";
  const std::string own_process = process_identity();
  bootstrap::claim_rank(meeting, settings_.prefix + "/ofi-rank/" + std::to_string(rank_), rank_);
  meeting.set(key + std::to_string(rank_),
              publish_address(size_, provider_name(), endpoint_name(), own_process));
  addresses_.assign(static_cast<std::size_t>(size_), FI_ADDR_UNSPEC);
  peer_names_.assign(static_cast<std::size_t>(size_), std::string());
  std::vector<peer_watch::peer> neighbours;
  for (int peer = 0; peer < size_; ++peer) {
    const auto value = meeting.get(key + std::to_string(peer), deadline);
    if (!value) {
      throw error(errc::timeout,
                  who() + " timed out after " + std::to_string(settings_.connect_timeout.count()) +
                      " ms at start-up waiting for rank " + std::to_string(peer) +
                      " to publish its fabric address in the " + meeting.describe() + ": rank " +
                      std::to_string(peer) + " has not started, or failed to open its endpoint");
    }
    const published_address address = read_address(*value);
    if (address.size != std::to_string(size_)) {
      const std::string why = weft::detail::sizes_differ(
          who(), std::to_string(size_), "rank " + std::to_string(peer), address.size);
      if (failures_) failures_->report(peer, why);  // the job cannot start: every rank hears why
      throw error(errc::mismatch, who() + " could not start: " + why);
    }
    if (address.provider != provider_name()) {
      throw error(errc::invalid_argument, who() + " runs provider '" + provider_name() +
                                              "' but rank " + std::to_string(peer) + " runs '" +
                                              address.provider +
                                              "': set the same WEFT_OFI_PROVIDER on every rank");
    }
    const std::string& name = address.name;
    if (!address.process.empty() && peer != rank_) {
      // Ranks that are threads of this process need no watching.
      const pid_t pid = watchable_pid(address.process, own_process);
      if (pid > 0 && pid != ::getpid()) neighbours.push_back({peer, pid});
    }
    peer_names_[static_cast<std::size_t>(peer)] = name;
    // One at a time: names may differ in length (shm's are strings).
    if (fi_av_insert(av_, name.data(), 1, &addresses_[static_cast<std::size_t>(peer)], 0,
                     nullptr) != 1) {
      throw error(errc::transport, who() + ": fi_av_insert of rank " + std::to_string(peer) +
                                       "'s address failed on provider '" + provider_name() + "'");
    }
  }
  ready_ = true;
  if (!neighbours.empty()) {
    const bool shared_regions = provider_name() == "shm";
    watch_ = std::make_unique<peer_watch>(
        size_, neighbours,
        [this, shared_regions](int peer, pid_t pid) {
          if (shared_regions) retire_shm_region(peer_names_[static_cast<std::size_t>(peer)], pid);
        },
        calls_, who(), stuck_limit);
  }
}

}  // namespace weft::ofi::detail
