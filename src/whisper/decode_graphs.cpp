// DecodeGraphs: capture and replay of single-token decoder steps (decode_graphs.h).
#include "whisper/decode_graphs.h"

#include <cstdlib>
#include <cstring>

#include "engine/error.h"

namespace parley::whisper {

DecodeGraphs::DecodeGraphs(int n_text_ctx)
    : token_(Tensor::zeros({1}, DType::i32, Device::cuda)),
      entries_(size_t(n_text_ctx)),
      generation_(cuda::scratch_generation()) {}

bool DecodeGraphs::enabled() {
  const char* v = std::getenv("PARLEY_CUDA_GRAPHS");
  return !(v && std::strcmp(v, "0") == 0);
}

Tensor DecodeGraphs::step(int offset, const std::function<Tensor()>& forward) {
  check(offset >= 0 && size_t(offset) < entries_.size(), ErrorKind::internal,
        "[whisper] decode graph offset out of range");
  auto drop_if_stale = [this] {
    const uint64_t g = cuda::scratch_generation();
    if (g == generation_) return;
    for (Entry& e : entries_) e = Entry{};
    generation_ = g;
  };
  drop_if_stale();
  Entry& e = entries_[size_t(offset)];
  if (e.graph) {
    cuda::launch(*e.graph);
    return e.logits;
  }
  // An eager run first grows whatever this step needs (pool blocks, scratch, cuBLAS
  // plans), so the capture allocates nothing; its result is dropped and the fresh graph
  // computes the step again (it rewrites the same K/V cache rows).
  forward();
  drop_if_stale();
  cuda::begin_capture();
  Tensor captured;
  try {
    captured = forward();
  } catch (...) {
    cuda::abort_capture();
    throw;
  }
  e.graph = cuda::end_capture();
  e.logits = captured;
  cuda::launch(*e.graph);
  return e.logits;
}

}  // namespace parley::whisper
