// Tensor parallel x pipeline parallel: 8 ranks as TP=4 x PP=2.
//
// Ranks 0-3 hold pipeline stage 0 and ranks 4-7 stage 1. Within a stage, the 4 tensor-parallel
// ranks allreduce their partial activations (a split by color = stage). Across stages, rank i
// of stage 0 sends its activations to rank i of stage 1 (a split by color = tensor index).
// Both groups are communicators over the same transport, with their own tag spaces.
#include <weft/transport/inproc.hpp>
#include <weft/weft.hpp>

#include <atomic>
#include <cstdio>
#include <vector>

int main() {
  constexpr int tensor_parallel = 4;
  constexpr int pipeline_parallel = 2;
  std::atomic<bool> correct = true;  // every rank's thread writes it
  weft::inproc::run(
      tensor_parallel * pipeline_parallel, [&](weft::communicator<weft::inproc::transport>& world) {
        const int stage = world.rank() / tensor_parallel;
        const int shard = world.rank() % tensor_parallel;
        auto tensor = world.split(stage, shard);    // the 4 ranks of one stage
        auto pipeline = world.split(shard, stage);  // the 2 ranks holding the same shard

        std::vector<float> activations(1024, static_cast<float>(shard + 1));  // partial sums
        weft::allreduce(tensor, std::span<float>(activations), weft::sum{});  // 1+2+3+4 = 10
        if (activations[0] != 10.0f) correct = false;

        if (stage == 0) {
          weft::send(pipeline, std::span<const float>(activations), /*peer=*/1, /*tag=*/0);
        } else {
          std::vector<float> incoming(1024);
          weft::recv(pipeline, std::span<float>(incoming), /*peer=*/0, /*tag=*/0);
          if (incoming[1023] != 10.0f) correct = false;
        }
        if (world.rank() == 0) {
          std::printf("world rank %d: stage %d, tensor rank %d of %d, pipeline rank %d of %d\n",
                      world.rank(), stage, tensor.rank(), tensor.size(), pipeline.rank(),
                      pipeline.size());
        }
      });
  std::printf("TP=%d x PP=%d: tensor allreduce and stage-to-stage send %s\n", tensor_parallel,
              pipeline_parallel, correct ? "correct" : "WRONG");
  return correct ? 0 : 1;
}
