// A transport wrapper for the examples: it forwards everything to the wrapped transport and
// records every send (peer, bytes) so an example can print who talked to whom, step by step.
#pragma once

#include <weft/transport.hpp>
#include <weft/transport/inproc.hpp>
#include <weft/weft.hpp>

#include <mutex>
#include <vector>

namespace example {

struct event {
  int rank;
  int peer;
  std::size_t bytes;
};

class journal {
 public:
  void add(const event& what) {
    std::lock_guard lock(mutex_);
    events_.push_back(what);
  }
  // The sends of `rank`, in the order it posted them.
  std::vector<event> sends_of(int rank) const {
    std::lock_guard lock(mutex_);
    std::vector<event> result;
    for (const auto& item : events_) {
      if (item.rank == rank) result.push_back(item);
    }
    return result;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<event> events_;
};

template <class Inner>
class tracing {
 public:
  using request = typename Inner::request;
  static constexpr std::string_view tuning_key = "inproc";

  tracing(Inner inner, journal& log) : inner_(std::move(inner)), log_(&log) {}

  int rank() const { return inner_.rank(); }
  int size() const { return inner_.size(); }
  auto& memory() { return inner_.memory(); }
  request send(int peer, std::span<const std::byte> data, weft::tag_t tag) {
    log_->add({inner_.rank(), peer, data.size()});
    return inner_.send(peer, data, tag);
  }
  request recv(int peer, std::span<std::byte> data, weft::tag_t tag) {
    return inner_.recv(peer, data, tag);
  }
  bool wait(request& operation, weft::deadline_clock::time_point deadline) {
    return inner_.wait(operation, deadline);
  }
  bool test(request& operation) { return inner_.test(operation); }

 private:
  Inner inner_;
  journal* log_;
};

// Runs fn(comm) on `ranks` threads, each over a tracing transport writing to `log`.
template <class Function>
void run_traced(int ranks, journal& log, Function fn) {
  weft::inproc::run(ranks, [&](weft::inproc::transport& endpoint) {
    tracing<weft::inproc::transport> traced(endpoint, log);
    weft::communicator<tracing<weft::inproc::transport>> comm(traced);
    fn(comm);
  });
}

}  // namespace example
