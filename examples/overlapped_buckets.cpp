// Gradient buckets in flight, as PyTorch's DistributedDataParallel overlaps them: the backward
// pass produces the model's gradients bucket by bucket, last layer first, and each bucket's
// allreduce starts as soon as the bucket is ready, while the backward pass goes on with the
// next. The small parameters (biases, norms) go in one weft::group, whose allreduces are fused
// into one buffer. At the end every rank waits for all of them and checks the averages.
//
// Four ranks as threads (weft::inproc); each call in flight runs on a fiber of the communicator,
// moved forward by the test() calls in the backward pass (or, with WEFT_PROGRESS_THREAD=1, by a
// thread of the communicator's own).
#include <weft/group.hpp>
#include <weft/nonblocking.hpp>
#include <weft/transport/inproc.hpp>
#include <weft/weft.hpp>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <vector>

namespace {

using comm_type = weft::communicator<weft::inproc::transport>;

// A stand-in for one layer's backward pass: this rank's gradient of parameter i.
void backward(std::vector<float>& gradient, int rank, int layer) {
  for (std::size_t i = 0; i < gradient.size(); ++i) {
    gradient[i] = std::sin(static_cast<float>(i + static_cast<std::size_t>(layer))) +
                  static_cast<float>(rank);
  }
}

}  // namespace

int main() {
  constexpr int ranks = 4;
  constexpr int layers = 6;
  constexpr std::size_t bucket = 1 << 18;  // 1 MiB of floats per layer's weights
  constexpr std::size_t small = 64;        // each layer's bias
  std::atomic<bool> right{true};
  std::atomic<int> fused_calls{0};
  weft::inproc::run(ranks, [&](comm_type& comm) {
    std::vector<std::vector<float>> weights(layers, std::vector<float>(bucket));
    std::vector<std::vector<float>> biases(layers, std::vector<float>(small));
    std::vector<weft::request<weft::inproc::transport>> in_flight;
    for (int layer = layers - 1; layer >= 0; --layer) {  // backward: last layer first
      backward(weights[layer], comm.rank(), layer);
      in_flight.push_back(weft::iallreduce(comm, std::span<float>(weights[layer]), weft::avg{}));
      for (auto& call : in_flight) call.test();  // move the calls in flight along
    }
    {
      weft::group together(comm);  // the biases: one fused allreduce
      for (int layer = 0; layer < layers; ++layer) {
        backward(biases[layer], comm.rank(), layer);
        in_flight.push_back(weft::iallreduce(comm, std::span<float>(biases[layer]), weft::avg{},
                                             weft::recursive_doubling{}));
      }
    }
    for (auto& call : in_flight) call.wait();
    if (in_flight.back().fused() && comm.rank() == 0) fused_calls = in_flight.back().result().calls;
    const float mean_rank = (ranks - 1) / 2.0f;
    for (int layer = 0; layer < layers; ++layer) {
      for (std::size_t i = 0; i < bucket; i += 4099) {
        const float want =
            std::sin(static_cast<float>(i + static_cast<std::size_t>(layer))) + mean_rank;
        if (std::abs(weights[layer][i] - want) > 1e-5f) right = false;
      }
      for (std::size_t i = 0; i < small; ++i) {
        const float want =
            std::sin(static_cast<float>(i + static_cast<std::size_t>(layer))) + mean_rank;
        if (std::abs(biases[layer][i] - want) > 1e-5f) right = false;
      }
    }
  });
  std::printf(
      "%d buckets of %zu floats allreduced in flight during the backward pass; %d biases in one "
      "fused allreduce; averages %s\n",
      layers, bucket, fused_calls.load(), right ? "right on every rank" : "WRONG");
  return right && fused_calls == layers ? 0 : 1;
}
