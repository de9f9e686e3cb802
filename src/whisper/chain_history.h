// What a chain of decoder steps on the device hands the host (the greedy chain,
// decoder_chain.cpp; the beam chain, beam_chain.cpp): per cache offset a history row of
// `width` i32 values that the step's own kernels write, and, when the chain began at a
// window's initial pass, that pass's logits at <|startoftranscript|> (for the no-speech
// probability). On CUDA both are pinned host memory: kernels write the history over the bus
// (UVA: the host pointer is valid on the device), since a copy to pinned memory after each
// step cost 10 us between graph replays (11.6 -> 1.5 us on the H200, bench/RESULTS.md); an
// event recorded after each step tells the host when its row is there. On the CPU the steps
// run at once and nothing waits.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"

namespace parley::whisper {

class ChainHistory {
 public:
  ChainHistory(Device device, int n_text_ctx, int64_t width, int n_vocab);

  // The history row of the step at `offset`: i32 [width] on the device (a view the step's
  // kernels write).
  Tensor row(int64_t offset) const;
  // After the step at `offset` was queued: on CUDA the event read() and initial() wait for.
  void record(int64_t offset);
  // The row of the step at `offset` on the host, once that step has completed.
  const int32_t* read(int64_t offset);

  // A chain that begins at a window's initial pass: at_sot (f32 [1, n_vocab] on the device)
  // is copied to the host behind the pass, the step at `offset` (record() it after this).
  void keep_initial(const Tensor& at_sot, int64_t offset);
  // A chain that begins after the cached tokens has no initial pass.
  void forget_initial() { initial_ = -1; }
  int initial_offset() const { return initial_; }  // -1: none
  // The kept row (f32 [n_vocab] on the host), once its step has completed.
  std::span<const float> initial();

 private:
  Device device_;
  Tensor history_;                                  // i32 [n_text_ctx, width]
  std::vector<std::unique_ptr<cuda::Event>> done_;  // CUDA: per offset
  std::shared_ptr<float> initial_logits_;           // [n_vocab]
  size_t n_vocab_;
  int initial_ = -1;
};

}  // namespace parley::whisper
