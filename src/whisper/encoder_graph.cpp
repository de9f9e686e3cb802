// EncoderGraph: capture and replay of a session's encoder pass (encoder_graph.h).
#include "whisper/encoder_graph.h"

#include "engine/env.h"
#include "engine/ops/elementwise.h"
#include "whisper/encoder.h"

namespace parley::whisper {

EncoderGraph::EncoderGraph(const Shape& mel_shape, DType dtype)
    : pool_(Device::cuda), mel_(Tensor::empty(mel_shape, dtype, Device::cuda)) {}

bool EncoderGraph::enabled() {
  return env_switch_on("PARLEY_ENCODER_GRAPH") && env_switch_on("PARLEY_CUDA_GRAPHS");
}

void EncoderGraph::run(const Tensor& mel, const std::function<void(Pool&, const Tensor&)>& pass) {
  if (mel.device() == mel_.device())
    convert(mel, mel_);
  else
    mel_.copy_from(mel.dtype() == mel_.dtype() ? mel : mel.cast(mel_.dtype()));
  if (graph_ && generation_ != cuda::scratch_generation()) graph_.reset();
  if (!graph_ && !failed_ && runs_++ > 0) capture(pass);
  if (!graph_) {  // the first pass, or no graph came of the capture
    pass(pool_, mel_);
    return;
  }
  cuda::launch(*graph_);
  g_encoder_graph_launches.fetch_add(1, std::memory_order_relaxed);
}

void EncoderGraph::capture(const std::function<void(Pool&, const Tensor&)>& pass) {
  generation_ = cuda::scratch_generation();
  cuda::begin_capture(true);
  try {
    pass(pool_, mel_);
    graph_ = cuda::end_capture();
  } catch (...) {
    cuda::abort_capture();
    failed_ = true;
  }
  // Failed, or the scratch moved while capturing: no graph (run() passes eagerly).
  if (failed_ || generation_ != cuda::scratch_generation()) graph_.reset();
}

}  // namespace parley::whisper
