// CUDA graphs of single-token decoder steps (WhisperSession::decode on CUDA). A step queues
// about 13 small kernels per layer; launching them one by one costs more host time than
// they take on the GPU. The first step at a cache offset runs eagerly (which also warms
// the pools, cuBLAS plans and scratch it needs), then the same work is captured into a
// graph; every later step at that offset, in any window, replays the graph with one launch.
//
// Why replay is safe: a step's shapes and pointers depend only on its offset. Weights, KV
// caches, cross-attention K/V and the token buffer below never move; the step's scratch
// tensors come from the session's Pool, whose blocks are never returned to the system
// while the session lives, and all work is ordered on one stream, so a replay may reuse
// blocks that other work used in between. Graphs are dropped when the engine's scratch
// buffer moves (cuda::scratch_generation()). PARLEY_CUDA_GRAPHS=0 turns them off.
// Limit: the backend has one stream for the process, and a capture records whatever any
// thread queues on it meanwhile; CUDA sessions in several threads must not decode at the
// same time with graphs on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"

namespace parley::whisper {

class DecodeGraphs {
 public:
  explicit DecodeGraphs(int n_text_ctx);
  // Whether graphs are on for new sessions (the PARLEY_CUDA_GRAPHS environment variable).
  static bool enabled();

  // i32 [1] on the device: the token id a single-token step reads (the graph's input).
  Tensor& token() { return token_; }
  // The f32 logits [1, n_vocab] of the step at `offset` (device memory, valid until the
  // next step): replays its graph, or runs `forward` and captures it for next time.
  Tensor step(int offset, const std::function<Tensor()>& forward);

 private:
  struct Entry {
    std::shared_ptr<cuda::Graph> graph;
    Tensor logits;  // the captured step's output buffer
  };
  Tensor token_;
  std::vector<Entry> entries_;  // by offset
  uint64_t generation_ = 0;
};

}  // namespace parley::whisper
