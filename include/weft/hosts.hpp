// weft/hosts.hpp — which ranks share a host: the layout hierarchical collectives are built on.
//
//   const weft::host_layout& layout = comm.hosts();   // learned once, then kept
//   layout.hosts();              // how many hosts
//   layout.host_of(r);           // rank r's host, 0.. in order of each host's lowest rank
//   layout.ranks_on(h);          // the ranks of host h, ascending
//   layout.local_index(r);       // r's place among its host's ranks: the rail it belongs to
//
// A host is what this_host() names: WEFT_HOST when it is set (any text; ranks that give the same
// text share a host), else this boot of the machine and this process's network namespace, so
// ranks in different containers or network namespaces of one machine are different hosts, as
// they are to the network. A transport that knows the layout (an in-process world given one, a
// tiered world) hands it to its communicators; otherwise a communicator learns it by exchanging
// its ranks' host names the first time a call needs it.
#pragma once

#include "weft/detail/env.hpp"
#include "weft/detail/this_host.hpp"
#include "weft/error.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace weft {

class host_layout {
 public:
  host_layout() = default;

  // host_keys[r] is any value naming rank r's host; ranks with equal keys share a host. Hosts are
  // numbered in order of their lowest rank.
  template <class Key>
  static host_layout from_keys(std::span<const Key> host_keys) {
    host_layout layout;
    std::vector<Key> seen;
    layout.host_.reserve(host_keys.size());
    for (const Key& key : host_keys) {
      const auto found = std::find(seen.begin(), seen.end(), key);
      layout.host_.push_back(static_cast<int>(found - seen.begin()));
      if (found == seen.end()) seen.push_back(key);
    }
    layout.index();
    return layout;
  }

  // `ranks_per_host` ranks on each host, in rank order: {2, 3} is ranks 0-1 on host 0 and 2-4 on
  // host 1.
  static host_layout blocks(std::span<const int> ranks_per_host) {
    std::vector<int> keys;
    for (std::size_t h = 0; h < ranks_per_host.size(); ++h) {
      if (ranks_per_host[h] < 1) {
        throw error(errc::invalid_argument, "host layout: host " + std::to_string(h) + " has " +
                                                std::to_string(ranks_per_host[h]) +
                                                " ranks; every host needs one");
      }
      keys.insert(keys.end(), static_cast<std::size_t>(ranks_per_host[h]), static_cast<int>(h));
    }
    return from_keys(std::span<const int>(keys));
  }

  bool empty() const { return host_.empty(); }
  int size() const { return static_cast<int>(host_.size()); }
  int hosts() const { return static_cast<int>(members_.size()); }
  int host_of(int rank) const { return host_[at(rank)]; }
  int local_index(int rank) const { return local_[at(rank)]; }
  int local_size(int rank) const { return static_cast<int>(ranks_on(host_of(rank)).size()); }
  std::span<const int> ranks_on(int host) const { return members_[static_cast<std::size_t>(host)]; }
  // The most and fewest ranks any host has.
  int largest_host() const { return largest_; }
  int smallest_host() const { return smallest_; }
  // True when every host has one rank, or there is one host: nothing to split in two tiers.
  bool flat() const { return hosts() <= 1 || largest_ == 1; }

  // The layout of a group: members[i] is the rank here of the group's rank i.
  host_layout restrict_to(std::span<const int> members) const {
    std::vector<int> keys;
    keys.reserve(members.size());
    for (const int rank : members) keys.push_back(host_of(rank));
    return from_keys(std::span<const int>(keys));
  }

  // "2 hosts: 2 + 3 ranks".
  std::string describe() const {
    std::string text = std::to_string(hosts()) + (hosts() == 1 ? " host: " : " hosts: ");
    for (int h = 0; h < hosts(); ++h) text += (h ? " + " : "") + std::to_string(ranks_on(h).size());
    return text + " ranks";
  }

  friend bool operator==(const host_layout& a, const host_layout& b) { return a.host_ == b.host_; }

 private:
  std::size_t at(int rank) const {
    if (rank < 0 || rank >= size()) {
      throw error(errc::invalid_argument, "host layout: no rank " + std::to_string(rank) +
                                              " among " + std::to_string(size()));
    }
    return static_cast<std::size_t>(rank);
  }

  void index() {
    members_.clear();
    local_.assign(host_.size(), 0);
    for (std::size_t r = 0; r < host_.size(); ++r) {
      const auto h = static_cast<std::size_t>(host_[r]);
      if (members_.size() <= h) members_.resize(h + 1);
      local_[r] = static_cast<int>(members_[h].size());
      members_[h].push_back(static_cast<int>(r));
    }
    largest_ = 0;
    smallest_ = members_.empty() ? 0 : static_cast<int>(host_.size());
    for (const auto& ranks : members_) {
      largest_ = std::max(largest_, static_cast<int>(ranks.size()));
      smallest_ = std::min(smallest_, static_cast<int>(ranks.size()));
    }
  }

  std::vector<int> host_;                  // rank -> host
  std::vector<int> local_;                 // rank -> its place on its host
  std::vector<std::vector<int>> members_;  // host -> its ranks, ascending
  int largest_ = 0;
  int smallest_ = 0;
};

// This process's host, as the layout names it: WEFT_HOST, else this boot's id and this process's
// network namespace.
inline std::string this_host() {
  if (const auto named = detail::env::text("WEFT_HOST")) return std::string(*named);
  return detail::boot_id() + "/" + detail::namespace_of("net");
}

// A 64-bit digest of a host name (FNV-1a), what ranks exchange to learn the layout.
constexpr std::uint64_t host_key(std::string_view host) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (const char c : host) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace weft
