// CUDA graphs of single-token decoder steps (WhisperSession::decode on CUDA). A step queues
// about 13 small kernels per layer; launching them one by one costs more host time than
// they take on the GPU. The first step at a cache offset runs eagerly (which also warms
// the pools, cuBLAS plans and scratch it needs), then the same work is captured into a
// graph; every later step at that offset, in any window, replays the graph with one launch.
// Two kinds of step have graphs of their own: one that returns the logits, and one that also
// makes the token choice on the device (masked_topk with k = 1, WhisperSession::decode_choose),
// whose only inputs are the token and its rule row, uploaded together; its suppress mask
// lives in one session buffer that a new set of ids overwrites in place (encoder.h
// SuppressMask), so the graphs that read it stay valid. A third kind is a chained greedy step
// (WhisperSession::chain_launch): its token and rule row are in session buffers the previous
// step wrote, so it has no upload; it writes its inputs and outputs in other buffers than the
// ones it reads (by offset parity), so running it twice (eagerly, then as the captured graph)
// gives the same result.
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
  DecodeGraphs(int n_text_ctx, int rule_width);
  // Whether graphs are on for new sessions (the PARLEY_CUDA_GRAPHS environment variable).
  static bool enabled();

  // i32 [1 + rule_width] on the device: the token id a single-token step reads, then the rule
  // row of its token choice (the graphs' inputs; one upload).
  Tensor& input() { return input_; }
  Tensor token() const { return input_.slice0(0, 1); }  // i32 [1]
  Tensor rules() const;                                 // i32 [1, rule_width]

  enum class Kind { logits, choice, chain };
  // The outputs of the step at `offset` (device memory, valid until the next step of that
  // kind): replays its graph, or runs `forward` and captures it for next time.
  const std::vector<Tensor>& step(int offset, Kind kind,
                                  const std::function<std::vector<Tensor>()>& forward);

 private:
  struct Entry {
    std::shared_ptr<cuda::Graph> graph;
    std::vector<Tensor> outputs;  // the captured step's output buffers
  };
  Tensor input_;
  int rule_width_ = 0;
  std::vector<Entry> entries_[3];  // by kind, then offset
  uint64_t generation_ = 0;
};

}  // namespace parley::whisper
