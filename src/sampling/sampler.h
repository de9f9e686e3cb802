// The token sampler shared by the chat models: per row of a batch of next-token logits, with
// that row's own SamplingParams, random stream and penalty counts, OpenAI's semantics.
//
// The order, vLLM v1's (vllm/v1/sample/sampler.py, Sampler.forward and Sampler.sample), after
// a check that no logit is NaN or +inf (an error; -inf marks a token the model rules out):
//   0. logprobs_mode raw (the default): log_softmax of the model's logits, kept for step 8.
//   1. min_tokens: while fewer than min_tokens tokens were accepted, the stop tokens get
//      -inf (vLLM's MinTokensLogitsProcessor).
//   2. logit_bias: logits[id] += bias (vLLM's LogitBiasLogitsProcessor, OpenAI's semantics).
//   3. the row's logit hook, if any (room for a model family's own filters, e.g. Whisper's
//      suppressions; vLLM runs custom processors that change the argmax here).
//   4. penalties (PenaltyState::apply): repetition over prompt + output tokens, then
//      frequency, then presence over the output tokens (vLLM's apply_penalties).
//   5. temperature < 1e-5: greedy, the argmax of these logits (ties: the lowest id); the
//      steps 6-7 are skipped, as vLLM's greedy path does (they never change the argmax).
//   6. temperature: logits / T; then min_p (vLLM runs it as the argmax-invariant processor
//      between temperature and top-k/top-p); then top_k, then top_p on what top_k kept
//      (vLLM's apply_top_k_top_p).
//   7. the draw: u = philox_uniform(seed, stream, step), inverse CDF over the remaining ids in
//      increasing id order (vLLM draws exponentials from a torch.Generator instead; its
//      numbers cannot be reproduced here, so equality with vLLM is statistical).
//   8. logprobs: the chosen token's logprob, its rank and the top_logprobs alternatives,
//      log_softmax in double of the raw logits (step 0) or, in processed mode, of the logits
//      the token came from (after step 6, or after step 4 when greedy).
// A request's tokens depend only on its logits, its parameters, its seed and stream and its
// own step count: never on the other rows or the thread count.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/tensor.h"
#include "engine/threadpool.h"
#include "sampling/logit_processors.h"
#include "sampling/penalty_state.h"
#include "sampling/sampling_params.h"

namespace parley {

// none: the request goes on; stop: a stop token (stop_token_ids, or EOS without ignore_eos)
// was accepted; length: max_tokens tokens were accepted. Stop strings are StopMatcher's.
enum class FinishReason { none, stop, length };

struct SampleResult {
  int32_t token = -1;
  float logprob = 0.0f;  // with params.logprobs: the token's, in logprobs_mode's distribution
  int32_t rank = 0;      // with params.logprobs: the tokens at least as likely there (vLLM)
  int n_top = 0;         // top_logprobs entries in `top`
  std::array<IdLogprob, kMaxTopLogprobs> top{};  // by logprob desc, ties by lower id
  FinishReason finish = FinishReason::none;      // set when the token is accepted
  std::span<const IdLogprob> top_logprobs() const { return {top.data(), size_t(n_top)}; }
};

class RowSampling {
 public:
  // Runs after logit_bias on the row's logits, see step 3 above; sample_rows calls it on the
  // pool's threads, so it may touch only its own row.
  using LogitHook = std::function<void(std::span<float> logits, const RowSampling& row)>;

  // Validates params (validate()) against vocab_size, sizes every buffer (so sample() and
  // accept() never allocate) and records the prompt for the repetition penalty.
  // eos_token_ids: the model's end-of-sequence ids. stream: which stream of the seed
  // (e.g. the choice index when a request asks for n > 1 choices).
  RowSampling(SamplingParams params, int32_t vocab_size, std::span<const int32_t> prompt,
              std::span<const int32_t> eos_token_ids, uint64_t stream = 0);

  const SamplingParams& params() const { return params_; }
  int32_t vocab_size() const { return vocab_size_; }
  uint64_t seed() const { return seed_; }  // params.seed, or the one drawn at construction
  uint64_t stream() const { return stream_; }
  int64_t step() const { return step_; }  // tokens accepted so far
  FinishReason finish_reason() const { return finish_; }
  bool finished() const { return finish_ != FinishReason::none; }
  // The stop tokens: stop_token_ids, plus the EOS ids unless ignore_eos; sorted, unique.
  std::span<const int32_t> stop_tokens() const { return stop_tokens_; }
  // Empty (vocab_size 0) when no penalty is set.
  const PenaltyState& penalties() const { return penalties_; }

  void set_logit_hook(LogitHook hook) { hook_ = std::move(hook); }

  // Chooses the next token from the row's logits [vocab] without accepting it: a pure
  // function of the logits and the row's state, so calling it twice gives the same result.
  // Throws Error(invalid_argument) for a NaN or +inf logit, a wrong length, a finished row,
  // or when every token is -inf after the processors.
  SampleResult sample(std::span<const float> logits);

  // Speculative decoding's general rule (serving/verifier.h) needs the distribution a draw
  // would follow and the logprobs of a token chosen elsewhere:
  //   distribution: the probabilities of steps 1-6 over the vocabulary (one-hot at the argmax
  //     when greedy), in double, into probs [vocab];
  //   result_for: what sample() would return had it drawn `token` (its logprobs);
  //   aux_uniform: a uniform in [0, 1) of this step from the row's seed on a stream of its
  //     own (which = 0, 1, ...), never the one sample() draws from.
  void distribution(std::span<const float> logits, std::span<double> probs);
  SampleResult result_for(std::span<const float> logits, int32_t token);
  double aux_uniform(int which) const;

  // Accepts the row's next token (the sampled one or one forced by the caller): counts it
  // for the penalties, advances the random stream and says whether the request is done
  // (stop tokens end it only once min_tokens are reached, as vLLM's check_stop).
  FinishReason accept(int32_t token);

 private:
  void check_logits(std::span<const float> logits) const;
  // Steps 1-6 into work_: true when greedy (work_ then holds the penalized logits only).
  bool prepare(std::span<const float> logits);
  void fill_logprobs_of(std::span<const float> logits, SampleResult& r) const;
  void fill_logprobs(std::span<const float> dist, double lse, SampleResult& r) const;

  SamplingParams params_;
  int32_t vocab_size_;
  uint64_t seed_;
  uint64_t stream_;
  int64_t step_ = 0;
  FinishReason finish_ = FinishReason::none;
  std::vector<int32_t> stop_tokens_;
  bool use_penalties_;
  PenaltyState penalties_;
  LogitHook hook_;
  std::vector<float> work_;     // [vocab]: the processed logits
  std::vector<int32_t> order_;  // [vocab]: top-k/top-p scratch
};

// Samples and accepts one token for each row: logits f32 [rows.size(), vocab] on the host,
// out[i] for rows[i], each row at most once. Rows are split over `pool`; every row's result is the
// same whatever the pool size or the other rows. Throws Error(invalid_argument) for mismatched
// shapes or dtype, a null or finished row, or any error of RowSampling::sample.
void sample_rows(const Tensor& logits, std::span<RowSampling* const> rows,
                 std::span<SampleResult> out, ThreadPool& pool = cpu_threads());

}  // namespace parley
