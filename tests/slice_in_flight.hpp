// The collective slice (collective_cases.hpp) as calls in flight, for every transport's tests:
// `calls` slices at once on one communicator, each a weft::start over its share of the counts,
// so that several calls' messages cross the transport interleaved, each in its own tag space.
#pragma once

#include "collective_cases.hpp"

#include <weft/nonblocking.hpp>

#include <span>
#include <vector>

namespace weft_test {

template <class Comm>
void collective_slice_in_flight(Comm& comm, failures& sink, std::span<const std::size_t> counts,
                                int calls = 3) {
  std::vector<std::vector<std::size_t>> shares(static_cast<std::size_t>(calls));
  for (std::size_t i = 0; i < counts.size(); ++i) shares[i % shares.size()].push_back(counts[i]);
  std::vector<weft::request<typename Comm::transport_type>> in_flight;
  for (const auto& share : shares) {
    in_flight.push_back(weft::start(comm, "a slice", [&sink, &share](Comm& lane) {
      collective_slice(lane, sink, std::span<const std::size_t>(share));
      return lane.finish();
    }));
  }
  for (auto& call : in_flight) call.wait();
}

}  // namespace weft_test
