// pipeline_parallel.hpp — pipeline parallelism: the layers are cut into stages, one a rank, and
// a step's batch into micro-batches handed from stage to stage (GPipe's schedule: every
// micro-batch forward, then every one backward).
//
// The traffic is small and point to point (one micro-batch's activation, tokens x h, to the
// next stage; its gradient back), so stages can sit across a slower link; the cost is the
// bubble: the first stage waits for the last before its backward pass can start, and with p
// stages and m micro-batches a fraction (p - 1) / (m + p - 1) of the step is idle.
#pragma once

#include "step.hpp"

#include <cstddef>

namespace parallelism {

// What a step took on this rank: the whole, and the time it computed.
struct pipeline_times {
  double step = 0;
  double busy = 0;
};

// One step over the stages of `comm` (rank i is stage i). Real ranks add stage + 1 to every
// element forward and check what reaches the last stage; returns false if it is wrong.
template <class T, class Comm>
bool pipeline_parallel_step(Comm& comm, const shape& s, pipeline_times* times = nullptr) {
  const int stage = comm.rank(), stages = comm.size();
  const std::size_t count = s.tokens * s.hidden;
  // a stage's share of the layers: 2 GEMMs of h x 4h a layer, 2 FLOPs a multiply-add
  const double forward_flops = 2.0 * 2.0 * static_cast<double>(s.tokens) *
                               static_cast<double>(s.hidden) * 4.0 * static_cast<double>(s.hidden) *
                               s.layers / stages;
  auto activation = make_buffer<T>(comm, count);
  bool right = true;
  double busy = 0;
  double start = 0;
  if constexpr (simulated<Comm>) start = comm.underlying_transport().now();
  for (int m = 0; m < s.micro_batches; ++m) {  // forward
    if (stage > 0) {
      weft::recv(comm, activation.span(), stage - 1, m);
    } else if constexpr (!simulated<Comm>) {
      for (std::size_t i = 0; i < count; ++i)
        activation.values()[i] = static_cast<T>(m + static_cast<int>(i % 3));
    }
    compute(comm, forward_flops, s);
    busy += forward_flops;
    if constexpr (!simulated<Comm>) {
      for (auto& x : activation.values()) x = static_cast<T>(x + static_cast<T>(stage + 1));
    }
    if (stage + 1 < stages) {
      weft::send(comm, std::span<const T>(activation.span()), stage + 1, m);
    } else if constexpr (!simulated<Comm>) {
      const int added = stages * (stages + 1) / 2;
      for (std::size_t i = 0; i < count; ++i) {
        right =
            right && activation.values()[i] == static_cast<T>(m + static_cast<int>(i % 3) + added);
      }
    }
  }
  for (int m = 0; m < s.micro_batches; ++m) {  // backward: the gradients go the other way
    if (stage + 1 < stages) weft::recv(comm, activation.span(), stage + 1, s.micro_batches + m);
    compute(comm, 2 * forward_flops, s);
    busy += 2 * forward_flops;
    if (stage > 0)
      weft::send(comm, std::span<const T>(activation.span()), stage - 1, s.micro_batches + m);
  }
  if constexpr (simulated<Comm>) {
    if (times != nullptr)
      *times = {comm.underlying_transport().now() - start, busy / (s.tflops * 1e12)};
  }
  return right;
}

}  // namespace parallelism
