// weft/communicator/groups.hpp — the communicator's derived groups: split, the host
// layout and what is built on it (split_by_host, split_by_rail, the phase groups of hierarchical
// algorithms), and the exchange on the host that split, check mode and the layout use. Members of
// weft::communicator (weft/communicator/declaration.hpp), defined here by
// concern; included by weft/communicator.hpp.
#pragma once

#include "weft/communicator/declaration.hpp"
#include "weft/hosts.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace weft {

template <transport T>
communicator<T> communicator<T>::split(int color, int key) {
  if (color < 0) {
    throw error(errc::invalid_argument,
                describe_rank() + ": split color must be >= 0, got " + std::to_string(color));
  }
  refuse_on_streams("split");
  const auto scope = begin(collective::split, "direct");
  const auto p = static_cast<std::size_t>(size());
  std::vector<std::array<int, 2>> all(p);
  std::vector<std::array<int, 2>> mine(p, std::array<int, 2>{color, key});
  exchange(std::as_bytes(std::span(mine)), std::as_writable_bytes(std::span(all)),
           sizeof(std::array<int, 2>));
  std::vector<std::array<int, 2>> members;  // (key, parent rank)
  for (std::size_t i = 0; i < p; ++i) {
    if (all[i][0] == color) members.push_back({all[i][1], static_cast<int>(i)});
  }
  std::sort(members.begin(), members.end());
  std::vector<int> ranks;
  for (const auto& member : members) ranks.push_back(member[1]);
  return derived_group(ranks, derive_context(static_cast<std::uint32_t>(color)));
}

template <transport T>
const host_layout& communicator<T>::hosts() {
  if (!hosts_) {
    if (in_call_.load(std::memory_order_relaxed)) {
      learn_hosts();
    } else {
      const auto scope = begin(collective::split, "direct");
      learn_hosts();
    }
  }
  return *hosts_;
}

template <transport T>
communicator<T> communicator<T>::split_by_host() {
  const host_layout& layout = hosts();
  return derived_group(layout.ranks_on(layout.host_of(rank_)), derive_context(0x686f7374u));
}

template <transport T>
communicator<T> communicator<T>::split_by_rail() {
  const host_layout& layout = hosts();
  std::vector<int> rail;
  for (int h = 0; h < layout.hosts(); ++h) {
    const auto ranks = layout.ranks_on(h);
    const auto index = static_cast<std::size_t>(layout.local_index(rank_));
    if (index < ranks.size()) rail.push_back(ranks[index]);
  }
  return derived_group(rail, derive_context(0x7261696cu));
}

template <transport T>
communicator<T>& communicator<T>::group(std::span<const int> members) {
  for (auto& [ranks, kept] : groups_) {
    if (std::ranges::equal(ranks, members)) return *kept;
  }
  std::uint32_t salt = 0x67727570u;
  for (const int member : members) salt = salt * 0x01000193u ^ static_cast<std::uint32_t>(member);
  auto made = std::make_unique<communicator>(derived_group(members, mix_context(salt)));
  auto settings = made->settings();
  settings.check = false;
  made->set_settings(settings);
  made->lane_ = lane_;  // a phase of a call in flight gives way like the call
  groups_.emplace_back(std::vector<int>(members.begin(), members.end()), std::move(made));
  return *groups_.back().second;
}

template <transport T>
communicator<T> communicator<T>::derived_group(std::span<const int> members,
                                               std::uint32_t context) {
  refuse_if_broken("a derived group");
  communicator child(*transport_, settings_, context);
  child.ranks_.clear();
  for (std::size_t i = 0; i < members.size(); ++i) {
    child.ranks_.push_back(transport_rank(members[i]));
    if (members[i] == rank_) child.rank_ = static_cast<int>(i);
  }
  if (hosts_) child.hosts_ = std::make_shared<const host_layout>(hosts_->restrict_to(members));
  return child;
}

template <transport T>
void communicator<T>::exchange(detail::const_bytes mine, detail::bytes all, std::size_t each) {
  const int p = size();
  std::vector<pending> operations;
  operations.reserve(2 * static_cast<std::size_t>(p));
  next_step();
  for (int i = 0; i < p; ++i) {
    operations.push_back(
        recv(i, all.subspan(static_cast<std::size_t>(i) * each, each), statement_channel));
  }
  for (int j = 0; j < p; ++j) {
    operations.push_back(
        send(j, mine.subspan(static_cast<std::size_t>(j) * each, each), statement_channel));
  }
  for (auto& operation : operations) wait(operation);
}

template <transport T>
void communicator<T>::learn_hosts() {
  refuse_on_streams("learning the host layout");
  const std::uint64_t mine = host_key(this_host());
  const auto p = static_cast<std::size_t>(size());
  std::vector<std::uint64_t> all(p);
  std::vector<std::uint64_t> told(p, mine);
  exchange(std::as_bytes(std::span(told)), std::as_writable_bytes(std::span(all)),
           sizeof(std::uint64_t));
  hosts_ = std::make_shared<const host_layout>(
      host_layout::from_keys(std::span<const std::uint64_t>(all)));
}

}  // namespace weft
