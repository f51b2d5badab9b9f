// weft/stream/local_transport.hpp — one rank's endpoint among the ranks of one process
// (weft::stream::local_ranks, weft/stream/local_ranks.hpp): the weft::transport a communicator
// is made over.
#pragma once

#include "weft/call.hpp"
#include "weft/detail/bytes.hpp"
#include "weft/detail/request_handle.hpp"
#include "weft/stream/backend.hpp"
#include "weft/stream/operations.hpp"
#include "weft/transport.hpp"

#include <span>
#include <string>
#include <string_view>

namespace weft::stream {

template <backend Backend>
class local_ranks;

// One rank's endpoint (weft::transport, weft::reducing_transport). Used by one host thread at a
// time, as a communicator is; several ranks' endpoints may be used from one thread.
template <backend Backend>
class local_transport {
 public:
  using memory_type = typename Backend::memory_type;
  using request = weft::detail::request_handle<local_transport, detail::operation>;
  // Collectives only enqueue: results are there once the stream is synchronized.
  static constexpr bool stream_ordered = true;
  static constexpr std::string_view tuning_key = Backend::tuning_key;

  local_transport(local_ranks<Backend>* shared, int rank) : ranks_(shared), rank_(rank) {}

  int rank() const { return rank_; }
  int size() const { return ranks_->size(); }
  memory_type& memory() { return ranks_->memory(rank_); }
  local_ranks<Backend>& shared() { return *ranks_; }

  request send(int peer, std::span<const std::byte> data, tag_t tag) {
    weft::detail::check_peer(rank_, size(), peer, "send to");
    return request(
        ranks_->post(true, rank_, peer, tag, data.data(), nullptr, data.size(), nullptr, nullptr),
        this);
  }
  request recv(int peer, std::span<std::byte> data, tag_t tag) {
    weft::detail::check_peer(rank_, size(), peer, "receive from");
    return request(
        ranks_->post(false, peer, rank_, tag, nullptr, data.data(), data.size(), nullptr, nullptr),
        this);
  }
  // target = combine(own, incoming), run by the transfer's carrier straight from the send buffer.
  request recv_reduce(int peer, std::span<std::byte> target, std::span<const std::byte> own,
                      tag_t tag, const weft::detail::reducer& combine) {
    weft::detail::check_peer(rank_, size(), peer, "receive from");
    return request(ranks_->post(false, peer, rank_, tag, nullptr, target.data(), target.size(),
                                &combine, own.data()),
                   this);
  }

  // This rank's part of a whole collective (weft::collective_transport): once every rank has
  // posted with `tag`, a carrier of each device runs that device's share straight from every
  // rank's input into every rank's output (weft/stream/whole_collective.hpp).
  request post_collective(collective kind, std::span<const std::byte> in, std::span<std::byte> out,
                          const weft::detail::reducer* combine, tag_t tag) {
    return request(ranks_->post_collective(rank_, kind, in, out, combine, tag), this);
  }
  bool runs_collectives() const { return ranks_->runs_collectives(); }

  // Orders this rank's stream after the transfer and returns true at once (never blocks the
  // host); throws when the two sides' sizes differ or the ranks were aborted.
  bool wait(request& operation, deadline_clock::time_point) {
    return ranks_->enqueue_wait(rank_, operation.operation());
  }
  bool test(request& operation) { return ranks_->enqueue_wait(rank_, operation.operation()); }

  // Told by weft::communicator before each post: the call the next messages belong to.
  void note_call(collective kind, std::string_view algorithm, int step) {
    ranks_->note_call(rank_, {kind, algorithm, step});
  }

  // weft::communicator's tell_others: a rank that gave up aborts every rank of the process.
  void abort(int, std::string_view reason) { ranks_->abort(std::string(reason)); }

 private:
  friend request;
  void cancel(detail::operation* op) { ranks_->release(op); }

  local_ranks<Backend>* ranks_;
  int rank_;
};

}  // namespace weft::stream
