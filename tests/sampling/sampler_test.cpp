// RowSampling and sample_rows: validation, vLLM's processor order (read back through the
// processed logprobs), greedy ties, seeded streams that do not depend on the batch or the
// thread count, the empirical distribution of seeded draws against softmax(logits / T)
// after top-k/top-p (chi-square), logprobs, min_tokens/max_tokens/stop tokens, and no
// allocation per step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/alloc_stats.h"
#include "engine/error.h"
#include "engine/tensor.h"
#include "engine/threadpool.h"
#include "sampling/alloc_counter.h"
#include "sampling/sampler.h"

namespace parley {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<float> random_logits(int vocab, uint32_t seed, float scale = 3.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> l(static_cast<size_t>(vocab));
  for (float& v : l) v = d(rng);
  return l;
}

Tensor rows_tensor(const std::vector<std::vector<float>>& rows) {
  Tensor t = Tensor::empty({int64_t(rows.size()), int64_t(rows[0].size())}, DType::f32);
  for (size_t r = 0; r < rows.size(); ++r) {
    std::copy(rows[r].begin(), rows[r].end(), t.data<float>() + r * rows[0].size());
  }
  return t;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument) << e.what();
    return e.what();
  }
  return "(no error)";
}

TEST(SamplingParams, OutOfRangeValuesNameTheirField) {
  struct Case {
    std::function<void(SamplingParams&)> set;
    std::string field;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<Case> cases{
      {[](SamplingParams& p) { p.temperature = 2.5f; }, "temperature 2.5 is outside [0, 2]"},
      {[](SamplingParams& p) { p.temperature = -0.1f; }, "temperature"},
      {[&](SamplingParams& p) { p.temperature = nan; }, "temperature"},
      {[](SamplingParams& p) { p.top_p = 0.0f; }, "top_p 0 is outside (0, 1]"},
      {[](SamplingParams& p) { p.top_p = 1.01f; }, "top_p"},
      {[](SamplingParams& p) { p.top_k = -2; }, "top_k"},
      {[](SamplingParams& p) { p.min_p = 1.5f; }, "min_p"},
      {[](SamplingParams& p) { p.presence_penalty = 2.5f; }, "presence_penalty"},
      {[](SamplingParams& p) { p.frequency_penalty = -3.0f; }, "frequency_penalty"},
      {[](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty"},
      {[](SamplingParams& p) {
         p.logit_bias = {{100, 1.0f}};
       },
       "logit_bias token id 100"},
      {[](SamplingParams& p) {
         p.logit_bias = {{1, 101.0f}};
       },
       "logit_bias value"},
      {[](SamplingParams& p) {
         p.logit_bias = {{1, 1.0f}, {1, 2.0f}};
       },
       "logit_bias"},
      {[](SamplingParams& p) { p.logprobs = true, p.top_logprobs = 21; }, "top_logprobs"},
      {[](SamplingParams& p) { p.top_logprobs = 2; }, "top_logprobs needs logprobs"},
      {[](SamplingParams& p) { p.stop_token_ids = {-1}; }, "stop_token_ids"},
      {[](SamplingParams& p) { p.min_tokens = -1; }, "min_tokens"},
      {[](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens"},
      {[](SamplingParams& p) { p.min_tokens = 5, p.max_tokens = 4; }, "min_tokens 5 exceeds"},
      {[](SamplingParams& p) {
         p.stop = {"a", "b", "c", "d", "e"};
       },
       "stop has 5"},
      {[](SamplingParams& p) { p.stop = {""}; }, "stop has an empty"},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.set(p);
    const std::string msg = error_of([&] { validate(p, 100); });
    EXPECT_NE(msg.find(c.field), std::string::npos) << msg;
    EXPECT_NE(msg.find("[sampling]"), std::string::npos) << msg;
  }
  SamplingParams ok;
  ok.temperature = 2.0f, ok.top_k = -1, ok.min_p = 1.0f, ok.logit_bias = {{99, -100.0f}};
  ok.logprobs = true, ok.top_logprobs = 20, ok.max_tokens = 1, ok.stop = {"a", "b", "c", "d"};
  EXPECT_NO_THROW(validate(ok, 100));
  EXPECT_NO_THROW(validate(SamplingParams{}, 1));
}

TEST(RowSampling, RejectsBadLogits) {
  SamplingParams p;
  p.seed = 1;
  RowSampling row(p, 4, {}, {});
  std::vector<float> l{0, 1, 2, 3};
  l[2] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(error_of([&] { row.sample(l); }).find("token 2 is NaN"), std::string::npos);
  l[2] = std::numeric_limits<float>::infinity();
  EXPECT_NE(error_of([&] { row.sample(l); }).find("+inf"), std::string::npos);
  const std::vector<float> none(4, kNegInf);
  EXPECT_NE(error_of([&] { row.sample(none); }).find("-inf"), std::string::npos);
  EXPECT_NE(error_of([&] { row.sample(std::vector<float>(3)); }).find("3 entries"),
            std::string::npos);
  EXPECT_NE(error_of([&] { row.accept(4); }).find("outside"), std::string::npos);
  const std::vector<int32_t> bad_eos{7};
  EXPECT_NE(error_of([&] { RowSampling r(p, 4, {}, bad_eos); }).find("eos"), std::string::npos);
  const std::vector<int32_t> bad_prompt{4};
  SamplingParams pen = p;
  pen.repetition_penalty = 1.1f;
  EXPECT_NE(error_of([&] { RowSampling r(pen, 4, bad_prompt, {}); }).find("prompt"),
            std::string::npos);
  // A -inf row is fine as long as one token remains.
  std::vector<float> one(4, kNegInf);
  one[3] = -1e30f;
  EXPECT_EQ(row.sample(one).token, 3);
}

TEST(RowSampling, GreedyIsTheArgmaxOfTheProcessedLogitsLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = 1, p.top_p = 0.1f, p.min_p = 0.9f;  // never change the argmax; skipped anyway
  const std::vector<float> l{1.0f, 4.0f, 2.0f, 4.0f, 4.0f};
  RowSampling row(p, 5, {}, {});
  EXPECT_EQ(row.sample(l).token, 1);
  p.logit_bias = {{4, 0.5f}};
  EXPECT_EQ(RowSampling(p, 5, {}, {}).sample(l).token, 4);
  p.logit_bias.clear();
  p.repetition_penalty = 2.0f;  // token 1 in the prompt: 4 / 2 = 2 < 4
  const std::vector<int32_t> prompt{1};
  EXPECT_EQ(RowSampling(p, 5, prompt, {}).sample(l).token, 3);
}

// Reads back the whole processed distribution (top_logprobs = vocab size, processed mode)
// and compares it with the order of sampler.h computed directly, step by step.
TEST(RowSampling, ProcessedLogprobsFollowVllmsOrder) {
  const int vocab = 12;
  std::vector<float> raw = random_logits(vocab, 3, 2.0f);
  raw[4] = 3.5f, raw[7] = 4.0f;  // the penalised tokens must survive the filters
  SamplingParams p;
  p.temperature = 1.7f, p.top_k = 7, p.top_p = 0.85f, p.min_p = 0.02f;
  p.presence_penalty = 0.3f, p.frequency_penalty = 0.5f, p.repetition_penalty = 1.2f;
  p.logit_bias = {{2, 1.5f}, {9, -3.0f}};
  p.logprobs = true, p.top_logprobs = vocab, p.logprobs_mode = LogprobsMode::processed;
  p.seed = 99;
  const std::vector<int32_t> prompt{1, 4};
  RowSampling row(p, vocab, prompt, {});
  for (int32_t t : {4, 7, 7}) row.accept(t);
  const SampleResult r = row.sample(raw);

  // Direct: bias, repetition (seen: 1, 4, 7), frequency/presence (4: 1, 7: 2), / T.
  std::vector<double> l(raw.begin(), raw.end());
  l[2] += 1.5, l[9] -= 3.0;
  const int counts[vocab] = {0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 0, 0};
  for (int id : {1, 4, 7}) l[id] = l[id] > 0 ? l[id] / 1.2 : l[id] * 1.2;
  for (int id = 0; id < vocab; ++id) {
    if (counts[id]) l[id] -= 0.5 * counts[id] + 0.3;
    l[id] /= 1.7;
  }
  std::vector<int> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
  std::vector<bool> keep(vocab, false);
  // min_p on the tempered probabilities, top_k, then top_p on the renormalised top_k.
  double z = 0;
  for (int id = 0; id < vocab; ++id) z += std::exp(l[id]);
  const double pmax = std::exp(l[order[0]]) / z;
  std::vector<int> cand;
  for (int id : order) {
    if (std::exp(l[id]) / z >= 0.02 * pmax && int(cand.size()) < 7) cand.push_back(id);
  }
  double zk = 0;
  for (int id : cand) zk += std::exp(l[id]);
  double above = 0;  // mass of the tokens before this one
  for (int id : cand) {
    if (above < 0.85) keep[id] = true;
    above += std::exp(l[id]) / zk;
  }
  double zf = 0;
  for (int id = 0; id < vocab; ++id) zf += keep[id] ? std::exp(l[id]) : 0.0;
  int n_kept = 0;
  ASSERT_EQ(r.n_top, vocab);
  for (const IdLogprob& t : r.top_logprobs()) {
    if (keep[t.token]) {
      ++n_kept;
      EXPECT_NEAR(t.logprob, l[t.token] - std::log(zf), 2e-6) << "token " << t.token;
    } else {
      EXPECT_EQ(t.logprob, kNegInf) << "token " << t.token;
    }
  }
  // The case must exercise the filters without collapsing to one token, and keep the tokens
  // whose penalties do not commute with the temperature.
  EXPECT_GE(n_kept, 3);
  EXPECT_LT(n_kept, 7);
  EXPECT_TRUE(keep[4] && keep[7]);
  EXPECT_TRUE(keep[r.token]);
  EXPECT_NEAR(r.logprob, l[r.token] - std::log(zf), 2e-6);

  // Raw mode (the default): log_softmax of the model's logits, whatever the processors do.
  p.logprobs_mode = LogprobsMode::raw;
  RowSampling raw_row(p, vocab, prompt, {});
  const SampleResult rr = raw_row.sample(raw);
  double zr = 0;
  for (float v : raw) zr += std::exp(double(v));
  for (const IdLogprob& t : rr.top_logprobs()) {
    EXPECT_NEAR(t.logprob, raw[t.token] - std::log(zr), 1e-6);
  }
  for (int j = 1; j < rr.n_top; ++j) EXPECT_GE(rr.top[j - 1].logprob, rr.top[j].logprob);
  EXPECT_NEAR(rr.logprob, raw[rr.token] - std::log(zr), 1e-6);
  int rank = 0;
  for (float v : raw) rank += v >= raw[rr.token];
  EXPECT_EQ(rr.rank, rank);
}

TEST(RowSampling, MinPRunsAfterTemperature) {
  // Weights at T=1: 1 and e^-2 = 0.135 < 0.3 (token 1 removed); at T=2: e^-1 = 0.37 (kept).
  const std::vector<float> l{0.0f, -2.0f};
  SamplingParams p;
  p.min_p = 0.3f, p.seed = 4;
  for (float t : {1.0f, 2.0f}) {
    p.temperature = t;
    RowSampling row(p, 2, {}, {});
    int ones = 0;
    for (int i = 0; i < 400; ++i) {
      const int32_t tok = row.sample(l).token;
      ones += tok;
      row.accept(tok);
    }
    if (t == 1.0f) {
      EXPECT_EQ(ones, 0);
    } else {
      EXPECT_GT(ones, 50);  // p = 0.27: about 108
    }
  }
}

std::vector<int32_t> run_alone(const SamplingParams& p, int vocab, int steps, uint32_t data) {
  RowSampling row(p, vocab, {}, {});
  std::vector<int32_t> tokens;
  for (int s = 0; s < steps; ++s) {
    const SampleResult r = row.sample(random_logits(vocab, data + uint32_t(s)));
    tokens.push_back(r.token);
    row.accept(r.token);
  }
  return tokens;
}

TEST(RowSampling, SeededStreamsAreReproducible) {
  SamplingParams p;
  p.seed = 1234;
  const std::vector<int32_t> a = run_alone(p, 50, 100, 10);
  EXPECT_EQ(a, run_alone(p, 50, 100, 10));
  p.seed = 1235;
  EXPECT_NE(a, run_alone(p, 50, 100, 10));
  p.seed.reset();  // unseeded rows draw their own seeds
  RowSampling x(p, 50, {}, {}), y(p, 50, {}, {});
  EXPECT_NE(x.seed(), y.seed());
}

TEST(SampleRows, ARowDoesNotDependOnTheOtherRowsOrTheThreadCount) {
  const int vocab = 64, steps = 30;
  SamplingParams a;
  a.temperature = 0.9f, a.top_p = 0.95f, a.frequency_penalty = 0.2f, a.seed = 11;
  a.logprobs = true, a.top_logprobs = 3;
  std::vector<SampleResult> alone(steps);
  {
    RowSampling row(a, vocab, {}, {});
    RowSampling* rows[] = {&row};
    for (int s = 0; s < steps; ++s) {
      SampleResult out[1];
      sample_rows(rows_tensor({random_logits(vocab, 500 + s)}), rows, out);
      alone[size_t(s)] = out[0];
    }
  }
  // Beside a greedy row and a top_k row with other seeds and logits, on 1 and 4 threads.
  for (int threads : {1, 4}) {
    ThreadPool pool(threads);
    SamplingParams b;
    b.temperature = 0.0f;
    SamplingParams c;
    c.top_k = 5, c.seed = 11, c.presence_penalty = 1.0f;
    const std::vector<int32_t> prompt{1, 2, 3};
    RowSampling rb(b, vocab, prompt, {}), ra(a, vocab, prompt, {}), rc(c, vocab, {}, {});
    RowSampling* rows[] = {&rb, &ra, &rc};
    for (int s = 0; s < steps; ++s) {
      SampleResult out[3];
      sample_rows(rows_tensor({random_logits(vocab, 900 + s), random_logits(vocab, 500 + s),
                               random_logits(vocab, 700 + s)}),
                  rows, out, pool);
      ASSERT_EQ(out[1].token, alone[size_t(s)].token) << "step " << s << " threads " << threads;
      ASSERT_EQ(out[1].logprob, alone[size_t(s)].logprob);
      ASSERT_EQ(out[1].top[2].token, alone[size_t(s)].top[2].token);
    }
  }
}

TEST(SampleRows, ResultsAreTheSameOnAnyNumberOfThreads) {
  const int vocab = 100, n_rows = 8, steps = 20;
  auto run = [&](int threads) {
    ThreadPool pool(threads);
    std::vector<RowSampling> rows;
    rows.reserve(n_rows);
    for (int i = 0; i < n_rows; ++i) {
      SamplingParams p;
      p.temperature = 0.3f + 0.2f * float(i), p.top_k = i % 3 == 0 ? 0 : 10 + i;
      p.top_p = i % 2 ? 0.9f : 1.0f, p.seed = uint64_t(i % 3), p.repetition_penalty = 1.1f;
      rows.emplace_back(p, vocab, std::vector<int32_t>{5, 6}, std::vector<int32_t>{});
    }
    std::vector<RowSampling*> ptrs;
    for (RowSampling& r : rows) ptrs.push_back(&r);
    std::vector<int32_t> tokens;
    for (int s = 0; s < steps; ++s) {
      std::vector<std::vector<float>> logits;
      for (int i = 0; i < n_rows; ++i) logits.push_back(random_logits(vocab, 31 * s + i));
      std::vector<SampleResult> out(n_rows);
      sample_rows(rows_tensor(logits), ptrs, out, pool);
      for (const SampleResult& r : out) tokens.push_back(r.token);
    }
    return tokens;
  };
  const std::vector<int32_t> one = run(1);
  EXPECT_EQ(one, run(2));
  EXPECT_EQ(one, run(5));
}

// The chi-square statistic's 99.9% quantile for df degrees of freedom (df 1..12).
double chi2_999(int df) {
  static const double q[] = {10.83, 13.82, 16.27, 18.47, 20.52, 22.46,
                             24.32, 26.12, 27.88, 29.59, 31.26, 32.91};
  return q[df - 1];
}

// softmax(logits / T), then top_k, then top_p on the renormalised top_k, computed directly.
std::vector<double> filtered_softmax(const std::vector<float>& logits, double t, int top_k,
                                     double top_p) {
  const int n = int(logits.size());
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  if (top_k > 0 && top_k < n) order.resize(size_t(top_k));
  double z = 0;
  for (int id : order) z += std::exp(logits[id] / t);
  std::vector<double> p(n, 0.0);
  double above = 0;
  for (int id : order) {
    if (above < top_p) p[id] = std::exp(logits[id] / t) / z;
    above += std::exp(logits[id] / t) / z;
  }
  const double kept = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& v : p) v /= kept;
  return p;
}

TEST(RowSampling, SeededDrawsMatchTheFilteredSoftmax) {
  const std::vector<float> logits{1.0f, 0.2f, -0.5f, 2.0f, 0.7f, -1.5f, 1.4f, 0.0f, -0.3f, 0.9f};
  struct Config {
    float t;
    int top_k;
    float top_p;
  };
  for (const Config& c : {Config{0.7f, 7, 0.9f}, Config{1.3f, 0, 1.0f}, Config{1.0f, 4, 1.0f},
                          Config{1.6f, 0, 0.8f}}) {
    SamplingParams p;
    p.temperature = c.t, p.top_k = c.top_k, p.top_p = c.top_p, p.seed = 2024;
    RowSampling row(p, int32_t(logits.size()), {}, {});
    const int draws = 20000;
    std::vector<int> count(logits.size(), 0);
    for (int i = 0; i < draws; ++i) {
      const int32_t tok = row.sample(logits).token;
      ++count[size_t(tok)];
      row.accept(tok);
    }
    const std::vector<double> want = filtered_softmax(logits, c.t, c.top_k, c.top_p);
    double chi2 = 0;
    int cells = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (want[i] == 0.0) {
        EXPECT_EQ(count[i], 0) << "token " << i << " was filtered out";
        continue;
      }
      const double e = want[i] * draws;
      chi2 += (count[i] - e) * (count[i] - e) / e;
      ++cells;
    }
    ASSERT_GE(cells, 3);
    EXPECT_LT(chi2, chi2_999(cells - 1)) << "T " << c.t << " top_k " << c.top_k << " top_p "
                                         << c.top_p << " over " << cells << " tokens";
  }
}

TEST(RowSampling, LogitBiasOfMinus100BansAndPlus100Forces) {
  const std::vector<float> l = random_logits(20, 8, 2.0f);
  const int32_t top = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
  SamplingParams p;
  p.seed = 3, p.logit_bias = {{top, -100.0f}};
  RowSampling ban(p, 20, {}, {});
  p.logit_bias = {{5, 100.0f}};
  RowSampling force(p, 20, {}, {});
  for (int i = 0; i < 2000; ++i) {
    const int32_t a = ban.sample(l).token, b = force.sample(l).token;
    ASSERT_NE(a, top);
    ASSERT_EQ(b, 5);
    ban.accept(a), force.accept(b);
  }
  p.temperature = 0.0f, p.logit_bias = {{top, -100.0f}};
  EXPECT_NE(RowSampling(p, 20, {}, {}).sample(l).token, top);
}

TEST(RowSampling, MinTokensBansStopTokensAndFinishReasons) {
  std::vector<float> l(10, 0.0f);
  l[9] = 10.0f, l[8] = 9.0f;  // EOS 9 and stop token 8 lead
  const std::vector<int32_t> eos{9};
  SamplingParams p;
  p.temperature = 0.0f, p.min_tokens = 3, p.stop_token_ids = {8}, p.max_tokens = 6;
  RowSampling row(p, 10, {}, eos);
  EXPECT_EQ(std::vector<int32_t>(row.stop_tokens().begin(), row.stop_tokens().end()),
            (std::vector<int32_t>{8, 9}));
  for (int s = 0; s < 3; ++s) {
    const int32_t t = row.sample(l).token;
    EXPECT_EQ(t, 0) << "step " << s;
    EXPECT_EQ(row.accept(t), FinishReason::none);
  }
  EXPECT_EQ(row.sample(l).token, 9);
  EXPECT_EQ(row.accept(9), FinishReason::stop);
  EXPECT_NE(error_of([&] { row.sample(l); }).find("finished"), std::string::npos);

  // A stop token forced before min_tokens does not end the request.
  RowSampling forced(p, 10, {}, eos);
  EXPECT_EQ(forced.accept(8), FinishReason::none);

  // ignore_eos: EOS is an ordinary token; the request runs to max_tokens.
  p.ignore_eos = true, p.stop_token_ids.clear(), p.min_tokens = 0;
  RowSampling open(p, 10, {}, eos);
  EXPECT_TRUE(open.stop_tokens().empty());
  FinishReason f = FinishReason::none;
  int steps = 0;
  while (f == FinishReason::none) {
    const int32_t t = open.sample(l).token;
    EXPECT_EQ(t, 9);
    f = open.accept(t);
    ++steps;
  }
  EXPECT_EQ(f, FinishReason::length);
  EXPECT_EQ(steps, 6);
}

TEST(RowSampling, LogitHookRunsAfterLogitBiasAndBeforePenalties) {
  SamplingParams p;
  p.temperature = 0.0f, p.logit_bias = {{2, 5.0f}}, p.repetition_penalty = 2.0f;
  const std::vector<int32_t> prompt{2};
  RowSampling row(p, 4, prompt, {});
  float seen = 0;
  row.set_logit_hook([&](std::span<float> l, const RowSampling&) {
    seen = l[2];
    l[3] = kNegInf;  // e.g. a suppressed token
  });
  const std::vector<float> l{0.0f, 3.0f, 1.0f, 50.0f};
  EXPECT_EQ(row.sample(l).token, 1);  // 3 banned; 2: (1 + 5) / 2 = 3, tie with 1: lower id
  EXPECT_EQ(seen, 6.0f);
}

TEST(SampleRows, NoAllocationPerStep) {
  const int vocab = 1000;
  SamplingParams p;
  p.temperature = 0.8f, p.top_k = 50, p.top_p = 0.9f, p.min_p = 0.01f;
  p.presence_penalty = 0.5f, p.frequency_penalty = 0.3f, p.repetition_penalty = 1.2f;
  p.logit_bias = {{3, 2.0f}}, p.logprobs = true, p.top_logprobs = 20, p.max_tokens = 500;
  p.seed = 9, p.stop_token_ids = {999}, p.min_tokens = 400;
  const std::vector<int32_t> prompt{1, 2, 3, 4, 5};
  RowSampling a(p, vocab, prompt, {}), b(p, vocab, {}, {});
  p.top_p = 1.0f, p.top_k = 0;  // the full-vocabulary draw too
  RowSampling c(p, vocab, prompt, {});
  RowSampling* rows[] = {&a, &b, &c};
  SampleResult out[3];
  ThreadPool pool(2);
  const Tensor logits =
      rows_tensor({random_logits(vocab, 1), random_logits(vocab, 2), random_logits(vocab, 3)});
  sample_rows(logits, rows, out, pool);  // warm
  const int64_t news = test::operator_new_calls();
  const AllocStats before = alloc_stats();
  for (int s = 0; s < 200; ++s) sample_rows(logits, rows, out, pool);
  EXPECT_EQ(test::operator_new_calls(), news);
  EXPECT_EQ(alloc_stats().host_allocs, before.host_allocs);
  EXPECT_EQ(a.step(), 201);
  EXPECT_GT(a.penalties().seen_tokens().size(), 20u);  // the counts did move

  PenaltyState st;  // and the state alone, over its whole reservation
  st.reset(vocab, prompt, 3000);
  std::vector<float> row = random_logits(vocab, 4);
  const int64_t news2 = test::operator_new_calls();
  for (int s = 0; s < 3000; ++s) {
    st.accept(int32_t((s * 7919) % vocab));
    if (s % 100 == 0) st.apply(row, 1.1f, 0.1f, 0.1f);
  }
  EXPECT_EQ(test::operator_new_calls(), news2);
  EXPECT_EQ(st.seen_tokens().size(), size_t(vocab));
}

TEST(SampleRows, RejectsMismatchedInputs) {
  SamplingParams p;
  p.seed = 1;
  RowSampling row(p, 8, {}, {});
  RowSampling* rows[] = {&row};
  SampleResult out[1];
  EXPECT_NE(error_of([&] {
              sample_rows(Tensor::zeros({2, 8}, DType::f32), rows, out);
            }).find("2 rows for 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              sample_rows(Tensor::zeros({1, 7}, DType::f32), rows, out);
            }).find("vocabulary of 8"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              sample_rows(Tensor::zeros({1, 8}, DType::f16), rows, out);
            }).find("f32"),
            std::string::npos);
  RowSampling* null_rows[] = {nullptr};
  EXPECT_NE(error_of([&] {
              sample_rows(Tensor::zeros({1, 8}, DType::f32), null_rows, out);
            }).find("null"),
            std::string::npos);
}

}  // namespace
}  // namespace parley
