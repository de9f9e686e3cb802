// PenaltyState: one request's token counts for the penalties of sampling/sampler.h: how
// often each token occurs in the output (presence and frequency penalties, OpenAI) and
// which tokens occur in the prompt or the output (repetition penalty, transformers/vLLM).
// Everything is sized at reset(); accept() is O(1) and never allocates, and apply() costs
// the number of distinct tokens seen, not the vocabulary.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace parley {

class PenaltyState {
 public:
  PenaltyState() = default;

  // Sizes the state for vocab_size ids and records the prompt. max_output_tokens bounds
  // the accepted tokens for the reservation (0: unknown, reserves the whole vocabulary).
  // Throws Error(invalid_argument) for a prompt id outside [0, vocab_size).
  void reset(int32_t vocab_size, std::span<const int32_t> prompt, int64_t max_output_tokens);

  // Records one output token; id in [0, vocab_size).
  void accept(int32_t token);

  int32_t vocab_size() const { return int32_t(output_count_.size()); }
  int64_t output_length() const { return output_length_; }
  int32_t output_count(int32_t token) const { return output_count_[size_t(token)]; }
  bool seen(int32_t token) const { return seen_[size_t(token)] != 0; }
  // The distinct ids of the prompt and the output, in the order they first occurred.
  std::span<const int32_t> seen_tokens() const { return seen_list_; }

  // vLLM's apply_penalties on one row, for each seen token in turn: the repetition penalty
  // over prompt and output (l > 0 ? l / r : l * r, transformers' division; vLLM multiplies
  // by 1 / r, which can differ in the last bit), then l -= frequency * output count, then
  // l -= presence * (output count > 0), each one f32 operation as vLLM's tensors do.
  void apply(std::span<float> logits, float repetition, float frequency, float presence) const;

 private:
  std::vector<int32_t> output_count_;  // [vocab]
  std::vector<uint8_t> seen_;          // [vocab]: in the prompt or the output
  std::vector<int32_t> seen_list_;     // distinct seen ids, capacity reserved at reset()
  int64_t output_length_ = 0;
};

}  // namespace parley
