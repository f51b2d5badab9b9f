// weft/communicator/consistency.hpp — how ranks whose calls differ fail with
// errc::mismatch without check mode. Members of weft::communicator
// (weft/communicator/declaration.hpp), defined here by concern; included by weft/communicator.hpp.
//
// Every message of a collective carries its call's kind, digest and number in its tag
// (communicator::call_tag), so calls that differ never match each other's messages. What shows
// the difference is a message that arrived early and belongs to no call this rank will make:
//   - one of this call's number but another kind or digest: its sender made another call;
//   - one of an earlier number that no receive here took: its sender's call sent where this
//     rank's did not receive (a different root, or a call this rank skipped).
// Where every rank that differs only waits to receive (a root that names another root, which
// names it), no message of theirs shows it: a receive still waiting after 50 ms sends its peer a
// zero-byte message on the waiting channel, in its call's tag, which the peer reads like any
// other (and takes in when it shows nothing).
// A rank looks at what arrived early while a wait is slow (after 1 ms, then at doubling
// intervals) and at the end of each call, on transports that can show it
// (weft::early_message_transport: inproc, tcp, shm and tiered; libfabric looks for them one at a
// time, weft::peeking_transport, in slow waits only). It then fails with
// errc::mismatch naming the sender and both calls' kinds, and tells every rank: the notice's
// text starts with detail::mismatch_notice, and a rank that hears it fails with mismatch too,
// not peer_lost. A call that differs from the others' only where no message shows it (the
// digest's 1 in 256) is caught by WEFT_CHECK=1, which compares every call in full.
#pragma once

#include "weft/communicator/declaration.hpp"

#include <array>
#include <string>

namespace weft {

template <transport T>
std::size_t communicator<T>::messages_arrived_early(std::span<early_message> found,
                                                    bool at_call_end) {
  if constexpr (early_message_transport<T>) {
    return std::min(transport_->early_messages(found), found.size());
  } else if constexpr (peeking_transport<T>) {
    // One look per peer for this call's number and for each of the three before it: the oldest
    // message of a number is enough, since a peer's messages of one number are all of one call.
    // Only in slow waits (each look is a call into the provider), at most 8 peers a time, in turn.
    const int p = size();
    if (at_call_end || p < 2) return 0;
    std::size_t count = 0;
    const int peers = std::min(p - 1, 8);
    for (int i = 0; i < peers && count < found.size(); ++i) {
      peek_next_ = (peek_next_ + 1) % p;
      if (peek_next_ == rank_) peek_next_ = (peek_next_ + 1) % p;
      const int peer = transport_rank(peek_next_);
      for (std::uint32_t behind = 0; behind < 4 && count < found.size(); ++behind) {
        const tag_t tag = detail::tags::of_number(context_, sequence_ - behind);
        if (const auto seen = transport_->peek(peer, tag, detail::tags::all_but_number))
          found[count++] = early_message{peer, *seen};
      }
    }
    return count;
  } else {
    static_cast<void>(found);
    static_cast<void>(at_call_end);
    return 0;
  }
}

template <transport T>
void communicator<T>::look_for_other_calls(bool at_call_end) {
  if constexpr (early_message_transport<T> || peeking_transport<T>) {
    std::array<early_message, 32> found;
    const std::size_t count = messages_arrived_early(found, at_call_end);
    for (std::size_t i = 0; i < count; ++i) {
      const tag_t tag = found[i].tag;
      const detail::tags::fields seen = detail::tags::read(tag);
      if (seen.context != context_ || seen.user) continue;  // another's, a user tag
      if (seen.kind == detail::tags::kind_mask) continue;   // a statement (check mode, split)
      // 0: this call's; up to half the numbers' range: an earlier call's; beyond: a later one's
      constexpr std::uint32_t numbers = detail::tags::number_mask;
      const auto behind = static_cast<std::uint32_t>((sequence_ - seen.number) & numbers);
      const bool earlier = behind != 0 && behind <= numbers / 2;
      const bool same_call =
          seen.kind == static_cast<unsigned>(collective_) && seen.digest == digest_;
      const bool waiting = seen.channel == waiting_channel;
      if (waiting && ((behind == 0 && same_call) || earlier)) {
        take_waiting(found[i].peer,
                     tag);  // a peer waited for this rank in this call or an ended one
        continue;
      }
      if ((behind == 0 && !same_call) || earlier) {
        const auto at = std::find(ranks_.begin(), ranks_.end(), found[i].peer);
        if (at == ranks_.end()) continue;
        // The sender's number for it: this rank's numbers, shifted by how far behind it is.
        fail_other_call(static_cast<int>(at - ranks_.begin()), static_cast<collective>(seen.kind),
                        sequence_ - behind, earlier);
      }
    }
  } else {
    static_cast<void>(at_call_end);
  }
}

template <transport T>
void communicator<T>::say_waiting_for(int peer) {
  if constexpr (early_message_transport<T> || peeking_transport<T>) {
    // Sends already taken in are let go; one not yet taken is kept (dropping it would cancel it).
    std::erase_if(waiting_said_, [&](auto& sent) {
      try {
        return !sent || transport_->test(*sent);
      } catch (const error&) {  // its peer is gone: the wait that sent it hears of that itself
        return true;
      }
    });
    if (waiting_said_.size() >= 64) return;  // peers that take nothing in: say no more
    waiting_said_.emplace_back(
        transport_->send(transport_rank(peer), detail::const_bytes{}, call_tag(waiting_channel)));
  }
}

template <transport T>
void communicator<T>::take_waiting(int transport_peer, tag_t tag) {
  auto taken = transport_->recv(transport_peer, detail::bytes{}, tag);
  // (it has arrived: the receive completes at once; one that does not is dropped, and cancelled)
  static_cast<void>(transport_->wait(taken, deadline_clock::now() + std::chrono::milliseconds(10)));
}

template <transport T>
void communicator<T>::fail_other_call(int peer, collective theirs, std::uint32_t their_number,
                                      bool earlier) {
  const std::string mine = asked_ != nullptr ? asked_->describe()
                                             : std::string(to_string(collective_)) +
                                                   " (algorithm " + std::string(algorithm_) + ")";
  std::string what;
  if (earlier) {
    what = describe_rank(peer) + " sent a message in its " + std::string(to_string(theirs)) + " #" +
           std::to_string(their_number) + " that no call of " + describe_rank() +
           " received (its calls differ there: another root, or a call one of them skipped); " +
           describe_rank() + " is now in " + mine + " #" + std::to_string(sequence_);
  } else {
    what = describe_rank(peer) + "'s call #" + std::to_string(sequence_) + " is " +
           std::string(to_string(theirs)) +
           (theirs == collective_ ? " with another root, count, type, op or algorithm" : "") +
           ", but " + describe_rank() + "'s is " + mine;
  }
  const std::string message =
      std::string(detail::mismatch_notice) + what + "; " + std::string(detail::mismatch_advice);
  tell_others(peer, message);
  fail(errc::mismatch, describe_rank() + ": " + message);
}

template <transport T>
void communicator<T>::skip_calls(const std::string& what) {
  if (broken_) return;
  const std::string message = std::string(detail::mismatch_notice) + describe_rank() + " " + what +
                              "; " + std::string(detail::mismatch_advice);
  tell_others_of(transport_rank(rank_), message);
  broken_ = true;
  broken_code_ = errc::mismatch;
  broken_message_ = message;
}

}  // namespace weft
