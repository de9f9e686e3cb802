// RowSampling and sample_rows: the processor order of sampler.h.
#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "engine/error.h"
#include "sampling/philox.h"

namespace parley {

namespace {

// The hot path builds its messages only on failure (check_arg's message is built first).
[[noreturn]] void fail(const std::string& message) {
  throw Error(ErrorKind::invalid_argument, message);
}

uint64_t fresh_seed() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) | uint64_t(rd());
}

std::vector<int32_t> stop_set(const SamplingParams& p, std::span<const int32_t> eos,
                              int32_t vocab_size) {
  std::vector<int32_t> ids(p.stop_token_ids.begin(), p.stop_token_ids.end());
  if (!p.ignore_eos) {
    for (int32_t id : eos) {
      check_arg(id >= 0 && id < vocab_size, "[sampling] eos token id " + std::to_string(id) +
                                                " is outside [0, " + std::to_string(vocab_size) +
                                                ")");
      ids.push_back(id);
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace

RowSampling::RowSampling(SamplingParams params, int32_t vocab_size, std::span<const int32_t> prompt,
                         std::span<const int32_t> eos_token_ids, uint64_t stream)
    : params_(std::move(params)), vocab_size_(vocab_size), stream_(stream) {
  validate(params_, vocab_size);
  seed_ = params_.seed ? *params_.seed : fresh_seed();
  stop_tokens_ = stop_set(params_, eos_token_ids, vocab_size);
  use_penalties_ = params_.repetition_penalty != 1.0f || params_.frequency_penalty != 0.0f ||
                   params_.presence_penalty != 0.0f;
  if (use_penalties_) {
    penalties_.reset(vocab_size, prompt, params_.max_tokens ? *params_.max_tokens : 0);
  }
  work_.resize(size_t(vocab_size));
  order_.resize(size_t(vocab_size));
}

void RowSampling::check_logits(std::span<const float> logits) const {
  if (finished()) fail("[sampling] the row already finished");
  if (logits.size() != size_t(vocab_size_)) {
    fail("[sampling] logits row has " + std::to_string(logits.size()) +
         " entries; the vocabulary has " + std::to_string(vocab_size_));
  }
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i]) || logits[i] == kInf) {
      fail("[sampling] logit of token " + std::to_string(i) + " is " +
           (std::isnan(logits[i]) ? "NaN" : "+inf"));
    }
  }
}

bool RowSampling::prepare(std::span<const float> logits) {
  check_logits(logits);
  const SamplingParams& p = params_;
  std::span<float> work(work_);
  std::copy(logits.begin(), logits.end(), work.begin());
  if (step_ < p.min_tokens) ban_tokens(work, stop_tokens_);
  apply_logit_bias(work, p.logit_bias);
  if (hook_) hook_(work, *this);
  if (use_penalties_) {
    penalties_.apply(work, p.repetition_penalty, p.frequency_penalty, p.presence_penalty);
  }
  if (p.temperature < kGreedyTemperature) return true;
  apply_temperature(work, p.temperature);
  if (p.min_p > 0.0f) apply_min_p(work, p.min_p);
  apply_top_k_top_p(work, p.top_k, p.top_p, order_);
  return false;
}

void RowSampling::fill_logprobs_of(std::span<const float> logits, SampleResult& r) const {
  if (!params_.logprobs) return;
  const bool raw = params_.logprobs_mode == LogprobsMode::raw;
  const std::span<const float> dist = raw ? logits : std::span<const float>(work_);
  fill_logprobs(dist, logsumexp_f64(dist), r);
}

SampleResult RowSampling::sample(std::span<const float> logits) {
  const bool greedy = prepare(logits);
  SampleResult r;
  r.token = greedy ? argmax_logit(work_)
                   : draw_token(work_, philox_uniform(seed_, stream_, uint64_t(step_)));
  if (r.token < 0) fail("[sampling] every token has logit -inf after the logit processors");
  fill_logprobs_of(logits, r);
  return r;
}

