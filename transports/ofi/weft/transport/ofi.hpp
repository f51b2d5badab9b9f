// weft/transport/ofi.hpp — every libfabric fabric through one code path: InfiniBand and RoCE
// (verbs), EFA, Slingshot (cxi), shared memory (shm), TCP (tcp;ofi_rxm), and any future RDM
// provider such as Ultra Ethernet's.
//
//   auto job = weft::ofi::session::from_environment();   // provider from WEFT_OFI_PROVIDER
//   weft::allreduce(job.comm(), std::span<float>(data), weft::sum{});
//
// What it asks of the provider: a reliable datagram endpoint (FI_EP_RDM) with tagged messages
// matched by source (FI_TAGGED | FI_DIRECTED_RECV), in send order (FI_ORDER_SAS). It honours
// what fi_getinfo returns and nothing else: memory registration when the provider wants it
// (FI_MR_LOCAL, FI_MR_ENDPOINT, provider keys), the largest message (longer ones go in pieces),
// operation contexts (FI_CONTEXT2), and manual progress — a waiting rank keeps reading its
// completion queue, which is also what moves its peers' data on most providers.
//
// Ranks meet through the bootstrap store: each publishes its endpoint name, then inserts every
// peer's into an address vector. Posts that meet -FI_EAGAIN wait in a queue, in order, and are
// retried as the completion queue drains, so per-tag order never changes.
//
// Failure. Every fabric error becomes weft::error with the provider, fi_strerror's text, the
// provider's own detail, this rank and the peer; connection errors are peer_lost. A peer process
// on this host is watched (ofi/peer_watch.hpp): when it ends, every wait on it ends with
// peer_lost naming it, at once, and nothing more is posted to it. A peer on another host that
// dies without an error on this side (connectionless fabrics cannot tell dead from slow) ends
// every wait on it with the communicator's timeout.
//
// Files: ofi/config.hpp (settings and their variables), ofi/operation.hpp (what is kept per
// posted operation and registration), ofi/peer_watch.hpp and ofi/shm_region.hpp (peers on this
// host), this header (the fabric: start-up, registration cache, posting, progress, failure,
// cancellation; then the transport facade and its session).
#pragma once

#include "weft/bootstrap/environment.hpp"
#include "weft/bootstrap/file_store.hpp"
#include "weft/bootstrap/rendezvous.hpp"
#include "weft/bootstrap/session.hpp"
#include "weft/bootstrap/store.hpp"
#include "weft/communicator.hpp"
#include "weft/detail/env.hpp"
#include "weft/detail/operation_pool.hpp"
#include "weft/detail/request_handle.hpp"
#include "weft/error.hpp"
#include "weft/memory.hpp"
#include "weft/transport.hpp"
#include "weft/transport/ofi/config.hpp"
#include "weft/transport/ofi/operation.hpp"
#include "weft/transport/ofi/peer_watch.hpp"
#include "weft/transport/ofi/shm_region.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace weft::ofi {



class transport {
 public:
  // Cancels its operation when dropped before it completed (weft/detail/request_handle.hpp).
  using request = weft::detail::request_handle<transport, detail::operation>;

  // Opens an endpoint on the chosen provider and meets the other ranks through `meeting`.
  transport(int rank, int size, bootstrap::store* meeting,
            const config& settings = config::from_environment())
      : state_(std::make_unique<fabric_state>()) {
    state_->rank = rank;
    state_->size = size;
    state_->settings = settings;
    if (size < 1 || rank < 0 || rank >= size) {
      throw error(errc::invalid_argument,
                  "ofi transport: rank " + std::to_string(rank) + " of " + std::to_string(size));
    }
    if (size > 1 && meeting == nullptr) {
      throw error(errc::invalid_argument,
                  "ofi transport: " + std::to_string(size) + " ranks need a bootstrap store");
    }
    state_->open();
    if (size > 1) state_->meet(*meeting);
    if (rank == 0 && settings.log) std::fprintf(stderr, "weft: %s\n", describe().c_str());
  }

