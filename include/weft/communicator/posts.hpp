// weft/communicator/posts.hpp — how a communicator posts a message: in its group's
// ranks, under the call's tag (weft/communicator/tags.hpp), counted in the call's report; a
// reducing receive staged where the transport cannot combine as it receives; a whole collective
// handed to a transport that runs it. Members of weft::communicator
// (weft/communicator/declaration.hpp), defined here by concern; included by weft/communicator.hpp.
#pragma once

#include "weft/communicator/declaration.hpp"
#include "weft/communicator/tags.hpp"

#include <string>

namespace weft {

template <transport T>
typename communicator<T>::pending communicator<T>::post_send(int peer, detail::const_bytes data,
                                                             tag_t tag) {
  note_call();
  pending result;
  result.peer_ = peer;
  result.is_send_ = true;
  result.bytes_ = data.size();
  result.request_.emplace(transport_->send(transport_rank(peer), data, tag));
  bytes_sent_ += data.size();
  return result;
}

template <transport T>
typename communicator<T>::pending communicator<T>::post_recv(int peer, detail::bytes data,
                                                             tag_t tag) {
  note_call();
  pending result;
  result.peer_ = peer;
  result.bytes_ = data.size();
  result.request_.emplace(transport_->recv(transport_rank(peer), data, tag));
  return result;
}

template <transport T>
typename communicator<T>::pending communicator<T>::recv_reduce(int peer, detail::bytes target,
                                                               detail::const_bytes own,
                                                               const detail::reducer& combine,
                                                               detail::bytes staging, int channel) {
  pending result;
  result.peer_ = peer;
  result.bytes_ = target.size();
  note_call();
  if constexpr (reducing_transport<T>) {
    result.request_.emplace(
        transport_->recv_reduce(transport_rank(peer), target, own, call_tag(channel), combine));
  } else {
    result.request_.emplace(transport_->recv(transport_rank(peer), staging, call_tag(channel)));
    result.combine_ = &combine;
    result.target_ = target;
    result.own_ = own;
    result.staged_ = staging;
  }
  return result;
}

template <transport T>
typename communicator<T>::pending communicator<T>::post_collective(
    detail::const_bytes in, detail::bytes out,
    const detail::reducer* combine) requires collective_transport<T> {
  bool whole_world = size() == transport_->size();
  for (int i = 0; i < size() && whole_world; ++i) whole_world = transport_rank(i) == i;
  if (!whole_world) {
    throw error(errc::invalid_argument,
                describe_rank() + ": " + std::string(algorithm_) +
                    " runs the collective on the transport's whole world, and this "
                    "communicator is a group of it; nothing was sent");
  }
  return post_part(in, out, [&](tag_t tag) {
    return transport_->post_collective(collective_, in, out, combine, tag);
  });
}

template <transport T>
typename communicator<T>::pending communicator<T>::post_in_switch(
    detail::const_bytes in, detail::bytes out,
    const detail::reducer* combine) requires in_switch_transport<T> {
  return post_part(in, out, [&](tag_t tag) {
    return transport_->post_in_switch(collective_, transport_ranks(), in, out, combine, tag);
  });
}

template <transport T>
template <class Post>
typename communicator<T>::pending communicator<T>::post_part(detail::const_bytes in,
                                                             detail::bytes out, Post&& post) {
  note_call();
  pending result;
  result.peer_ = rank_;
  result.is_send_ = true;
  result.bytes_ = out.size();
  // (without the digest: the transport meets every rank's part under one tag and compares
  // their sizes itself, naming both)
  result.request_.emplace(post(call_tag(0) & ~detail::tags::digest_bits));
  bytes_sent_ += in.size();
  return result;
}

}  // namespace weft
