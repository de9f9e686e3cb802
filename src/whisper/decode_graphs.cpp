// DecodeGraphs: capture and replay of single-token decoder steps (decode_graphs.h).
#include "whisper/decode_graphs.h"

#include <cstdlib>
#include <cstring>

#include "engine/error.h"

namespace parley::whisper {

DecodeGraphs::DecodeGraphs(int n_text_ctx, int rule_width)
    : input_(Tensor::zeros({1 + rule_width}, DType::i32, Device::cuda)),
      rule_width_(rule_width),
      generation_(cuda::scratch_generation()) {
  for (auto& of_kind : entries_) of_kind.resize(size_t(n_text_ctx));
}

Tensor DecodeGraphs::rules() const {
  return input_.slice0(1, 1 + rule_width_).reshape({1, rule_width_});
}

bool DecodeGraphs::enabled() {
  const char* v = std::getenv("PARLEY_CUDA_GRAPHS");
  return !(v && std::strcmp(v, "0") == 0);
}

const std::vector<Tensor>& DecodeGraphs::step(int offset, Kind kind,
                                              const std::function<std::vector<Tensor>()>& forward) {
  std::vector<Entry>& entries = entries_[size_t(kind)];
  check(offset >= 0 && size_t(offset) < entries.size(), ErrorKind::internal,
        "[whisper] decode graph offset out of range");
  auto drop_if_stale = [this] {
    const uint64_t g = cuda::scratch_generation();
    if (g == generation_) return;
    for (auto& of_kind : entries_)
      for (Entry& e : of_kind) e = Entry{};
    generation_ = g;
  };
  drop_if_stale();
  Entry& e = entries[size_t(offset)];
  if (e.graph) {
    cuda::launch(*e.graph);
    return e.outputs;
  }
  // An eager run first grows whatever this step needs (pool blocks, scratch, cuBLAS
  // plans), so the capture allocates nothing; its result is dropped and the fresh graph
  // computes the step again (it rewrites the same K/V cache rows).
  forward();
  drop_if_stale();
  cuda::begin_capture();
  std::vector<Tensor> captured;
  try {
    captured = forward();
  } catch (...) {
    cuda::abort_capture();
    throw;
  }
  e.graph = cuda::end_capture();
  e.outputs = std::move(captured);
  cuda::launch(*e.graph);
  return e.outputs;
}

}  // namespace parley::whisper