  // What was chosen, as logged by rank 0 at start-up: provider, fabric, domain, largest message,
  // inject size, progress model, registration.
  std::string describe() const {
    const fi_info* info = state_->info;
    const bool manual = info->domain_attr->data_progress == FI_PROGRESS_MANUAL;
    return "libfabric " + std::to_string(FI_MAJOR(fi_version())) + "." +
           std::to_string(FI_MINOR(fi_version())) + ", provider " + provider() + " on fabric " +
           fabric() + " (domain " + (info->domain_attr->name ? info->domain_attr->name : "?") +
           "), " + std::to_string(size()) + " ranks, largest message " +
           std::to_string(state_->max_message) + " B, inject " +
           std::to_string(info->tx_attr->inject_size) + " B, " + (manual ? "manual" : "automatic") +
           " progress, " +
           (registers_memory() ? "registers buffers (FI_MR_LOCAL)" : "no buffer registration");
  }

  transport(transport&&) noexcept = default;
  transport& operator=(transport&&) noexcept = default;
  ~transport() = default;

  int rank() const { return state_->rank; }
  int size() const { return state_->size; }
  host_memory& memory() { return state_->memory; }
  static constexpr std::string_view tuning_key = "ofi";

  // Called by the communicator when one of its waits fails. libfabric ranks learn of a death by
  // their own timeouts (no notice is sent: sending to a dead peer is not safe on every
  // provider); this only records it, so closing skips the farewell to every peer.
  void abort(int /*culprit*/, std::string_view /*reason*/) {
    if (state_) state_->peer_failed = true;
  }

  // The provider and fabric fi_getinfo chose, e.g. "shm" on "shm", "tcp;ofi_rxm" on "192.0.2.0/24".
  std::string provider() const { return state_->info->fabric_attr->prov_name; }
  std::string fabric() const {
    return state_->info->fabric_attr->name ? state_->info->fabric_attr->name : "";
  }
  std::size_t max_message() const { return state_->max_message; }
  bool registers_memory() const { return state_->needs_registration; }
  // Memory registrations made so far (the cache makes repeated calls on one buffer register once).
  std::uint64_t registrations() const { return state_->registrations_made; }

  request send(int peer, std::span<const std::byte> data, tag_t tag) {
    return {state_->post(true, peer, const_cast<std::byte*>(data.data()), data.size(), tag), this};
  }
  request recv(int peer, std::span<std::byte> data, tag_t tag) {
    return {state_->post(false, peer, data.data(), data.size(), tag), this};
  }
  bool wait(request& operation, deadline_clock::time_point deadline) {
    return state_->wait(operation.operation(), deadline);
  }
  bool test(request& operation) {
    state_->progress();
    return state_->finished(operation.operation());
  }

 private:
  friend request;
  void cancel(detail::operation* op) { state_->cancel(op); }

  struct fabric_state {
    int rank = 0;
    int size = 1;
    config settings;
    host_memory memory;
    fi_info* info = nullptr;
    fid_fabric* fabric = nullptr;
    fid_domain* domain = nullptr;
    fid_cq* cq = nullptr;
    fid_av* av = nullptr;
    fid_ep* ep = nullptr;
    std::vector<fi_addr_t> addresses;
    std::size_t max_message = 0;
    std::uint64_t tag_mask = ~std::uint64_t{0};
    bool needs_registration = false;
    bool endpoint_key = false;  // FI_MR_ENDPOINT: bind registrations to the endpoint
    bool provider_keys = true;  // FI_MR_PROV_KEY
    std::uint64_t next_key = 1;
    std::uint64_t registrations_made = 0;
    std::uint64_t use_clock = 0;
    std::map<std::uintptr_t, std::unique_ptr<detail::registration>> registrations;
    // A pipelined collective touches a buffer in chunk-sized pieces, each its own registration
    // unless a larger one covers it: room for a 4 GiB buffer in 1 MiB chunks (or a 16 MiB one
    // in 4 KiB chunks) without evicting in the steady state.
    static constexpr std::size_t registration_cache_entries = 4096;
    std::deque<detail::piece*> backlog;  // posts that met -FI_EAGAIN, in order
    weft::detail::operation_pool<detail::operation> pool;
    std::deque<detail::operation*> self_sends, self_receives;
    std::size_t in_flight = 0;  // operations the fabric still holds
    bool ready = false;         // every peer's address is in the address vector
    bool peer_failed = false;   // an operation failed or the communicator gave up on a peer
    bool broken = false;  // the endpoint was closed to take back a buffer: nothing works anymore
    std::string broken_reason;
    std::vector<std::string> peer_names;  // each rank's endpoint name, as published
    detail::call_tracker calls;           // calls into the provider, for the watcher
    std::unique_ptr<detail::peer_watch> watch;  // peer processes on this host
    // How long a call into the provider may stay stuck after a peer died before the process ends.
    static constexpr std::chrono::seconds stuck_limit{30};

