// hybrid.hpp — a hybrid: tensor parallel 4 x pipeline parallel 2 on the 8 GPUs of a
// node, and data parallel across nodes (the "3D" layout large models train with).
//
// Ranks 0-3 of a node are pipeline stage 0 and ranks 4-7 stage 1; within a stage the 4 ranks
// split every layer (tensor parallel: two allreduces a layer, kept inside the node's NVLink);
// stage 0's rank i hands its micro-batches to stage 1's rank i (pipeline: point to point, also
// inside the node); and each rank's gradients are averaged with the ranks holding the same
// slice on every other node (data parallel: the only traffic that leaves the node).
#pragma once

#include "data_parallel.hpp"
#include "step.hpp"
#include "tensor_parallel.hpp"

#include <cstddef>

namespace parallelism {

inline constexpr int hybrid_tensor = 4;
inline constexpr int hybrid_pipeline = 2;

// One step on `world` (8 ranks a node, nodes = world.size() / 8). Real ranks check the tensor
// groups' layer outputs and the averaged gradients; returns false if one is wrong.
template <class T, class Comm>
bool hybrid_step(Comm& world, const shape& s) {
  constexpr int per_node = hybrid_tensor * hybrid_pipeline;
  const int node = world.rank() / per_node, local = world.rank() % per_node;
  const int stage = local / hybrid_tensor, shard = local % hybrid_tensor;
  auto tensor = world.split(node * hybrid_pipeline + stage, shard);  // the 4 ranks of a stage
  auto pipeline = world.split(node * hybrid_tensor + shard, stage);  // the 2 stages of a shard
  auto data = world.split(local, node);                              // the same slice on every node
  shape stage_shape = s;
  stage_shape.layers = s.layers / hybrid_pipeline;  // each stage holds half the layers
  bool right = true;
  auto activation = make_buffer<T>(world, s.tokens * s.hidden);
  // Each micro-batch: stage 0 runs its layers and hands the activation on; stage 1 runs its
  // layers and hands the gradient back (the tensor-parallel step does each stage's forward and
  // backward; the pipeline is kept in lockstep, without GPipe's overlap of micro-batches).
  for (int m = 0; m < s.micro_batches; ++m) {
    if (stage == 1) weft::recv(pipeline, activation.span(), 0, m);
    right = tensor_parallel_step<T>(tensor, stage_shape) && right;
    if (stage == 0) {
      weft::send(pipeline, std::span<const T>(activation.span()), 1, m);
      weft::recv(pipeline, activation.span(), 1, s.micro_batches + m);
    } else {
      weft::send(pipeline, std::span<const T>(activation.span()), 0, s.micro_batches + m);
    }
  }
  // this rank's slice of the parameters: 1 / (tensor x pipeline) of the model
  shape gradients = s;
  gradients.parameters = s.parameters / per_node;
  gradients.tokens = 0;  // the backward compute was charged by the tensor-parallel steps
  right = data_parallel_step<T>(data, gradients) && right;
  return right;
}

}  // namespace parallelism
