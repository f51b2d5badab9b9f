// weft/detail/engine_facade.hpp — what the facades of the tcp, libfabric and shared-memory
// transports share: a movable handle on the engine that owns the connections (closed in order
// when the handle goes, or retired while requests still hold it: request_handle.hpp), and the
// calls of weft::transport forwarded to it. A facade derives from it and adds its own: its
// memory space, describe(), and what only its engine can say.
//
// The engine offers operation_type, rank(), size(), post_send(peer, data, tag),
// post_recv(peer, data, tag), wait(op, deadline), test(op), poll() (moves what can move, throws
// peer_lost once a rank is known lost) and report_lost(culprit, reason); where it keeps messages
// that came before their receive, early_messages(found) too.
#pragma once

#include "weft/call.hpp"
#include "weft/detail/request_handle.hpp"
#include "weft/transport.hpp"

#include <cstddef>
#include <span>
#include <string_view>

namespace weft::detail {

template <class Engine>
class engine_facade {
 public:
  using operation_type = typename Engine::operation_type;
  // Cancels its operation when dropped before it completed.
  using request = request_handle<Engine, operation_type>;

  int rank() const { return engine_->rank(); }
  int size() const { return engine_->size(); }

  request send(int peer, std::span<const std::byte> data, tag_t tag) {
    return {engine_->post_send(peer, data, tag), engine_.get()};
  }
  request recv(int peer, std::span<std::byte> data, tag_t tag) {
    return {engine_->post_recv(peer, data, tag), engine_.get()};
  }
  bool wait(request& operation, deadline_clock::time_point deadline) {
    return engine_->wait(operation.operation(), deadline);
  }
  bool test(request& operation) { return engine_->test(operation.operation()); }

  // Moves what can move without blocking; throws peer_lost once this rank knows a rank is lost
  // (what a second transport's waits call: weft::tiered).
  void progress() { engine_->poll(); }

  // Messages that arrived before their receive (weft::early_message_transport), where the
  // engine keeps them where it can list them.
  std::size_t early_messages(std::span<early_message> found) const requires
      requires(const Engine& e, std::span<early_message> f) {
    e.early_messages(f);
  }
  { return engine_->early_messages(found); }

  // Called by the communicator when one of its waits fails: every rank hears that `culprit`
  // failed, and their pending and later waits throw peer_lost naming it.
  void abort(int culprit, std::string_view reason) {
    if (engine_) engine_->report_lost(culprit, reason);
  }

 protected:
  explicit engine_facade(Engine* engine) : engine_(engine) {}
  Engine& engine() { return *engine_; }
  const Engine& engine() const { return *engine_; }

 private:
  engine_ptr<Engine> engine_;
};

}  // namespace weft::detail
