// The logit processors of sampling/sampler.h, each on one row of f32 next-token logits
// [vocab] in place, plus the row reductions the sampler needs (argmax, logsumexp, top
// logprobs, the inverse-CDF draw). A removed token has -infinity. These are the CPU
// reference for the CUDA sampler: every rule that decides a borderline case (ties,
// rounding) is written down here.
//
// Ties: wherever tokens are ordered, a larger logit comes first and equal logits go by the
// lower id first (torch's sort leaves that order unspecified).
#pragma once

#include <cstdint>
#include <span>
#include <utility>

namespace parley {

struct IdLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
};

// logits[id] += bias for each (id, bias); ids must be in range (validate() checks).
void apply_logit_bias(std::span<float> logits, std::span<const std::pair<int32_t, float>> bias);

// logits[id] = -inf for each id.
void ban_tokens(std::span<float> logits, std::span<const int32_t> ids);

// logits /= temperature (an f32 division, as vLLM's logits.div_); temperature > 0.
void apply_temperature(std::span<float> logits, float temperature);

// vLLM's MinPLogitsProcessor: removes the tokens whose probability is below min_p times the
// largest probability, i.e. exp(l - max) < min_p (in double). min_p in (0, 1].
void apply_min_p(std::span<float> logits, float min_p);

// vLLM's apply_top_k_top_p: top_k (<= 0: off) keeps the tokens whose logit is at least the
// k-th largest (so ties at the k-th are all kept, as vLLM and transformers do); then top_p
// (>= 1: off), on the softmax of what top_k kept, removes every token whose probability
// together with all tokens after it in the order (vLLM's ascending cumsum) is <= 1 - top_p,
// and never the first. In double: that tail mass is (total - weight before it) / total.
// scratch: logits.size() entries.
void apply_top_k_top_p(std::span<float> logits, int32_t top_k, float top_p,
                       std::span<int32_t> scratch);

// The lowest id of the largest logit; -1 when every logit is -inf or NaN.
int32_t argmax_logit(std::span<const float> logits);

// log(sum(exp(logits))) in double; -inf when every logit is -inf.
double logsumexp_f64(std::span<const float> logits);

// Inverse-CDF draw from softmax(logits) (in double, over ids in increasing order, -inf never
// chosen): the first id whose cumulative unnormalised weight exceeds u * total. u in [0, 1).
// -1 when every logit is -inf.
int32_t draw_token(std::span<const float> logits, double u);

// The n (<= out.size(), <= 64) largest logits as (id, logit - lse), in the tie order above.
// Returns how many were written: min(n, logits.size()).
int top_logprobs(std::span<const float> logits, double lse, int n, std::span<IdLogprob> out);

// The number of tokens whose logit is at least logits[token], itself included (vLLM's rank:
// batched_count_greater_than counts x >= value, so equal logits share the worse rank).
int32_t logit_rank(std::span<const float> logits, int32_t token);

}  // namespace parley
