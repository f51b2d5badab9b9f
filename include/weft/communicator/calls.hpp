// weft/communicator/calls.hpp — how a call starts and ends on a communicator: one thread
// at a time, a new sequence number, a refusal after a failure, and the call's flight record
// (weft/recorder.hpp). Members of weft::communicator (weft/communicator/declaration.hpp), defined
// here by concern; included by weft/communicator.hpp.
#pragma once

#include "weft/communicator/declaration.hpp"

#include <exception>
#include <string>

namespace weft {

template <transport T>
typename communicator<T>::call_scope communicator<T>::begin(collective kind,
                                                            std::string_view algorithm,
                                                            const call_signature* asked) {
  if (in_call_.exchange(true, std::memory_order_acquire)) {
    throw error(errc::invalid_argument,
                describe_rank() + ": " + std::string(to_string(kind)) +
                    ": another thread is inside a call on this communicator; a communicator "
                    "serves one thread at a time: give each thread its own (dup() or split()); "
                    "nothing was sent");
  }
  call_scope scope(*this);
  complete_calls_in_flight();
  refuse_if_broken(to_string(kind));
  // Only collectives take a sequence number (their tags carry it): a send or recv is made by
  // two ranks of the communicator, and numbering it would put them out of step with the rest.
  if (!detail::point_to_point(kind)) ++sequence_;
  // Made at the first call, when the rank map and context are final (split sets them after
  // construction); a lane records into its parent's.
  if (!recorder_ && lane_ == nullptr && settings_.recorder_calls > 0) {
    recorder_ = detail::recorder_handle(settings_.recorder_calls, ranks_, rank_, context_);
  }
  if (recorder_) recorder_->begin(sequence_, kind, algorithm, asked);
  collective_ = kind;
  algorithm_ = algorithm;
  asked_ = asked;
  digest_ = asked != nullptr && settings_.detect_mismatch ? detail::digest(*asked) : 0;
  step_ = 0;
  bytes_sent_ = 0;
  return scope;
}

template <transport T>
communicator<T>::call_scope::~call_scope() {
  if (owner_ == nullptr) return;
  owner_->asked_ = nullptr;
  if (owner_->recorder_) {
    owner_->recorder_->end(owner_->step_, owner_->bytes_sent_,
                           std::uncaught_exceptions() > exceptions_);
  }
  owner_->in_call_.store(false, std::memory_order_release);
}

}  // namespace weft
