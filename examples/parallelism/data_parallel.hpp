// data_parallel.hpp — data parallelism: every rank holds the whole model and a share of the
// batch; after the backward pass the gradients are averaged across the ranks.
//
// As PyTorch's DistributedDataParallel does it: the gradients are cut into buckets (25 MiB),
// and each bucket is allreduced (avg) once the backward pass has produced it. The traffic is
// the whole model's gradients every step, allreduced across every rank: across nodes, it is
// the scale-out network's load. (Overlapping a bucket's allreduce with the next bucket's
// backward pass is examples/overlapped_buckets.cpp, with weft::iallreduce; the simulator does not
// model computation overlapped with calls in flight, so here they follow each other.)
#pragma once

#include "step.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace parallelism {

// One step's backward pass and gradient averaging. Returns false if a real rank's averaged
// gradients are wrong.
template <class T, class Comm>
bool data_parallel_step(Comm& comm, const shape& s) {
  const std::size_t per_bucket = std::max<std::size_t>(1, s.bucket / sizeof(T));
  const std::size_t buckets = (s.parameters + per_bucket - 1) / per_bucket;
  // forward and backward: 6 FLOPs a parameter a token (2 forward, 4 backward)
  const double flops_per_bucket =
      6.0 * static_cast<double>(s.tokens) * static_cast<double>(per_bucket);
  auto gradients = make_buffer<T>(comm, per_bucket);
  bool right = true;
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::size_t count = std::min(per_bucket, s.parameters - b * per_bucket);
    compute(comm, flops_per_bucket, s);
    if constexpr (!simulated<Comm>) {  // this rank's gradient of parameter i: rank + i % 7
      for (std::size_t i = 0; i < count; ++i)
        gradients.values()[i] = static_cast<T>(comm.rank() + static_cast<int>(i % 7));
    }
    weft::allreduce(comm, gradients.span().first(count), weft::avg{});
    if constexpr (!simulated<Comm>) {
      const double mean_rank = (comm.size() - 1) / 2.0;
      for (std::size_t i = 0; i < count; ++i) {
        right = right && std::abs(static_cast<double>(gradients.values()[i]) -
                                  (mean_rank + static_cast<double>(i % 7))) < 1e-4;
      }
    }
  }
  return right;
}

}  // namespace parallelism
