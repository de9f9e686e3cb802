// SamplingParams: one request's token-choice settings with OpenAI's names and defaults (and
// vLLM's for the extras OpenAI lacks: top_k, min_p, repetition_penalty, min_tokens,
// stop_token_ids, ignore_eos), and their validation. What each setting does, and in which
// order, is written down in sampling/sampler.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace parley {

// The most top_logprobs OpenAI allows, and the capacity of SampleResult::top.
constexpr int kMaxTopLogprobs = 20;
// The most stop strings OpenAI allows.
constexpr int kMaxStopStrings = 4;
// Below this temperature the choice is greedy (vLLM's _SAMPLING_EPS).
constexpr float kGreedyTemperature = 1e-5f;

// Which distribution logprobs describe (vLLM's LogprobsMode, without the "logits" forms).
enum class LogprobsMode {
  raw,        // log_softmax of the model's logits before any processor (vLLM's default)
  processed,  // log_softmax of the logits the token is drawn from (after every processor)
};

struct SamplingParams {
  float temperature = 1.0f;         // [0, 2] (OpenAI); below kGreedyTemperature: greedy
  float top_p = 1.0f;               // (0, 1]; 1 keeps every token
  int32_t top_k = 0;                // 0 or -1: off; else >= 1 (above the vocabulary: off)
  float min_p = 0.0f;               // [0, 1]; 0: off
  float presence_penalty = 0.0f;    // [-2, 2] (OpenAI)
  float frequency_penalty = 0.0f;   // [-2, 2] (OpenAI)
  float repetition_penalty = 1.0f;  // > 0 (vLLM); 1: off
  // (token id, bias) pairs, bias in [-100, 100] (OpenAI), ids unique and in the vocabulary.
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::optional<uint64_t> seed;  // none: drawn from std::random_device when the row starts
  bool logprobs = false;         // return the chosen token's logprob
  int32_t top_logprobs = 0;      // [0, 20] alternatives; > 0 needs logprobs (OpenAI)
  LogprobsMode logprobs_mode = LogprobsMode::raw;
  std::vector<int32_t> stop_token_ids;  // tokens that end the request besides the model's EOS
  bool ignore_eos = false;              // true: the model's EOS ids do not end the request
  int32_t min_tokens = 0;               // >= 0; the stop tokens are banned until this many
  std::optional<int32_t> max_tokens;    // >= 1 and >= min_tokens; none: no limit here
  std::vector<std::string> stop;        // up to 4 non-empty stop strings (see StopMatcher)
};

// Throws Error(invalid_argument) naming the first field that is out of range, e.g.
// "[sampling] temperature 2.5 is outside [0, 2]". vocab_size bounds the token ids.
void validate(const SamplingParams& params, int32_t vocab_size);

}  // namespace parley