    fabric_state() = default;
    fabric_state(const fabric_state&) = delete;
    fabric_state& operator=(const fabric_state&) = delete;

    ~fabric_state() {
      try {
        farewell();
        // Give the fabric a moment to finish what it still holds (orphaned sends).
        const auto limit = deadline_clock::now() + std::chrono::milliseconds(200);
        while (ep != nullptr && in_flight > 0 && deadline_clock::now() < limit) {
          progress();
        }
      } catch (...) {  // closing goes on whatever the fabric says
      }
      if (watch) watch->stop();
      // Closing unmaps peers' regions: not while a watcher of this process replaces one.
      std::lock_guard closing(detail::mapping_lock());
      if (ep != nullptr) fi_close(&ep->fid);
      for (auto& [begin, entry] : registrations) fi_close(&entry->mr->fid);
      if (av != nullptr) fi_close(&av->fid);
      if (cq != nullptr) fi_close(&cq->fid);
      if (domain != nullptr) fi_close(&domain->fid);
      if (fabric != nullptr) fi_close(&fabric->fid);
      if (info != nullptr) fi_freeinfo(info);
    }

    // Before the endpoint closes, each rank sends every peer an empty message under a reserved
    // tag and waits, for at most farewell_wait, for the same from each. A rank whose last call
    // finished early so keeps its endpoint open until its peers are done: providers that report
    // a send complete before its data has left (net, with its own progress thread) would
    // otherwise drop it when the endpoint closes, and the peer would wait for it in vain. Skipped
    // when a peer has failed (sending to a dead peer is not safe on every provider).
    static constexpr tag_t farewell_tag = 0xffffffff7fffffffu;  // no communicator makes this tag
    static constexpr std::chrono::milliseconds farewell_wait{2000};
    void farewell() {
      if (ep == nullptr || !ready || broken || peer_failed || size <= 1) return;
      std::vector<detail::operation*> ops;
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        ops.push_back(post(false, peer, nullptr, 0, farewell_tag));
        ops.push_back(post(true, peer, nullptr, 0, farewell_tag));
      }
      const auto limit = deadline_clock::now() + farewell_wait;
      auto settled = [](const detail::operation* op) {
        return op->state == detail::status::done || op->state == detail::status::failed;
      };
      while (!std::all_of(ops.begin(), ops.end(), settled) && deadline_clock::now() < limit) {
        if (!progress()) std::this_thread::yield();
      }
    }

    std::string who() const { return "rank " + std::to_string(rank); }
    std::string provider_name() const {
      return info && info->fabric_attr->prov_name ? info->fabric_attr->prov_name
                                                  : settings.provider;
    }

    [[noreturn]] void fail_call(const char* what, int code) const {
      throw error(errc::transport, who() + ": " + what + " failed on provider '" + provider_name() +
                                       "': " + detail::text_of(code));
    }

    // ---- start-up ------------------------------------------------------------------------

