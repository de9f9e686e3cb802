// Each logit processor of sampling/logit_processors.h and PenaltyState against a direct
// computation from its definition (vLLM's and transformers'), with the edge cases: top_k
// above the vocabulary, ties at the k-th logit, top_p keeping one token, top_p on what
// top_k kept, all -inf but one; and the Philox generator against Random123's known answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "sampling/logit_processors.h"
#include "sampling/penalty_state.h"
#include "sampling/philox.h"

namespace parley {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<double> softmax(const std::vector<float>& l) {
  const double m = *std::max_element(l.begin(), l.end());
  std::vector<double> p(l.size());
  double s = 0;
  for (size_t i = 0; i < l.size(); ++i) s += p[i] = std::exp(double(l[i]) - m);
  for (double& v : p) v /= s;
  return p;
}

std::vector<bool> kept(const std::vector<float>& l) {
  std::vector<bool> k(l.size());
  for (size_t i = 0; i < l.size(); ++i) k[i] = l[i] > kNegInf;
  return k;
}

TEST(Philox, MatchesRandom123KnownAnswers) {
  // Random123 tests/kat_vectors, the three "philox4x32 10" lines (counter, key -> output).
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}),
            (PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(
      philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
      (PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, UniformIsInRangeAndDependsOnEveryInput) {
  double sum = 0, sum2 = 0;
  const int n = 100000;  // the mean's standard deviation: 0.29 / sqrt(n) = 0.0009
  for (uint64_t step = 0; step < uint64_t(n); ++step) {
    const double u = philox_uniform(7, 0, step);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u, sum2 += u * u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.0045);
  EXPECT_NEAR(sum2 / n - (sum / n) * (sum / n), 1.0 / 12, 0.002);
  EXPECT_EQ(philox_uniform(7, 1, 5), philox_uniform(7, 1, 5));
  EXPECT_NE(philox_uniform(7, 1, 5), philox_uniform(8, 1, 5));
  EXPECT_NE(philox_uniform(7, 1, 5), philox_uniform(7, 2, 5));
  EXPECT_NE(philox_uniform(7, 1, 5), philox_uniform(7, 1, 6));
  EXPECT_NE(philox_uniform(1ull << 40, 0, 0), philox_uniform(0, 0, 0));  // the seed's high word
}

TEST(LogitProcessors, BiasBanAndTemperature) {
  std::vector<float> l{1, 2, 3, 4};
  const std::vector<std::pair<int32_t, float>> bias{{0, 5.5f}, {3, -100.0f}};
  apply_logit_bias(l, bias);
  EXPECT_EQ(l, (std::vector<float>{6.5f, 2, 3, -96.0f}));
  const std::vector<int32_t> ban{1};
  ban_tokens(l, ban);
  EXPECT_EQ(l[1], kNegInf);
  apply_temperature(l, 0.5f);
  EXPECT_EQ(l, (std::vector<float>{13.0f, kNegInf, 6.0f, -192.0f}));
}

TEST(LogitProcessors, MinPRemovesTokensBelowMinPTimesTheLargestProbability) {
  const std::vector<float> l0{2.0f, 1.0f, 0.0f, -1.0f, -3.0f, kNegInf};
  for (float min_p : {0.05f, 0.2f, 0.5f, 1.0f}) {
    std::vector<float> l = l0;
    apply_min_p(l, min_p);
    const std::vector<double> p = softmax(l0);
    const double top = *std::max_element(p.begin(), p.end());
    for (size_t i = 0; i < l.size(); ++i) {
      const bool keep = p[i] >= min_p * top && l0[i] > kNegInf;
      EXPECT_EQ(l[i] > kNegInf, keep) << "min_p " << min_p << " token " << i;
      if (keep) {
        EXPECT_EQ(l[i], l0[i]);
      }
    }
  }
}

TEST(LogitProcessors, TopKKeepsTheKLargestAndTheirTies) {
  std::vector<int32_t> scratch(6);
  std::vector<float> l{0.5f, 3.0f, 1.0f, 3.0f, 2.0f, -1.0f};
  apply_top_k_top_p(l, 2, 1.0f, scratch);
  EXPECT_EQ(kept(l), (std::vector<bool>{false, true, false, true, false, false}));
  l = {0.5f, 3.0f, 2.0f, 1.0f, 2.0f, -1.0f};
  apply_top_k_top_p(l, 2, 1.0f, scratch);  // the 2nd largest (2.0) is tied: both stay
  EXPECT_EQ(kept(l), (std::vector<bool>{false, true, true, false, true, false}));
  for (int32_t k : {6, 7, 1000, 0, -1}) {  // k >= vocab or off: nothing changes
    std::vector<float> m{0.5f, 3.0f, 2.0f, 1.0f, 2.0f, -1.0f};
    apply_top_k_top_p(m, k, 1.0f, scratch);
    EXPECT_EQ(m, (std::vector<float>{0.5f, 3.0f, 2.0f, 1.0f, 2.0f, -1.0f})) << "k " << k;
  }
}

// vLLM's rule in words: a token stays when the probability of it and of every token
// smaller than it adds up to more than 1 - top_p; the largest always stays.
std::vector<bool> direct_top_p(const std::vector<float>& l, float top_p) {
  const std::vector<double> p = softmax(l);
  std::vector<bool> keep(l.size());
  for (size_t i = 0; i < l.size(); ++i) {
    double tail = 0;  // itself and the tokens after it in the (logit desc, id asc) order
    bool largest = true;
    for (size_t j = 0; j < l.size(); ++j) {
      const bool after = l[j] < l[i] || (l[j] == l[i] && j >= i);
      if (after) tail += p[j];
      if (l[j] > l[i] || (l[j] == l[i] && j < i)) largest = false;
    }
    keep[i] = l[i] > kNegInf && (largest || tail > 1.0 - top_p);
  }
  return keep;
}

TEST(LogitProcessors, TopPMatchesTheDirectRule) {
  std::vector<float> l0(50);
  for (size_t i = 0; i < l0.size(); ++i) l0[i] = float(std::sin(double(i) * 1.7) * 4.0);
  std::vector<int32_t> scratch(l0.size());
  for (float top_p : {0.05f, 0.3f, 0.55f, 0.8f, 0.95f, 0.999f}) {
    std::vector<float> l = l0;
    apply_top_k_top_p(l, 0, top_p, scratch);
    EXPECT_EQ(kept(l), direct_top_p(l0, top_p)) << "top_p " << top_p;
    // The kept set is the smallest prefix of the sorted tokens with mass >= top_p.
    const std::vector<double> p = softmax(l0);
    double mass = 0, smallest = 1;
    for (size_t i = 0; i < l.size(); ++i) {
      if (l[i] > kNegInf) mass += p[i], smallest = std::min(smallest, p[i]);
    }
    EXPECT_GE(mass, top_p);
    EXPECT_LT(mass - smallest, top_p);
  }
}

TEST(LogitProcessors, TopPKeepsAtLeastOneToken) {
  std::vector<float> l{1.0f, 5.0f, 5.0f, 2.0f};
  std::vector<int32_t> scratch(4);
  apply_top_k_top_p(l, 0, 1e-6f, scratch);
  // Equal largest logits: the lower id is the larger in the order, and it alone stays.
  EXPECT_EQ(kept(l), (std::vector<bool>{false, true, false, false}));
}

TEST(LogitProcessors, TopPRunsOnWhatTopKKept) {
  // Probabilities 0.5, 0.3, 0.2. top_k 2 renormalises to 0.625, 0.375, so top_p 0.6 drops
  // the second token (0.375 <= 0.4); top_p over the whole row would have kept it (0.5 > 0.4).
  const std::vector<float> l0{float(std::log(0.5)), float(std::log(0.3)), float(std::log(0.2))};
  std::vector<int32_t> scratch(3);
  std::vector<float> l = l0;
  apply_top_k_top_p(l, 2, 0.6f, scratch);
  EXPECT_EQ(kept(l), (std::vector<bool>{true, false, false}));
  l = l0;
  apply_top_k_top_p(l, 0, 0.6f, scratch);
  EXPECT_EQ(kept(l), (std::vector<bool>{true, true, false}));
}

TEST(LogitProcessors, AllMinusInfinityButOne) {
  std::vector<float> l{kNegInf, kNegInf, -50.0f, kNegInf};
  std::vector<int32_t> scratch(4);
  apply_min_p(l, 0.9f);
  apply_top_k_top_p(l, 1, 0.1f, scratch);
  EXPECT_EQ(kept(l), (std::vector<bool>{false, false, true, false}));
  EXPECT_EQ(argmax_logit(l), 2);
  for (double u : {0.0, 0.5, 0.999999}) EXPECT_EQ(draw_token(l, u), 2);
  EXPECT_DOUBLE_EQ(logsumexp_f64(l), -50.0);
  const std::vector<float> none(3, kNegInf);
  EXPECT_EQ(argmax_logit(none), -1);
  EXPECT_EQ(draw_token(none, 0.5), -1);
  EXPECT_EQ(logsumexp_f64(none), -std::numeric_limits<double>::infinity());
}

TEST(LogitProcessors, ArgmaxTiesGoToTheLowestId) {
  EXPECT_EQ(argmax_logit(std::vector<float>{1, 3, 2, 3, 3}), 1);
  EXPECT_EQ(argmax_logit(std::vector<float>{7, 7}), 0);
}

TEST(LogitProcessors, DrawIsTheInverseCdfInIdOrder) {
  // Weights 1, 2, 1 (ids 0, 2, 3; id 1 removed): cumulative 0.25, 0.75, 1.
  const float a = float(std::log(2.0));
  const std::vector<float> l{0.0f, kNegInf, a, 0.0f};
  EXPECT_EQ(draw_token(l, 0.0), 0);
  EXPECT_EQ(draw_token(l, 0.2499), 0);
  EXPECT_EQ(draw_token(l, 0.2501), 2);
  EXPECT_EQ(draw_token(l, 0.7499), 2);
  EXPECT_EQ(draw_token(l, 0.7501), 3);
  EXPECT_EQ(draw_token(l, std::nextafter(1.0, 0.0)), 3);
}

TEST(LogitProcessors, LogprobsMatchADirectLogSoftmax) {
  std::vector<float> l(300);
  for (size_t i = 0; i < l.size(); ++i) l[i] = float(std::cos(double(i) * 0.37) * 6.0);
  l[17] = l[42] = 9.0f;  // a tie at the top
  l[5] = kNegInf;
  long double s = 0, m = 9.0L;
  for (float v : l) s += std::exp((long double)v - m);
  const long double lse = m + std::log(s);
  EXPECT_NEAR(logsumexp_f64(l), double(lse), 1e-12);
  std::vector<IdLogprob> top(20);
  const int n = top_logprobs(l, logsumexp_f64(l), 20, top);
  ASSERT_EQ(n, 20);
  std::vector<int32_t> ids(l.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(),
            [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  for (int j = 0; j < n; ++j) {
    EXPECT_EQ(top[j].token, ids[j]) << j;
    EXPECT_NEAR(top[j].logprob, double((long double)l[ids[j]] - lse), 1e-6) << j;
  }
  EXPECT_EQ(top[0].token, 17);
  EXPECT_EQ(top[1].token, 42);
  EXPECT_EQ(logit_rank(l, 42), 2);  // equal logits share the worse rank, as vLLM's
  EXPECT_EQ(logit_rank(l, 17), 2);
  EXPECT_EQ(logit_rank(l, ids[7]), 8);
  EXPECT_EQ(top_logprobs(std::vector<float>{0, 1}, 0.0, 20, top), 2);  // n above the vocabulary
}

TEST(PenaltyState, CountsAndAppliesVllmPenalties) {
  const std::vector<int32_t> prompt{3, 3, 5};
  PenaltyState st;
  st.reset(8, prompt, 16);
  for (int32_t t : {1, 1, 1, 5, 6}) st.accept(t);
  EXPECT_EQ(st.output_length(), 5);
  EXPECT_EQ(st.output_count(1), 3);
  EXPECT_EQ(st.output_count(3), 0);
  EXPECT_TRUE(st.seen(3));
  EXPECT_FALSE(st.seen(0));
  EXPECT_EQ(std::vector<int32_t>(st.seen_tokens().begin(), st.seen_tokens().end()),
            (std::vector<int32_t>{3, 5, 1, 6}));
  const std::vector<float> l0{2.0f, 2.0f, -2.0f, 3.0f, -1.0f, 0.5f, 4.0f, 1.0f};
  std::vector<float> l = l0;
  const float rep = 1.3f, freq = 0.4f, pres = 0.7f;
  st.apply(l, rep, freq, pres);
  for (int32_t id = 0; id < 8; ++id) {
    float want = l0[id];
    if (st.seen(id)) want = want > 0 ? want / rep : want * rep;  // prompt or output
    const int32_t c = st.output_count(id);                       // output only
    if (c > 0) {
      want -= freq * float(c);
      want -= pres;
    }
    EXPECT_EQ(l[id], want) << "token " << id;
  }
  EXPECT_EQ(l[0], 2.0f);         // never seen
  EXPECT_EQ(l[3], 3.0f / 1.3f);  // prompt only: repetition, no presence/frequency
  EXPECT_NE(l[6], 4.0f / 1.3f);  // output: all three
}

}  // namespace
}  // namespace parley
