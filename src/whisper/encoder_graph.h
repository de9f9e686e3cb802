// A CUDA graph of a session's encoder pass (WhisperSession::encode on CUDA). One window is
// about 230 launches (two convolutions, per layer two LayerNorms, four GEMMs and the flash
// kernel, then the final norm and the cross-attention K/V product). Launched one by one,
// the GPU waits between every two of them; replayed as one graph it runs them back to back,
// and the LayerNorms (launched through cuda::launch_dependent) start as programmatic
// dependents of the GEMM before them.
//
// A session's first encode runs eagerly (it warms this pool, the cuBLASLt plans and the
// scratch buffer); its second captures the pass and launches the graph; later ones replay
// it. A session that encodes once (a one-window request) never pays for a capture.
//
// Why replay is safe: the pass reads only the weights and this object's mel buffer (the
// caller's mel is converted or uploaded into it first, outside the graph), and writes the
// session's audio features and cross-attention K/V (allocated once with the session) and
// intermediates from this object's own Pool, which no other work allocates from: no block
// the graph writes can be held by anything else. The graph is dropped when the engine's
// scratch buffer moves (cuda::scratch_generation()). A capture that fails (an operation
// that cannot be captured) is discarded and the session encodes eagerly from then on.
// PARLEY_ENCODER_GRAPH=0 turns the graph off. The process-wide stream's limit holds as for
// the decoder's graphs (decode_graphs.h): CUDA sessions in several threads must not run at
// the same time with graphs on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "engine/device.h"
#include "engine/pool.h"
#include "engine/tensor.h"

namespace parley::whisper {

class EncoderGraph {
 public:
  // mel_shape: the encoder's input [1, n_mels, frames]; dtype: the model's.
  EncoderGraph(const Shape& mel_shape, DType dtype);
  // Whether graphs are on for new sessions (PARLEY_ENCODER_GRAPH, and PARLEY_CUDA_GRAPHS).
  static bool enabled();

  // Puts `mel` (mel_shape, any float dtype, any device) into the graph's input, then runs
  // pass(pool, input) on it: eagerly, captured and launched, or replayed (see above). `pass`
  // must queue device work only and allocate only from `pool`.
  void run(const Tensor& mel, const std::function<void(Pool&, const Tensor&)>& pass);

 private:
  // Captures pass(pool_, mel_) into graph_ (left empty if that fails).
  void capture(const std::function<void(Pool&, const Tensor&)>& pass);

  Pool pool_;
  Tensor mel_;
  std::shared_ptr<cuda::Graph> graph_;
  uint64_t generation_ = 0;
  int runs_ = 0;
  bool failed_ = false;  // a capture failed: eager from then on
};

}  // namespace parley::whisper
