// WhisperBatchSession: up to n_slots independent sequences ("slots") over one shared
// WhisperModel, each with its own audio (cross-attention K/V) and its own self-attention KV
// cache, decoded together: one encoder call for a batch of windows, one decoder pass per step
// for one new token of every listed slot, each at its own position (batched transcription,
// transcribe_batch.h). WhisperSession's fork/decode_rows are the other kind of batch: rows
// that share one audio (beam search).
//
// Layout (per decoder layer, on the model's device, in its dtype):
//   self_k, self_v [S, H, n_text_ctx, d_head]  head-major, so a step attends over any of
//                                              its slots with no copy of the cache;
//   cross_kv       [2, S, H, n_audio_ctx, d_head]
//   audio_len      i32 [S]: the audio positions a slot's window encoded (n_audio_ctx, or
//                  the first N of a short window: encode's n_ctx).
// A step runs each of its attentions as one call over every listed slot, in any order
// (AttentionOptions::batch_index: row r reads its slot's caches): the self-attention's
// key_len is the row's cached positions and its own (a slot's cached tokens are always a
// prefix), the cross-attention's the slot's audio_len, so a short window's keys past N
// are never read.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/pool.h"
#include "engine/step_graphs.h"
#include "engine/tensor.h"

namespace parley {

class WhisperModel;
namespace whisper {
class SuppressMask;  // encoder.h
}

class WhisperBatchSession {
 public:
  // Allocates every slot's caches at once; n_slots >= 1.
  WhisperBatchSession(std::shared_ptr<const WhisperModel> model, int n_slots);

  int n_slots() const { return n_slots_; }
  const WhisperModel& model() const { return *model_; }

  // mels: f32 (any float) [n, n_mels, >= 2 * n_audio_ctx] on the CPU or the model's device, one
  // window per listed slot (distinct ids in [0, n_slots)). One encoder call for all of them;
  // each slot gets its window's cross-attention K/V and drops its cached tokens.
  // n_ctx in [1, n_audio_ctx]: encode each window's first n_ctx positions only (its first
  // 2 * n_ctx mel frames: a short window, whisper.cpp's audio_ctx per window), and let
  // these slots' decoder steps attend to those n_ctx positions; 0: all n_audio_ctx.
  void encode(std::span<const int32_t> slots, const Tensor& mels, int64_t n_ctx = 0);
  // The audio positions the slot's window was encoded over (0 before its first encode).
  int audio_ctx(int slot) const;

  // The decoder on `tokens` of one slot at positions n_cached(slot) .. + size - 1, appended to
  // its cache (a window's initial tokens). f32 logits on the CPU of the positions `rows`
  // (indices into tokens, in order; empty: all), [rows.size() or tokens.size(), n_vocab]: a
  // window needs two of its initial tokens' (no_speech_prob at <|startoftranscript|>, the first
  // token after the last), and all of them would be 207 KB per token to the host.
  Tensor prefill(int slot, std::span<const int32_t> tokens, std::span<const int64_t> rows = {});

  // The initial tokens of several fresh slots (nothing cached since encode or reset), all of
  // the same length T, in one decoder pass: tokens [n * T], slot slots[i]'s at [i * T,
  // (i + 1) * T). f32 logits on the CPU of each slot's positions `rows` (as prefill; empty:
  // all T), [n * rows.size() or n * T, n_vocab], slot by slot in the same order.
  Tensor prefill_batch(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                       std::span<const int64_t> rows = {});
  // The same for sequences of different lengths: slot slots[i]'s lengths[i] tokens follow one
  // another in `tokens`; shorter ones are padded at their end to the longest, T (the pads' K/V
  // land in positions the slot has not cached: its key mask leaves them out and its later
  // steps overwrite them; the causal attention keeps them out of the real tokens). f32 logits
  // on the CPU of each slot's positions rows[i * r, (i + 1) * r) (indices into its own
  // tokens; r = rows.size() / n >= 1), [n * r, n_vocab], slot by slot.
  Tensor prefill_ragged(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                        std::span<const int32_t> lengths, std::span<const int64_t> rows);

  // One token per listed slot (distinct, encoded, each with room for one more position), each
  // at its own next position, in one decoder pass. f32 logits [n, n_vocab] on the CPU, row i
  // for slots[i].
  Tensor step(std::span<const int32_t> slots, std::span<const int32_t> tokens);
  // step() without filters, greedy: the argmax of each row's logits computed on the model's
  // device, so only n token ids cross to the host (the forced benchmark; ties: lowest id).
  // Valid until the next call.
  const std::vector<int32_t>& step_argmax(std::span<const int32_t> slots,
                                          std::span<const int32_t> tokens);

  // step() with the token choice next to the logits (WhisperSession::decode_choose's rules):
  // masked_topk of each row's logits with `always` (ids suppressed at every position) and
  // `rules` (kRuleWidth per row, logit_filters.h); ids and logprobs get each row's top k,
  // [n * k]; only those cross to the host.
  void step_choose(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                   std::span<const int32_t> always, std::span<const int32_t> rules, int k,
                   std::vector<int32_t>& ids, std::vector<float>& logprobs);

  // Drops the slot's cached tokens, keeps its audio.
  void reset(int slot);
  int n_cached(int slot) const;

 private:
  struct LayerCache {
    Tensor self_k;    // [S, H, n_text_ctx, d_head]
    Tensor self_v;    // [S, H, n_text_ctx, d_head]
    Tensor cross_kv;  // [2, S, H, n_audio_ctx, d_head]
  };
  void check_slot(int slot, const char* where) const;
  // Writes kv [T, H, d_head] (rows of `src` from `first`) at positions [pos, pos + T) of a slot.
  void write_positions(Tensor& cache, int slot, int64_t pos, const Tensor& src_heads);
  // step()'s forward pass: f32 logits [n, n_vocab] on the model's device (scratch).
  Tensor step_on_device(std::span<const int32_t> slots, std::span<const int32_t> tokens);
  // Its kernels for n rows: step_ids (on the device) as step_on_device lays them out,
  // intermediates from `pool`, the logits into `logits` [n, n_vocab]. On CUDA it is
  // captured once per n and replayed (graphs_).
  void step_body(int64_t n, const Tensor& step_ids, Pool& pool, Tensor& logits);

  std::shared_ptr<const WhisperModel> model_;
  int n_slots_ = 0;
  Pool pool_;       // scratch on the model's device
  Pool host_pool_;  // logits and ids on the CPU
  // CUDA graphs of the decoder step, one per row count, with their fixed input and output
  // buffers and the pool of their intermediates (nothing else allocates from it, so no
  // tensor that lives across a replay can share a block with the graph's intermediates).
  StepGraphs graphs_;
  Tensor graph_input_;   // i32 [S * (5 + H)] on CUDA: step_ids of up to S rows
  Tensor graph_logits_;  // f32 [S, n_vocab] on CUDA
  Pool graph_pool_;
  std::vector<LayerCache> cache_;
  std::vector<int32_t> audio_len_;  // per slot (audio_len above); 0: never encoded
  std::vector<int> n_cached_;
  // Per-step scratch, reused (no growth in the step loop).
  std::vector<int32_t> step_ids_;  // a step's (or ragged prefill's) integer inputs, uploaded once
  std::vector<int32_t> argmax_;    // step_argmax's result
  std::shared_ptr<whisper::SuppressMask> choice_mask_;  // step_choose's `always`
};

}  // namespace parley
