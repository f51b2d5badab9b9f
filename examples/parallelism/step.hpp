// step.hpp — what the parallelism examples share: a model's shape, buffers that are real on
// the in-process transport and phantom on the simulator, and compute that is real arithmetic
// on one and virtual time on the other. Each strategy (data_parallel.hpp, tensor_parallel.hpp,
// pipeline_parallel.hpp, expert_parallel.hpp, hybrid.hpp) is written once over the
// communicator and runs on both.
#pragma once

#include <weft/transport/sim.hpp>
#include <weft/weft.hpp>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace parallelism {

// A transformer-like model, as far as its traffic goes.
struct shape {
  std::size_t tokens = 4096;         // tokens of one micro-batch (sequence x batch)
  std::size_t hidden = 8192;         // the model's width h
  int layers = 4;                    // MLP blocks (each: h -> 4h -> h)
  int micro_batches = 16;            // pipeline parallel: micro-batches a step
  std::size_t parameters = 1 << 30;  // data parallel: the model's parameters
  std::size_t bucket = 25 << 20;     // data parallel: gradient bytes a bucket (DDP's 25 MiB)
  int experts_per_rank = 2;          // expert parallel
  double skew = 1.2;                 // expert parallel: the router's Zipf exponent (0: uniform)
  double tflops = 500;               // a GPU's sustained dense TFLOP/s (simulator only)
};

template <class Comm>
inline constexpr bool simulated =
    std::is_same_v<typename Comm::transport_type, weft::sim::transport>;

// `count` elements: phantom on the simulator (address space only), real memory elsewhere.
template <class T>
class buffer {
 public:
  buffer(bool phantom, std::size_t count) {
    if (phantom) {
      phantom_ = std::make_unique<weft::sim::phantom<T>>(count);
    } else {
      real_.assign(count, T{});
    }
  }
  std::span<T> span() { return phantom_ ? phantom_->span() : std::span<T>(real_); }
  std::vector<T>& values() { return real_; }  // real buffers only

 private:
  std::vector<T> real_;
  std::unique_ptr<weft::sim::phantom<T>> phantom_;  // on the simulator
};

template <class T, class Comm>
buffer<T> make_buffer(Comm&, std::size_t count) {
  return buffer<T>(simulated<Comm>, count);
}

// `flops` of a GPU's work: virtual time on the simulator; on real ranks the caller computes.
template <class Comm>
void compute(Comm& comm, double flops, const shape& s) {
  if constexpr (simulated<Comm>) comm.underlying_transport().compute(flops / (s.tflops * 1e12));
}

}  // namespace parallelism
