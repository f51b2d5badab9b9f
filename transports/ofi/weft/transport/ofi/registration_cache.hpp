// weft/transport/ofi/registration_cache.hpp — memory registrations the libfabric transport keeps
// for the buffers it sends from and receives into, when the provider needs them.
//
// A provider that asks for FI_MR_LOCAL (verbs, efa, cxi) reads and writes only registered
// memory, and registering costs a system call and pinning pages: far more than a small message.
// The cache registers a buffer the first time a post touches it and hands out the registration
// again for any later post inside it. A pipelined collective touches a buffer in chunk-sized
// pieces, each its own registration unless a larger one covers it, so the cache holds up to
// `capacity` entries (room for a 4 GiB buffer in 1 MiB pieces, or a 16 MiB one in 4 KiB pieces,
// without evicting in the steady state) and past that evicts the least recently used idle one.
// A registration in use is never closed: one replaced by a longer one at the same address is
// retired and closed when its last user lets go. Keys are the provider's (FI_MR_PROV_KEY) or
// counted here; registrations are bound to the endpoint where FI_MR_ENDPOINT asks for it.
#pragma once

#include "weft/error.hpp"
#include "weft/transport/ofi/wire.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace weft::ofi::detail {

class registration_cache {
 public:
  static constexpr std::size_t capacity = 4096;

  registration_cache() = default;
  registration_cache(const registration_cache&) = delete;
  registration_cache& operator=(const registration_cache&) = delete;
  ~registration_cache() { close(); }

  // Starts registering in `domain` (bound to `endpoint` where the provider's mr_mode asks for
  // it) when the provider needs registered memory or `always` says so. `who` (this rank) and
  // `provider` are named in errors.
  void open(fid_domain* domain, fid_ep* endpoint, std::uint64_t mr_mode, bool always,
            std::string who, std::string provider) {
    domain_ = domain;
    endpoint_ = endpoint;
    needed_ = (mr_mode & FI_MR_LOCAL) != 0 || always;
    bind_to_endpoint_ = (mr_mode & FI_MR_ENDPOINT) != 0;
    provider_keys_ = (mr_mode & FI_MR_PROV_KEY) != 0;
    who_ = std::move(who);
    provider_ = std::move(provider);
  }

  // Whether posts need registrations at all.
  bool needed() const { return needed_; }
  // Registrations made so far (a buffer used again is not registered again).
  std::uint64_t made() const { return made_; }

  // A registration covering [data, data + size), one more user of it; nullptr when none is
  // needed. Throws errc::transport when the provider refuses to register.
  registration* acquire(std::byte* data, std::size_t size) {
    if (!needed_ || size == 0) return nullptr;
    const auto begin = reinterpret_cast<std::uintptr_t>(data);
    const auto end = begin + size;
    auto it = entries_.upper_bound(begin);
    if (it != entries_.begin()) {
      auto& entry = *std::prev(it)->second;
      if (entry.begin <= begin && end <= entry.end) {
        ++entry.users;
        entry.last_use = ++clock_;
        return &entry;
      }
    }
    if (entries_.size() >= capacity) evict_one();
    auto entry = std::make_unique<registration>();
    entry->begin = begin;
    entry->end = end;
    const std::uint64_t key = provider_keys_ ? 0 : next_key_++;
    check("fi_mr_reg",
          fi_mr_reg(domain_, data, size, FI_SEND | FI_RECV, 0, key, 0, &entry->mr, nullptr));
    if (bind_to_endpoint_) {
      check("fi_mr_bind", fi_mr_bind(entry->mr, &endpoint_->fid, 0));
      check("fi_mr_enable", fi_mr_enable(entry->mr));
    }
    ++made_;
    entry->users = 1;
    entry->last_use = ++clock_;
    auto* raw = entry.get();
    auto [slot, fresh] = entries_.try_emplace(begin, nullptr);
    if (!fresh) {  // a shorter registration started here: the longer one replaces it
      if (slot->second->users == 0) {
        fi_close(&slot->second->mr->fid);
      } else {
        retired_.push_back(std::move(slot->second));
      }
    }
    slot->second = std::move(entry);
    return raw;
  }

  // One user fewer of `used` (nullptr: none); retired registrations nobody uses are closed.
  void release(registration* used) {
    if (used != nullptr) --used->users;
    for (auto it = retired_.begin(); it != retired_.end();) {
      if ((*it)->users == 0) {
        fi_close(&(*it)->mr->fid);
        it = retired_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Forgets every registration without closing it (a forked child's copy: they are the
  // parent's).
  void abandon() {
    entries_.clear();
    retired_.clear();
  }

  // Closes every registration (after the endpoint that used them).
  void close() {
    for (auto& [begin, entry] : entries_) fi_close(&entry->mr->fid);
    for (auto& entry : retired_) fi_close(&entry->mr->fid);
    entries_.clear();
    retired_.clear();
  }

 private:
  void evict_one() {
    auto oldest = entries_.end();
    for (auto i = entries_.begin(); i != entries_.end(); ++i) {
      if (i->second->users == 0 &&
          (oldest == entries_.end() || i->second->last_use < oldest->second->last_use))
        oldest = i;
    }
    if (oldest != entries_.end()) {
      fi_close(&oldest->second->mr->fid);
      entries_.erase(oldest);
    }
  }

  void check(const char* what, int code) const {
    if (code != 0) {
      throw error(errc::transport,
                  who_ + ": " + what + " failed on provider '" + provider_ + "': " + text_of(code));
    }
  }

  std::string who_, provider_;
  fid_domain* domain_ = nullptr;
  fid_ep* endpoint_ = nullptr;
  bool needed_ = false;
  bool bind_to_endpoint_ = false;  // FI_MR_ENDPOINT
  bool provider_keys_ = true;      // FI_MR_PROV_KEY
  std::uint64_t next_key_ = 1;
  std::uint64_t made_ = 0;
  std::uint64_t clock_ = 0;  // counts uses, for least-recently-used eviction
  std::map<std::uintptr_t, std::unique_ptr<registration>> entries_;  // by first byte
  std::vector<std::unique_ptr<registration>> retired_;               // replaced while in use
};

}  // namespace weft::ofi::detail
