// tensor_parallel.hpp — tensor parallelism (Megatron-LM's MLP block): every rank holds a slice
// of every layer's weights and all ranks work on the same tokens.
//
// The first GEMM's weight (h x 4h) is split by columns, so each rank computes its 4h/t columns
// of the hidden activation and applies the activation function alone; the second GEMM's
// weight (4h x h) is split by rows, so each rank's product is a partial sum of the layer's
// output, and one allreduce (sum) of tokens x h completes it. The backward pass does the same
// allreduce for the input's gradient. Two allreduces of the full activation a layer, on the
// critical path, between ranks that must be close: this is the traffic that wants the NVLink
// domain.
#pragma once

#include "step.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>
#include <vector>

namespace parallelism {

namespace detail {

// The layer's weights, the same on every rank (a small deterministic pattern).
inline float first_weight(std::size_t row, std::size_t column) {
  return static_cast<float>((row * 7 + column * 3) % 11) / 11.0f - 0.4f;
}
inline float second_weight(std::size_t row, std::size_t column) {
  return static_cast<float>((row * 5 + column * 2) % 13) / 13.0f - 0.45f;
}

// out (tokens x h) = relu(in . W1[:, columns]) . W2[columns, :], for the hidden columns
// [first, first + width): one rank's partial sum.
inline void mlp_slice(const std::vector<float>& in, std::vector<float>& out, std::size_t tokens,
                      std::size_t h, std::size_t first, std::size_t width) {
  std::fill(out.begin(), out.end(), 0.0f);
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t c = first; c < first + width; ++c) {
      float hidden = 0;
      for (std::size_t k = 0; k < h; ++k) hidden += in[t * h + k] * first_weight(k, c);
      hidden = std::max(hidden, 0.0f);
      for (std::size_t j = 0; j < h; ++j) out[t * h + j] += hidden * second_weight(c, j);
    }
  }
}

}  // namespace detail

// One step of `s.layers` MLP blocks, forward and backward, over the ranks of `comm` (the
// tensor-parallel group). Real ranks check the forward output against the whole layer
// computed by one rank; returns false if it differs.
template <class T, class Comm>
bool tensor_parallel_step(Comm& comm, const shape& s) {
  static_assert(simulated<Comm> || std::is_same_v<T, float>,
                "real ranks compute the layer in float");
  const std::size_t t = static_cast<std::size_t>(comm.size());
  const std::size_t width = 4 * s.hidden / t;  // this rank's hidden columns
  const double gemm_flops = 2.0 * static_cast<double>(s.tokens) * static_cast<double>(s.hidden) *
                            static_cast<double>(width);
  auto activations = make_buffer<T>(comm, s.tokens * s.hidden);
  bool right = true;
  std::vector<float> input, whole;
  if constexpr (!simulated<Comm>) {
    input.resize(s.tokens * s.hidden);
    for (std::size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(i % 5) / 5.0f;
  }
  for (int layer = 0; layer < s.layers; ++layer) {  // forward
    compute(comm, 2 * gemm_flops, s);
    if constexpr (!simulated<Comm>) {
      detail::mlp_slice(input, activations.values(), s.tokens, s.hidden,
                        static_cast<std::size_t>(comm.rank()) * width, width);
    }
    weft::allreduce(comm, activations.span(), weft::sum{});
    if constexpr (!simulated<Comm>) {
      whole.resize(input.size());
      detail::mlp_slice(input, whole, s.tokens, s.hidden, 0, 4 * s.hidden);
      for (std::size_t i = 0; i < whole.size(); ++i) {
        right = right &&
                std::abs(activations.values()[i] - whole[i]) <= 1e-3f * (1.0f + std::abs(whole[i]));
      }
      input = whole;
    }
  }
  for (int layer = 0; layer < s.layers; ++layer) {  // backward: twice the GEMMs, one allreduce
    compute(comm, 4 * gemm_flops, s);
    weft::allreduce(comm, activations.span(), weft::sum{});
  }
  return right;
}

}  // namespace parallelism
