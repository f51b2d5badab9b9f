// weft/communicator/waits.hpp — how the communicator waits: a posted operation's wait and
// test with the call's context in their errors, telling the other ranks of a failure, the waits of
// a call in flight (which give way to the others: weft/nonblocking.hpp) and the communicator such
// a call runs on, and completing the calls in flight before a blocking call. Members of
// weft::communicator (weft/communicator/declaration.hpp), defined here by concern; included by
// weft/communicator.hpp.
#pragma once

#include "weft/communicator/declaration.hpp"
#include "weft/communicator/in_flight.hpp"

#include <algorithm>
#include <string>

namespace weft {

template <transport T>
void communicator<T>::wait(pending& operation) {
  if (!operation.active()) return;
  if (recorder_) recorder_->waiting(step_, operation.peer_, operation.is_send_);
  const bool done = ask_transport(operation, [&](request_type& request) {
    const auto start = deadline_clock::now();
    const auto deadline = start + settings_.timeout;
    if (lane_ != nullptr) return wait_in_lane(request, deadline);
    if constexpr (early_message_transport<T> || peeking_transport<T>) {
      if (!settings_.detect_mismatch) return transport_->wait(request, deadline);
      // A slow wait looks at what arrived early, after 1 ms and then at doubling intervals: a
      // message of another call means the ranks' calls differ (communicator_consistency.hpp).
      auto slice = std::chrono::milliseconds(1);
      auto until = std::min(deadline, start + slice);
      bool said = false;
      while (!transport_->wait(request, until)) {
        if (until >= deadline) return false;
        look_for_other_calls();
        if (!said && !operation.is_send_ &&
            deadline_clock::now() - start >= std::chrono::milliseconds(50)) {
          say_waiting_for(operation.peer_);
          said = true;
        }
        slice = std::min(slice * 2, std::chrono::milliseconds(128));
        until = std::min(deadline, deadline_clock::now() + slice);
      }
      return true;
    } else {
      return transport_->wait(request, deadline);
    }
  });
  if (!done) {
    tell_others(operation.peer_, describe_rank() + " timed out waiting for " +
                                     describe_rank(operation.peer_) + " (" + where() + ")");
    fail(errc::timeout,
         describe_rank() + " waited " + std::to_string(settings_.timeout.count()) + " ms to " +
             (operation.is_send_ ? "send " : "receive ") + std::to_string(operation.bytes_) +
             " bytes " + (operation.is_send_ ? "to " : "from ") + describe_rank(operation.peer_) +
             " (" + where() + "); that rank may not have called " +
             std::string(to_string(collective_)) +
             ", may have called another collective (WEFT_CHECK=1 detects that), or is stuck");
  }
  complete(operation);
}

template <transport T>
bool communicator<T>::test(pending& operation) {
  if (!operation.active()) return true;
  if (!ask_transport(operation, [&](request_type& request) { return transport_->test(request); })) {
    return false;
  }
  complete(operation);
  return true;
}

template <transport T>
void communicator<T>::become_lane(const communicator& parent, std::uint32_t context,
                                  detail::lane_yield* lane) {
  transport_ = parent.transport_;
  settings_ = parent.settings_;
  if (context != context_) groups_.clear();  // their tag spaces came from the old context
  context_ = context;
  ranks_ = parent.ranks_;
  rank_ = parent.rank_;
  hosts_ = parent.hosts_;
  sequence_ = 0;
  lane_ = lane;
  user_context_ = parent.user_context_.value_or(parent.context_);
  if (!recorder_ && parent.recorder_)
    recorder_ = detail::recorder_handle::sharing(parent.recorder_);
  broken_ = parent.broken_;
  broken_code_ = parent.broken_code_;
  broken_message_ = parent.broken_message_;
}

template <transport T>
void communicator<T>::tell_others(int peer, const std::string& reason) {
  tell_others_of(transport_rank(peer), reason);
}

template <transport T>
void communicator<T>::tell_others_of(int culprit, const std::string& reason) {
  if constexpr (requires(T & t) { t.abort(0, std::string_view{}); }) {
    transport_->abort(culprit, reason);
  }
}

template <transport T>
void communicator<T>::end_by_own_exception(std::string_view what) {
  if (broken_) return;  // it failed, and said why, already
  const std::string call =
      (asked_ != nullptr ? asked_->describe() : std::string(to_string(collective_))) + " #" +
      std::to_string(sequence_) + " in step " + std::to_string(step_);
  const std::string notice = std::string(detail::thrown_notice) + describe_rank() + ": its " +
                             call + " threw: " + std::string(what) +
                             std::string(detail::thrown_end);
  tell_others_of(transport_rank(rank_), notice);
  broken_ = true;
  broken_code_ = errc::peer_lost;
  broken_message_ = describe_rank() + "'s " + call + " threw: " + std::string(what);
  record_failure(error(errc::peer_lost, broken_message_, transport_rank(rank_)));
}

template <transport T>
void communicator<T>::revoke() {
  if (broken_ && broken_code_ == errc::revoked) return;
  const std::string notice =
      std::string(detail::revoked_notice) + describe_rank() + std::string(detail::revoked_end);
  tell_others_of(transport_rank(rank_), notice);
  broken_ = true;
  broken_code_ = errc::revoked;
  broken_message_ = describe_rank() + " revoked it";
}

template <transport T>
bool communicator<T>::wait_in_lane(typename communicator<T>::request_type& request,
                                   deadline_clock::time_point deadline) {
  for (bool advanced = true;; advanced = false) {
    // A wait whose deadline has come polls once, along the transport's fastest path (TCP reads
    // the receive's own connection directly, where test() goes through its event loop).
    if (transport_->wait(request, deadline_clock::now())) return true;
    if (deadline_clock::now() >= deadline) return false;
    const auto until = lane_->suspend(advanced);
    if (until > deadline_clock::now() && transport_->wait(request, std::min(until, deadline)))
      return true;
  }
}

template <transport T>
void communicator<T>::complete_calls_in_flight() {
  if (in_flight_ == nullptr || broken_) return;
  in_flight_->drain();
  if (const error* failed = in_flight_->failure()) {
    broken_ = true;
    broken_code_ = failed->code();
    broken_message_ = detail::strip_prefix(failed->what());
  }
}

template <transport T>
template <class Ask>
bool communicator<T>::ask_transport(pending& operation, Ask&& ask) {
  try {
    return ask(*operation.request_);
  } catch (const error& failure) {
    // The others hear of the rank the transport blames (the one lost first), else of the peer.
    const int culprit =
        failure.culprit() >= 0 ? failure.culprit() : transport_rank(operation.peer_);
    // A notice that ranks' calls differ: a mismatch here too, whatever the transport called it.
    if (const auto notice = detail::quoted_mismatch(failure.what());
        !notice.empty() && failure.code() != errc::mismatch) {
      // (passed on: a peer that sees this rank close before the notice reaches it reads it too)
      tell_others_of(culprit, std::string(notice));
      fail(errc::mismatch,
           describe_rank() + " heard: " + std::string(notice) + "; this rank's call #" +
               std::to_string(sequence_) + " is " +
               (asked_ != nullptr ? asked_->describe() : std::string(to_string(collective_))) +
               " (" + where() + ")");
    }
    // A message of another size than this rank's call expects (splits that differ between
    // ranks): calls differ, and every rank hears it as that, the sender too.
    if (failure.code() == errc::mismatch) {
      std::string_view text(failure.what());
      if (text.starts_with("weft: mismatch: ")) text.remove_prefix(16);
      const std::string notice = !detail::quoted_mismatch(text).empty()
                                     ? std::string(detail::quoted_mismatch(text))
                                     : std::string(detail::mismatch_notice) + std::string(text) +
                                           " (" + where() + "); " +
                                           std::string(detail::mismatch_advice);
      tell_others_of(culprit, notice);
      fail(errc::mismatch, notice, failure.culprit());
    }
    // A rank revoked the communicator: revoked here too, whoever the transport blames.
    if (const auto notice = detail::quoted_revoked(failure.what()); !notice.empty()) {
      fail(errc::revoked,
           describe_rank() + " heard: " + std::string(notice) + " (" + where() + ")");
    }
    // A rank whose call threw: its own exception, whatever the transport called it.
    if (const auto notice = detail::quoted_thrown(failure.what()); !notice.empty()) {
      tell_others_of(culprit, std::string(notice));
      fail(errc::peer_lost,
           describe_rank() + " heard: " + std::string(notice) + " (" + where() + ")", culprit);
    }
    tell_others_of(culprit, detail::strip_prefix(failure.what()) + " (" + where() + ")");
    fail(failure.code(), detail::strip_prefix(failure.what()) + " (" + where() + ")",
         failure.culprit());
  }
}

template <transport T>
void communicator<T>::complete(pending& operation) {
  operation.request_.reset();
  if (operation.combine_ != nullptr) {
    (*operation.combine_)(operation.target_, operation.own_, operation.staged_);
    operation.combine_ = nullptr;
  }
}

}  // namespace weft
