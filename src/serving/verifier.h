// The verifier of speculative decoding (issue 27 item 1; DESIGN.md section 8): a row's last
// accepted token and its k drafts went through one forward (a logits_all row of k + 1
// tokens); here the drafts are checked against the model's logits at each position.
//
// Position i (0..k) samples from its logits with the row's sampler, exactly as a plain
// decode step would (the same processors, penalties over the tokens accepted before it, the
// same uniform for the same step), and accepts the token. While that token equals draft i,
// the next position's logits are valid (they were computed after the draft) and the walk
// goes on; the first token that differs is the correction and ends it; after k matches the
// (k + 1)-th token is the bonus. So a row yields 1 to k + 1 tokens, and they are the tokens
// plain decoding would have produced: greedy token for token, sampled draw for draw (the
// one-hot draft rule, serving/speculative.h). A stop token or max_tokens ends the walk too.
//
// Drafts sampled from a distribution q of their own (a draft model's, for a sampled request)
// take the general rule instead (Leviathan et al. 2023, Chen et al. 2023): draft i is
// accepted with probability min(1, p(d) / q(d)), p being the distribution the row's plain
// draw would follow (RowSampling::distribution); a rejection draws the position's token from
// max(p - q, 0) normalized and ends the walk. Its two uniforms are the row's auxiliary streams
// of that step (RowSampling::aux_uniform), so the output follows the target distribution
// exactly and a seeded request repeats itself, though not draw for draw as without drafts.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/threadpool.h"
#include "grammar/constraint.h"
#include "sampling/sampler.h"

namespace parley {

struct VerifyRow {
  RowSampling* sampler = nullptr;
  const float* logits = nullptr;             // [drafts.size() + 1, vocab], f32 on the host
  std::span<const int32_t> drafts;           // k >= 0 proposed tokens
  std::vector<SampleResult>* out = nullptr;  // cleared, then 1..k+1 accepted samples
  const float* draft_probs = nullptr;        // [k, vocab]: the drafts' q; null: one-hot drafts
  // The choice's grammar (its sampler's logit hook masks by it): advanced past each accepted
  // draft so the next position is masked from there, and put back at the end (the engine
  // advances it again as it commits the tokens).
  TokenConstraint* constraint = nullptr;
};

// The general rule at one position: p (the target's probabilities) and q (the draft's) over
// the vocabulary, d drawn from q. Returns d when u_accept < p(d) / q(d) (accepted set true),
// else the token of max(p - q, 0) normalized at u_resample by inverse CDF (accepted false).
int32_t speculative_sample(std::span<const double> p, std::span<const float> q, int32_t d,
                           double u_accept, double u_resample, bool& accepted);

// Drafts of row r accepted: out's samples before the first that differs from its draft.
int accepted_drafts(const VerifyRow& r);

// Every row verified (rows split over `pool`; a row's result depends on nothing else).
// Throws as RowSampling::sample (the first error of any row).
void verify_rows(std::span<const VerifyRow> rows, ThreadPool& pool = cpu_threads());

}  // namespace parley