    void open() {
      fi_info* hints = fi_allocinfo();
      hints->ep_attr->type = FI_EP_RDM;
      hints->caps = FI_TAGGED | FI_DIRECTED_RECV;
      hints->mode = FI_CONTEXT | FI_CONTEXT2;
      hints->tx_attr->msg_order = FI_ORDER_SAS;
      hints->rx_attr->msg_order = FI_ORDER_SAS;
      hints->domain_attr->mr_mode =
          FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
      hints->domain_attr->threading = FI_THREAD_DOMAIN;
      if (!settings.provider.empty())
        hints->fabric_attr->prov_name = strdup(settings.provider.c_str());
      const char* node = settings.node.empty() ? nullptr : settings.node.c_str();
      const int found = fi_getinfo(FI_VERSION(1, 9), node, nullptr, 0, hints, &info);
      fi_freeinfo(hints);
      if (found != 0 || info == nullptr) {
        info = nullptr;
        throw error(
            errc::transport,
            who() + ": no libfabric provider '" +
                (settings.provider.empty() ? std::string("(any)") : settings.provider) +
                "' offers reliable tagged messages here (fi_getinfo: " + detail::text_of(found) +
                "); `fi_info -t FI_EP_RDM -c FI_TAGGED` lists what this machine has");
      }
      max_message = static_cast<std::size_t>(
          std::min<std::uint64_t>(info->ep_attr->max_msg_size, std::uint64_t{1} << 40));
      if (max_message == 0) max_message = std::size_t{1} << 30;
      if (settings.max_message != 0) max_message = std::min(max_message, settings.max_message);
      const std::uint64_t format = info->ep_attr->mem_tag_format;
      if (format != 0 && std::countl_zero(format) > 0)
        tag_mask = ~std::uint64_t{0} >> std::countl_zero(format);
      const auto mr_mode = static_cast<std::uint64_t>(info->domain_attr->mr_mode);
      needs_registration = (mr_mode & FI_MR_LOCAL) != 0 || settings.always_register;
      endpoint_key = (mr_mode & FI_MR_ENDPOINT) != 0;
      provider_keys = (mr_mode & FI_MR_PROV_KEY) != 0;

      check("fi_fabric", fi_fabric(info->fabric_attr, &fabric, nullptr));
      check("fi_domain", fi_domain(fabric, info, &domain, nullptr));
      fi_cq_attr cq_attr{};
      cq_attr.format = FI_CQ_FORMAT_TAGGED;
      cq_attr.wait_obj = FI_WAIT_NONE;
      check("fi_cq_open", fi_cq_open(domain, &cq_attr, &cq, nullptr));
      fi_av_attr av_attr{};
      av_attr.type =
          info->domain_attr->av_type == FI_AV_UNSPEC ? FI_AV_TABLE : info->domain_attr->av_type;
      check("fi_av_open", fi_av_open(domain, &av_attr, &av, nullptr));
      check("fi_endpoint", fi_endpoint(domain, info, &ep, nullptr));
      check("fi_ep_bind (address vector)", fi_ep_bind(ep, &av->fid, 0));
      check("fi_ep_bind (completion queue)", fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
      check("fi_enable", fi_enable(ep));
      if (size == 1) {
        addresses.assign(1, own_address_entry());
      }
    }

    void check(const char* what, int code) const {
      if (code != 0) fail_call(what, code);
    }

    std::string endpoint_name() const {
      std::vector<char> name(256);
      std::size_t length = name.size();
      int code = fi_getname(&ep->fid, name.data(), &length);
      if (code == -FI_ETOOSMALL) {
        name.resize(length);
        code = fi_getname(&ep->fid, name.data(), &length);
      }
      check("fi_getname", code);
      return std::string(name.data(), length);
    }

    fi_addr_t own_address_entry() {
      const std::string name = endpoint_name();
      fi_addr_t address = FI_ADDR_UNSPEC;
      if (fi_av_insert(av, name.data(), 1, &address, 0, nullptr) != 1) {
        throw error(errc::transport, who() + ": fi_av_insert of its own address failed on '" +
                                         provider_name() + "'");
      }
      return address;
    }

    static std::string to_hex(std::string_view bytes) {
      static constexpr char digits[] = "0123456789abcdef";
      std::string out;
      for (const char c : bytes) {
        out += digits[static_cast<unsigned char>(c) >> 4];
        out += digits[static_cast<unsigned char>(c) & 15];
      }
      return out;
    }
    static std::string from_hex(std::string_view text) {
      auto value = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
      std::string out(text.size() / 2, '\0');
      for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = static_cast<char>(value(text[2 * i]) * 16 + value(text[2 * i + 1]));
      return out;
    }

    // Publishes this endpoint's name and fills the address vector with every rank's.
    void meet(bootstrap::store& meeting) {
      const auto deadline = deadline_clock::now() + settings.connect_timeout;
      const std::string key = settings.prefix + "/ofi/";
      const std::string own_process = detail::process_identity();
      meeting.set(key + std::to_string(rank),
                  provider_name() + "|" + to_hex(endpoint_name()) + "|" + own_process);
      addresses.assign(static_cast<std::size_t>(size), FI_ADDR_UNSPEC);
      peer_names.assign(static_cast<std::size_t>(size), std::string());
      std::vector<detail::peer_watch::peer> neighbours;
      for (int peer = 0; peer < size; ++peer) {
        const auto value = meeting.get(key + std::to_string(peer), deadline);
        if (!value) {
          throw error(
              errc::timeout,
              who() + " timed out after " + std::to_string(settings.connect_timeout.count()) +
                  " ms at start-up waiting for rank " + std::to_string(peer) +
                  " to publish its fabric address in the " + meeting.describe() + ": rank " +
                  std::to_string(peer) + " has not started, or failed to open its endpoint");
        }
        const auto bar = value->find('|');
        const std::string their_provider = value->substr(0, bar);
        if (bar == std::string::npos || their_provider != provider_name()) {
          throw error(errc::invalid_argument,
                      who() + " runs provider '" + provider_name() + "' but rank " +
                          std::to_string(peer) + " runs '" + their_provider +
                          "': set the same WEFT_OFI_PROVIDER on every rank");
        }
        // "provider|name in hex|process identity"
        const auto name_end = value->find('|', bar + 1);
        const std::string name = from_hex(std::string_view(*value).substr(
            bar + 1, name_end == std::string::npos ? std::string::npos : name_end - bar - 1));
        if (name_end != std::string::npos && peer != rank) {
          // Ranks that are threads of this process need no watching.
          const pid_t pid = detail::watchable_pid(value->substr(name_end + 1), own_process);
          if (pid > 0 && pid != ::getpid()) neighbours.push_back({peer, pid});
        }
        peer_names[static_cast<std::size_t>(peer)] = name;
        // One at a time: names may differ in length (shm's are strings).
        if (fi_av_insert(av, name.data(), 1, &addresses[static_cast<std::size_t>(peer)], 0,
                         nullptr) != 1) {
          throw error(errc::transport, who() + ": fi_av_insert of rank " + std::to_string(peer) +
                                           "'s address failed on provider '" + provider_name() +
                                           "'");
        }
      }
      ready = true;
      if (!neighbours.empty()) {
        const bool shared_regions = provider_name() == "shm";
        watch = std::make_unique<detail::peer_watch>(
            size, neighbours,
            [this, shared_regions](int peer, pid_t pid) {
              if (shared_regions)
                detail::retire_shm_region(peer_names[static_cast<std::size_t>(peer)], pid);
            },
            calls, who(), stuck_limit);
      }
    }

    bool peer_gone(int peer) const { return watch && watch->gone(peer); }

    std::string gone_message(const detail::operation* op) const {
      return who() + (op->is_send ? " could not send to rank " : " could not receive from rank ") +
             std::to_string(op->peer) + ": its process (pid " +
             std::to_string(watch->pid_of(op->peer)) + " on this host) has ended";
    }

    // ---- memory registration ---------------------------------------------------------------

    // A registration covering [data, data + size), from the cache when one covers it.
    detail::registration* registered(std::byte* data, std::size_t size) {
      if (!needs_registration || size == 0) return nullptr;
      const auto begin = reinterpret_cast<std::uintptr_t>(data);
      const auto end = begin + size;
      auto it = registrations.upper_bound(begin);
      if (it != registrations.begin()) {
        auto& entry = *std::prev(it)->second;
        if (entry.begin <= begin && end <= entry.end) {
          ++entry.users;
          entry.last_use = ++use_clock;
          return &entry;
        }
      }
      // Evict the least recently used idle entry past registration_cache_entries.
      if (registrations.size() >= registration_cache_entries) {
        auto oldest = registrations.end();
        for (auto i = registrations.begin(); i != registrations.end(); ++i) {
          if (i->second->users == 0 &&
              (oldest == registrations.end() || i->second->last_use < oldest->second->last_use))
            oldest = i;
        }
        if (oldest != registrations.end()) {
          fi_close(&oldest->second->mr->fid);
          registrations.erase(oldest);
        }
      }
      auto entry = std::make_unique<detail::registration>();
      entry->begin = begin;
      entry->end = end;
      const std::uint64_t key = provider_keys ? 0 : next_key++;
      check("fi_mr_reg",
            fi_mr_reg(domain, data, size, FI_SEND | FI_RECV, 0, key, 0, &entry->mr, nullptr));
      if (endpoint_key) {
        check("fi_mr_bind", fi_mr_bind(entry->mr, &ep->fid, 0));
        check("fi_mr_enable", fi_mr_enable(entry->mr));
      }
      ++registrations_made;
      entry->users = 1;
      entry->last_use = ++use_clock;
      auto* raw = entry.get();
      auto [slot, fresh] = registrations.try_emplace(begin, nullptr);
      if (!fresh) {  // a shorter registration started here: the longer one replaces it
        if (slot->second->users == 0) {
          fi_close(&slot->second->mr->fid);
        } else {
          retired.push_back(std::move(slot->second));
        }
      }
      slot->second = std::move(entry);
      return raw;
    }
    std::vector<std::unique_ptr<detail::registration>> retired;  // replaced while in use

    void unregister_use(detail::operation* op) {
      if (op->memory != nullptr) --op->memory->users;
      op->memory = nullptr;
      for (auto it = retired.begin(); it != retired.end();) {
        if ((*it)->users == 0) {
          fi_close(&(*it)->mr->fid);
          it = retired.erase(it);
        } else {
          ++it;
        }
      }
    }

    // ---- posting ---------------------------------------------------------------------------


    void release(detail::operation* op) {
      unregister_use(op);
      op->state = detail::status::idle;
      op->pieces.clear();
      op->completed = 0;
      op->orphan = false;
      op->cancelling = false;
      op->failure.clear();
      op->partner = nullptr;
      pool.release(op);
    }

    std::uint64_t fabric_tag(tag_t tag) const {
      // Providers that reserve upper tag bits get them folded into the lower ones.
      return (tag & tag_mask) ^ ((tag & ~tag_mask) >> 32);
    }

    detail::operation* post(bool is_send, int peer, std::byte* data, std::size_t size, tag_t tag) {
      weft::detail::check_peer(rank, this->size, peer, is_send ? "send to" : "receive from");
      auto* op = pool.acquire();
      op->is_send = is_send;
      op->peer = peer;
      op->tag = tag;
      op->data = data;
      op->size = size;
      op->state = detail::status::queued;
      if (peer == rank) {
        post_self(op);
        return op;
      }
      if (broken) {
        fail(op, errc::transport, broken_reason);
        return op;
      }
      if (peer_gone(peer)) {
        fail(op, errc::peer_lost, gone_message(op));
        return op;
      }
      op->memory = registered(data, size);
      const std::size_t count = size == 0 ? 1 : (size + max_message - 1) / max_message;
      op->pieces.resize(count);
      for (std::size_t i = 0; i < count; ++i) {
        auto& p = op->pieces[i];
        p.owner = op;
        p.data = data + i * max_message;
        p.size = std::min(max_message, size - std::min(size, i * max_message));
        backlog.push_back(&p);
      }
      ++in_flight;
      op->state = detail::status::posted;
      drain_backlog();
      return op;
    }

    // A send to self meets its receive here: one copy, no fabric.
    void post_self(detail::operation* op) {
      auto& others = op->is_send ? self_receives : self_sends;
      auto match = std::find_if(others.begin(), others.end(),
                                [&](auto* other) { return other->tag == op->tag; });
      if (match == others.end()) {
        (op->is_send ? self_sends : self_receives).push_back(op);
        return;
      }
      auto* other = *match;
      others.erase(match);
      auto* sent = op->is_send ? op : other;
      auto* received = op->is_send ? other : op;
      if (sent->size != received->size) {
        fail(received, errc::transport, size_mismatch(received->size, sent->size, received->tag));
        sent->state = detail::status::done;
        return;
      }
      if (sent->size != 0) std::memcpy(received->data, sent->data, sent->size);
      sent->state = received->state = detail::status::done;
    }

    std::string size_mismatch(std::size_t expected, std::size_t got, tag_t tag) const {
      return who() + " expected " + std::to_string(expected) +
             " bytes from the peer but the message has " + std::to_string(got) + " bytes (tag " +
             std::to_string(tag) + ")";
    }

    // Posts queued pieces in order until the provider says -FI_EAGAIN.
    void drain_backlog() {
      while (!backlog.empty()) {
        detail::piece* p = backlog.front();
        detail::operation* op = p->owner;
        if (peer_gone(op->peer)) {  // its pieces still queued never reach the fabric
          for (auto& queued : op->pieces) {
            if (!queued.posted) ++op->completed;
          }
          drop_queued_pieces(op);
          fail(op, errc::peer_lost, gone_message(op));
          if (op->completed == op->pieces.size()) {
            --in_flight;
            if (op->orphan) release(op);
          }
          continue;
        }
        void* desc = op->memory != nullptr ? fi_mr_desc(op->memory->mr) : nullptr;
        detail::provider_call call(calls);
        ssize_t code;
        if (op->is_send) {
          code = fi_tsend(ep, p->data, p->size, desc, addresses[static_cast<std::size_t>(op->peer)],
                          fabric_tag(op->tag), &p->context);
        } else {
          code = fi_trecv(ep, p->data, p->size, desc, addresses[static_cast<std::size_t>(op->peer)],
                          fabric_tag(op->tag), 0, &p->context);
        }
        if (code == -FI_EAGAIN) return;  // the caller reads the completion queue, then we retry
        backlog.pop_front();
        if (code != 0) {
          op->completed = op->pieces.size();  // nothing of it is left with the fabric
          --in_flight;
          fail(op, errc::transport,
               who() + ": " + (op->is_send ? "fi_tsend to" : "fi_trecv from") + " rank " +
                   std::to_string(op->peer) + " failed on provider '" + provider_name() +
                   "': " + detail::text_of(static_cast<int>(code)));
          drop_queued_pieces(op);
          continue;
        }
        p->posted = true;
      }
    }

    void drop_queued_pieces(detail::operation* op) {
      backlog.erase(
          std::remove_if(backlog.begin(), backlog.end(), [&](auto* p) { return p->owner == op; }),
          backlog.end());
    }

    void fail(detail::operation* op, errc code, const std::string& why) {
      if (op->state == detail::status::failed) return;
      peer_failed = true;
      op->state = detail::status::failed;
      op->code = code;
      op->failure = why;
    }

    // ---- progress --------------------------------------------------------------------------

    // Reads the completion queue once (and retries deferred posts); true if anything happened.
    bool progress() {
      if (ep == nullptr) return false;
      fi_cq_tagged_entry entries[16];
      bool any = false;
      {  // counted as one call into the provider (drain_backlog counts its own)
        detail::provider_call call(calls);
        while (true) {
          const ssize_t count = fi_cq_read(cq, entries, 16);
          if (count == -FI_EAGAIN) break;
          if (count == -FI_EAVAIL) {
            read_error();
            any = true;
            continue;
          }
          if (count < 0) fail_call("fi_cq_read", static_cast<int>(count));
          for (ssize_t i = 0; i < count; ++i)
            complete(static_cast<detail::piece*>(entries[i].op_context), &entries[i]);
          any = any || count > 0;
          if (count < 16) break;
        }
      }
      if (!backlog.empty()) drain_backlog();
      return any;
    }

    void complete(detail::piece* p, const fi_cq_tagged_entry* entry) {
      detail::operation* op = p->owner;
      if (entry != nullptr && !op->is_send && entry->len != p->size &&
          op->state != detail::status::failed) {
        fail(op, errc::transport, size_mismatch(op->size, entry->len, op->tag));
      }
      if (++op->completed < op->pieces.size()) return;
      --in_flight;
      if (op->state == detail::status::posted) op->state = detail::status::done;
      unregister_use(op);
      if (op->orphan) release(op);
    }

    void read_error() {
      fi_cq_err_entry failure{};
      if (fi_cq_readerr(cq, &failure, 0) < 0) return;
      auto* p = static_cast<detail::piece*>(failure.op_context);
      if (p == nullptr) return;
      detail::operation* op = p->owner;
      if (failure.err == FI_ECANCELED) {
        complete(p, nullptr);
        return;
      }
      char detail_text[256] = {0};
      fi_cq_strerror(cq, failure.prov_errno, failure.err_data, detail_text, sizeof detail_text);
      const bool connection = failure.err == FI_ECONNREFUSED || failure.err == FI_ECONNRESET ||
                              failure.err == FI_ECONNABORTED || failure.err == FI_ENOTCONN ||
                              failure.err == FI_EHOSTUNREACH || failure.err == FI_ETIMEDOUT ||
                              failure.err == EPIPE || failure.err == FI_EIO;
      if (failure.err == FI_ETRUNC || failure.err == FI_EMSGSIZE) {
        fail(op, errc::transport, size_mismatch(op->size, failure.olen + failure.len, op->tag));
      } else {
        fail(op, connection ? errc::peer_lost : errc::transport,
             who() + (op->is_send ? " could not send to rank " : " could not receive from rank ") +
                 std::to_string(op->peer) + " over provider '" + provider_name() +
                 "': " + detail::text_of(failure.err) + " (" + detail_text + ")");
      }
      complete(p, nullptr);
    }

    // True once done; throws when the operation cannot finish (a peer process that has ended
    // cannot finish it: what it delivered before was read by the progress before this call).
    bool finished(detail::operation* op) {
      if (op->state == detail::status::posted && peer_gone(op->peer)) {
        progress();
        if (op->state == detail::status::posted) fail(op, errc::peer_lost, gone_message(op));
      }
      if (op->state == detail::status::done) return true;
      if (op->state == detail::status::failed) throw error(op->code, op->failure);
      return false;
    }

    bool wait(detail::operation* op, deadline_clock::time_point deadline) {
      auto idle_since = deadline_clock::now();
      while (!finished(op)) {
        const auto now = deadline_clock::now();
        if (now >= deadline) return false;
        if (progress()) {
          idle_since = now;
          continue;
        }
        // Manual progress: keep reading the queue; past the spin, nap briefly between reads.
        if (now - idle_since < settings.spin) {
          std::this_thread::yield();
        } else {
          std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
      }
      return true;
    }

    // ---- cancellation ------------------------------------------------------------------------

    void cancel(detail::operation* op) {
      switch (op->state) {
        case detail::status::idle:
        case detail::status::done:
          release(op);
          return;
        case detail::status::failed:
          if (op->completed < op->pieces.size()) break;  // the fabric still holds part of it
          release(op);
          return;
        case detail::status::queued: {  // a self operation still waiting for its match
          auto& list = op->is_send ? self_sends : self_receives;
          list.erase(std::remove(list.begin(), list.end(), op), list.end());
          release(op);
          return;
        }
        case detail::status::posted:
          break;
      }
      // Posted to the fabric: take back what is still queued, cancel the rest, and wait (bounded)
      // until the fabric lets go of the buffer.
      for (auto& p : op->pieces) {
        if (!p.posted && std::find(backlog.begin(), backlog.end(), &p) != backlog.end())
          ++op->completed;
      }
      drop_queued_pieces(op);
      if (op->completed == op->pieces.size()) {
        --in_flight;
        release(op);
        return;
      }
      for (auto& p : op->pieces) {
        if (p.posted) {
          detail::provider_call call(calls);
          fi_cancel(&ep->fid, &p.context);
        }
      }
      op->orphan = true;
      // A receive's cancellation usually completes at once; a send is not waited for.
      const auto limit = deadline_clock::now() +
                         (op->is_send ? std::chrono::milliseconds(0) : std::chrono::seconds(2));
      progress();
      while (op->orphan && op->state != detail::status::idle && deadline_clock::now() < limit) {
        if (op->completed == op->pieces.size()) break;
        progress();
      }
      if (op->state == detail::status::idle) return;  // completed and released by progress()
      if (op->completed == op->pieces.size()) {
        release(op);
        return;
      }
      // The provider still holds it: most cannot cancel a send in flight. It stays an orphan,
      // freed if it ever completes. A send's buffer is only ever read, and by now no receive can
      // match it (the communicator that posted it has failed, and tags are never reused).
      if (op->is_send) return;
      // A receive the provider would not cancel must not be filled later: close the endpoint,
      // which ends every use of every buffer. This rank's transport is finished.
      broken = true;
      broken_reason = who() +
                      "'s fabric endpoint was closed to take back the buffer of an abandoned "
                      "receive that provider '" +
                      provider_name() + "' would not cancel; build a new transport";
      {
        std::lock_guard closing(detail::mapping_lock());
        fi_close(&ep->fid);
      }
      ep = nullptr;
      pool.for_each([this](detail::operation& owned) {
        if (owned.state == detail::status::posted) fail(&owned, errc::transport, broken_reason);
      });
      in_flight = 0;
      release(op);
    }
  };

  std::unique_ptr<fabric_state> state_;
};

static_assert(weft::transport<transport>);

// A ready job from the launcher's environment over libfabric (weft/bootstrap/session.hpp): rank
// 0's TCP store, or the file store at WEFT_STORE_PATH, to exchange fabric addresses.
using session = basic_session<transport, config>;

}  // namespace weft::ofi
