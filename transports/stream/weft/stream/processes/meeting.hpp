// weft/stream/processes/meeting.hpp — how a stream-ordered rank meets the others of its
// host: its region and pool handed over a Unix socket (weft/transport/shm/wiring.hpp), theirs
// mapped and registered with the device. Members of weft::stream::process_rank
// (weft/stream/processes/process_rank.hpp).
#pragma once

#include "weft/stream/processes/process_rank.hpp"

namespace weft::stream {

// Meets the other ranks of this host: hands over this rank's region and pool, maps theirs.
template <sharing_backend Backend>
void process_rank<Backend>::meet(bootstrap::store& meeting) {
  // Watched from the start: a rank killed while the others wait for it at start-up is a notice
  // that ends their wait (weft/bootstrap/failure_watch.hpp); later, any rank's loss aborts this
  // one.
  failures_ = std::make_unique<bootstrap::failure_watch>(
      meeting, config_.prefix, rank_, 0, [this](int lost, const std::string& why) {
        if (lost < 0 || !watching_.load()) return;
        std::lock_guard lock(mutex_);
        abort_locked(lost == rank_ ? "the other ranks count this rank as lost (" + why + ")"
                                   : "rank " + std::to_string(lost) + " was lost (" + why + ")",
                     errc::peer_lost);
      });
  try {
    const auto deadline = deadline_clock::now() + config_.connect_timeout;
    const std::string key = config_.prefix + "/shm-ordered/";
    bootstrap::claim_rank(meeting, config_.prefix + "/shm-ordered-rank/" + std::to_string(rank_),
                          rank_);
    shm::detail::handover offer;
    offer.descriptors.push_back(own_.descriptor());
    if (pool_->descriptor() >= 0) offer.descriptors.push_back(pool_->descriptor());
    const std::uint64_t sizes[2] = {
        own_.bytes(), pool_->bytes()};  // the pool as made (the device may round it up)
    offer.payload.assign(reinterpret_cast<const char*>(sizes), sizeof sizes);
    offer.payload += pool_->handle();
    shm::detail::region_server server(config_.secret, std::move(offer), size_ - 1);
    const std::string identity = shm::detail::host_identity();
    const std::string here = shm::detail::host_name();
    const std::string shape = std::to_string(shape_.envelopes) + "/" +
                              std::to_string(shape_.flags) + "/" + std::string(pool_->way());
    meeting.set(key + std::to_string(rank_), identity + "|" + here + "|" + server.name() + "|" +
                                                 shape + "|" + std::to_string(size_));
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      const auto value = meeting.get(key + std::to_string(peer), deadline);
      if (!value) {
        throw error(errc::timeout, who() + " timed out after " +
                                       std::to_string(config_.connect_timeout.count()) +
                                       " ms at start-up: no address from rank " +
                                       std::to_string(peer) + " (not started?)");
      }
      std::vector<std::string> field;
      std::size_t start = 0;
      for (std::size_t bar; (bar = value->find('|', start)) != std::string::npos; start = bar + 1)
        field.push_back(value->substr(start, bar - start));
      field.push_back(value->substr(start));
      if (field.size() != 5)
        throw error(errc::transport, "stream-ordered transport: rank " + std::to_string(peer) +
                                         " published '" + *value + "'");
      if (field[4] != std::to_string(size_)) {  // the job cannot start: every rank hears why
        const std::string why = weft::detail::sizes_differ(
            who(), std::to_string(size_), "rank " + std::to_string(peer), field[4]);
        failures_->report(peer, why);
        throw error(errc::mismatch, who() + " could not start: " + why);
      }
      if (field[0] != identity) {
        throw error(errc::invalid_argument, "stream-ordered transport: " + who() +
                                                " runs on host " + here + " and rank " +
                                                std::to_string(peer) + " on host " + field[1] +
                                                ": it joins the processes of one host");
      }
      if (field[3] != shape) {
        throw error(errc::invalid_argument, "stream-ordered transport: rank " +
                                                std::to_string(peer) +
                                                " has envelopes/"
                                                "flags/sharing " +
                                                field[3] + ", " + who() + " " + shape +
                                                ": every rank must be built and configured alike");
      }
      attach(peer, shm::detail::fetch_handover(field[2], config_.secret, peer, deadline));
    }
    if (!server.finish(deadline)) {
      throw error(errc::timeout,
                  who() + " timed out at start-up: not every rank fetched its region");
    }
  } catch (const error& failure) {
    failures_->await_notice(failure);
    failures_->rethrow_if_lost(who());
    throw;
  }
  failures_->started();
}

// Maps what `peer` handed over: its region (registered for the device) and its pool.
template <sharing_backend Backend>
void process_rank<Backend>::attach(int peer, shm::detail::fetched got) {
  const auto p = static_cast<std::size_t>(peer);
  pids_[p] = got.pid;
  pidfds_[p] = got.pidfd;
  std::uint64_t sizes[2] = {0, 0};
  const bool with_fd = pool_->descriptor() >= 0;
  if (got.payload.size() < sizeof sizes || got.descriptors.size() != (with_fd ? 2U : 1U)) {
    for (int fd : got.descriptors) ::close(fd);
    throw error(errc::transport, "stream-ordered transport: rank " + std::to_string(peer) +
                                     "'s region came incomplete");
  }
  std::memcpy(sizes, got.payload.data(), sizeof sizes);
  const std::string handle = got.payload.substr(sizeof sizes);
  const int pool_fd = with_fd ? got.descriptors[1] : -1;
  try {
    if (sizes[0] != shape_.total()) {
      ::close(got.descriptors[0]);
      throw error(errc::transport, "stream-ordered transport: rank " + std::to_string(peer) +
                                       "'s region has " + std::to_string(sizes[0]) +
                                       " bytes, not " + std::to_string(shape_.total()));
    }
    peer_regions_.push_back(shm::detail::map_region(got.descriptors[0],
                                                    static_cast<std::size_t>(sizes[0]),
                                                    "rank " + std::to_string(peer) + "'s region"));
  } catch (...) {
    if (pool_fd >= 0) ::close(pool_fd);
    throw;
  }
  peer_regions_.back().forget_descriptor();
  views_[p].base = peer_regions_.back().base();
  backend_.register_host(views_[p].base, peer_regions_.back().bytes());
  registered_.push_back(views_[p].base);
  peer_pools_[p].emplace(
      backend_.map_pool(device_, pool_fd, handle, static_cast<std::size_t>(sizes[1])));
  pool_bases_[p] = peer_pools_[p]->data();
}

}  // namespace weft::stream
