// DecodeGraphs: capture and replay of decoder steps (decode_graphs.h).
#include "whisper/decode_graphs.h"

#include "engine/env.h"
#include "engine/error.h"

namespace parley::whisper {

RowsInput::RowsInput(const Tensor& buffer, int64_t b, int rule_width)
    : tokens(buffer.slice0(0, b)),
      slots(buffer.slice0(b, 2 * b)),
      cache_rows(buffer.slice0(2 * b, 3 * b)),
      rules(buffer.slice0(3 * b, size(b, rule_width)).reshape({b, rule_width})) {}

DecodeGraphs::DecodeGraphs(int n_text_ctx, int rule_width)
    : input_(Tensor::zeros({1 + rule_width}, DType::i32, Device::cuda)),
      rule_width_(rule_width),
      generation_(cuda::scratch_generation()) {
  for (auto& of_kind : entries_) of_kind.resize(size_t(n_text_ctx));
}

Tensor DecodeGraphs::rules() const {
  return input_.slice0(1, 1 + rule_width_).reshape({1, rule_width_});
}

bool DecodeGraphs::enabled() { return env_switch_on("PARLEY_CUDA_GRAPHS"); }

void DecodeGraphs::drop_if_stale() {
  const uint64_t g = cuda::scratch_generation();
  if (g == generation_) return;
  // Entries are reset, not erased: a caller may hold a reference to one.
  for (auto& of_kind : entries_)
    for (Entry& e : of_kind) e = Entry{};
  for (auto& [key, e] : rows_) e = Entry{};
  generation_ = g;
}

const std::vector<Tensor>& DecodeGraphs::step(int offset, Kind kind,
                                              const std::function<std::vector<Tensor>()>& forward) {
  std::vector<Entry>& entries = entries_[size_t(kind)];
  check(offset >= 0 && size_t(offset) < entries.size(), ErrorKind::internal,
        "[whisper] decode graph offset out of range");
  return replay_or_capture(entries[size_t(offset)], forward, nullptr, true);
}

void DecodeGraphs::reserve_rows(int capacity) {
  rows_.clear();
  rows_input_ = Tensor::zeros({RowsInput::size(capacity, rule_width_)}, DType::i32, Device::cuda);
}

const std::vector<Tensor>& DecodeGraphs::rows_step(
    const RowsKey& key, const std::function<std::vector<Tensor>()>& forward) {
  check(RowsInput::size(key.rows, rule_width_) <= rows_input_.numel(), ErrorKind::internal,
        "[whisper] rows graph: more rows than reserve_rows made room for");
  // Host-driven rows steps: plain launches (with programmatic ones such a step measured 11-12
  // us slower on the H200). A chained beam step: programmatic launches, as a greedy step's
  // (0.373 -> 0.330 ms a 5-beam turbo step, bench/RESULTS.md).
  return replay_or_capture(rows_[key], forward,
                           key.chain ? nullptr : &rows_outputs_[{key.rows, key.k}], key.chain);
}

const std::vector<Tensor>& DecodeGraphs::replay_or_capture(
    Entry& e, const std::function<std::vector<Tensor>()>& forward, std::vector<Tensor>* shared,
    bool programmatic) {
  drop_if_stale();
  if (e.graph) {
    cuda::launch(*e.graph);
    return e.outputs;
  }
  // An eager run first grows whatever this step needs (pool blocks, scratch, cuBLAS
  // plans, the shared outputs), so the capture allocates nothing; its result is dropped
  // (its blocks serve the capture) and the fresh graph computes the step again (it rewrites
  // the same K/V cache rows).
  {
    warming_ = true;
    std::vector<Tensor> eager;
    try {
      eager = forward();
    } catch (...) {
      warming_ = false;
      throw;
    }
    warming_ = false;
    if (shared && shared->empty())
      for (const Tensor& t : eager)
        shared->push_back(Tensor::empty(t.shape(), t.dtype(), t.device()));
  }
  drop_if_stale();
  cuda::begin_capture(programmatic);
  std::vector<Tensor> captured;
  try {
    captured = forward();
    if (shared)
      for (size_t i = 0; i < captured.size(); ++i) (*shared)[i].copy_from(captured[i]);
  } catch (...) {
    cuda::abort_capture();
    throw;
  }
  e.graph = cuda::end_capture();
  e.outputs = shared ? *shared : std::move(captured);
  cuda::launch(*e.graph);
  return e.outputs;
}

}  // namespace parley::whisper