void RowSampling::distribution(std::span<const float> logits, std::span<double> probs) {
  if (probs.size() != size_t(vocab_size_)) fail("[sampling] distribution: wrong length");
  const bool greedy = prepare(logits);
  const int32_t top = argmax_logit(work_);
  if (top < 0) fail("[sampling] every token has logit -inf after the logit processors");
  std::fill(probs.begin(), probs.end(), 0.0);
  if (greedy) {
    probs[size_t(top)] = 1.0;
    return;
  }
  const double m = work_[size_t(top)];
  double total = 0.0;
  for (size_t i = 0; i < probs.size(); ++i)
    if (work_[i] > -std::numeric_limits<float>::infinity())
      total += probs[i] = std::exp(double(work_[i]) - m);
  for (double& v : probs) v /= total;
}

SampleResult RowSampling::result_for(std::span<const float> logits, int32_t token) {
  if (token < 0 || token >= vocab_size_) fail("[sampling] result_for: token out of range");
  // The processed logprobs mode reads work_ as sample() leaves it; raw mode only the logits.
  if (params_.logprobs && params_.logprobs_mode != LogprobsMode::raw)
    prepare(logits);
  else
    check_logits(logits);
  SampleResult r;
  r.token = token;
  fill_logprobs_of(logits, r);
  return r;
}

double RowSampling::aux_uniform(int which) const {
  // Streams above 2^56 are never a choice index: sample()'s draws stay untouched.
  return philox_uniform(seed_, stream_ ^ (uint64_t(which + 1) << 56), uint64_t(step_));
}

void RowSampling::fill_logprobs(std::span<const float> dist, double lse, SampleResult& r) const {
  r.logprob = float(double(dist[size_t(r.token)]) - lse);
  r.rank = logit_rank(dist, r.token);
  r.n_top = top_logprobs(dist, lse, params_.top_logprobs, r.top);
}

FinishReason RowSampling::accept(int32_t token) {
  if (finished()) fail("[sampling] the row already finished");
  if (token < 0 || token >= vocab_size_) {
    fail("[sampling] accepted token id " + std::to_string(token) + " is outside [0, " +
         std::to_string(vocab_size_) + ")");
  }
  if (use_penalties_) penalties_.accept(token);
  ++step_;
  const bool is_stop = std::binary_search(stop_tokens_.begin(), stop_tokens_.end(), token);
  if (is_stop && step_ >= params_.min_tokens) {
    finish_ = FinishReason::stop;
  } else if (params_.max_tokens && step_ >= *params_.max_tokens) {
    finish_ = FinishReason::length;
  }
  return finish_;
}

void sample_rows(const Tensor& logits, std::span<RowSampling* const> rows,
                 std::span<SampleResult> out, ThreadPool& pool) {
  if (logits.dtype() != DType::f32 || logits.is_cuda() || logits.ndim() != 2) {
    fail("[sampling] logits must be f32 [rows, vocab] on the host, got " + logits.describe());
  }
  if (logits.dim(0) != int64_t(rows.size()) || rows.size() != out.size()) {
    fail("[sampling] logits has " + std::to_string(logits.dim(0)) + " rows for " +
         std::to_string(rows.size()) + " rows and " + std::to_string(out.size()) + " results");
  }
  const int64_t vocab = logits.dim(1);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] == nullptr) fail("[sampling] row " + std::to_string(i) + " is null");
    if (rows[i]->finished()) fail("[sampling] row " + std::to_string(i) + " already finished");
    if (rows[i]->vocab_size() != vocab) {
      fail("[sampling] row " + std::to_string(i) + " has a vocabulary of " +
           std::to_string(rows[i]->vocab_size()) + ", the logits " + std::to_string(vocab));
    }
  }
  // One pointer in the closure keeps std::function in its small buffer: no allocation.
  struct Batch {
    const float* base;
    int64_t vocab;
    std::span<RowSampling* const> rows;
    std::span<SampleResult> out;
  } batch{logits.data<float>(), vocab, rows, out};
  pool.parallel_for(int64_t(rows.size()), 1, [b = &batch](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      RowSampling& row = *b->rows[size_t(i)];
      SampleResult& r = b->out[size_t(i)];
      r = row.sample({b->base + i * b->vocab, size_t(b->vocab)});
      r.finish = row.accept(r.token);
    }
  });
}

}  // namespace parley
