// Token choice for Whisper decoding: sampling at temperature T > 0 from softmax(logits / T)
// with parley's own counter-based random numbers, the log-softmax used for scores, and the
// reference's MaximumLikelihoodRanker (openai/whisper whisper/decoding.py).
//
// Random numbers: a draw is a pure function of (seed, stream, row, step), so a transcript
// depends only on the seed and the audio, never on the thread count, on the other rows of a
// batch or on what ran before. openai-whisper draws from torch's global generator
// (Categorical(logits / T).sample()); its numbers cannot be reproduced here, so sampled
// transcripts are compared with the reference statistically, never token by token.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace parley {

// SplitMix64's finalizer (Steele, Lea, Flood 2014): a bijective 64-bit mix.
uint64_t splitmix64(uint64_t x);

// A uniform double in [0, 1) that depends only on its arguments: the 53 high bits of
// splitmix64(seed ^ splitmix64(stream ^ splitmix64(row ^ splitmix64(step)))) / 2^53.
double uniform_draw(uint64_t seed, uint64_t stream, uint64_t row, uint64_t step);

// Inverse-CDF draw from softmax(logits / temperature) (in double, -inf entries never
// chosen): the first id whose cumulative probability exceeds u. temperature > 0, u in [0, 1).
int32_t sample_token(std::span<const float> logits, float temperature, double u);

// log(sum(exp(row))) in double; -inf when every entry is -inf.
double logsumexp(std::span<const float> row);

// The first index of the largest value (torch.argmax / np.argmax).
int32_t argmax(std::span<const float> row);

// MaximumLikelihoodRanker.rank for one group: the index of the best candidate by
// sum_logprob / penalty, penalty = length (no length_penalty) or ((5 + length) / 6) ** a;
// the first of equal scores, as np.argmax. lengths: sampled tokens without <|endoftext|>.
size_t rank_candidates(std::span<const size_t> lengths, std::span<const float> sum_logprobs,
                       std::optional<float> length_penalty);

}  // namespace parley
