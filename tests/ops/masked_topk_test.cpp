// masked_topk (ops/reduce.h) on every built device against a plain f64 reading of its
// definition written here: the mask, the ranges, the split rule, log_softmax and the order.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "engine/ops/reduce.h"
#include "op_test_util.h"

namespace parley::test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Want {
  std::vector<int32_t> indices;
  std::vector<double> logprobs;
};

double lse_of(const std::vector<double>& v, size_t begin, size_t end) {
  double m = -kInf;
  for (size_t i = begin; i < end; ++i) m = std::max(m, v[i]);
  if (std::isinf(m)) return m;
  double s = 0;
  for (size_t i = begin; i < end; ++i) s += std::exp(v[i] - m);
  return m + std::log(s);
}

// One row: x [V], mask [V] (empty: none), rule (P, b0, e0, ...).
Want reference(const float* x, int64_t v, const std::vector<int8_t>& mask,
               const std::vector<int32_t>& rule, int k) {
  std::vector<double> row(x, x + v);
  for (int64_t i = 0; i < v; ++i)
    if (!mask.empty() && mask[size_t(i)]) row[size_t(i)] = -kInf;
  for (size_t j = 1; j + 1 < rule.size(); j += 2)
    for (int64_t i = std::max<int64_t>(rule[j], 0); i < std::min<int64_t>(rule[j + 1], v); ++i)
      row[size_t(i)] = -kInf;
  const size_t split = size_t(std::clamp<int64_t>(rule[0], 0, v));
  if (split > 0) {
    const double head = *std::max_element(row.begin(), row.begin() + int64_t(split));
    if (lse_of(row, split, size_t(v)) > head)
      std::fill(row.begin(), row.begin() + int64_t(split), -kInf);
  }
  const double lse = lse_of(row, 0, size_t(v));
  std::vector<int32_t> order(static_cast<size_t>(v));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return row[size_t(a)] > row[size_t(b)]; });
  Want w;
  for (int j = 0; j < k; ++j) {
    w.indices.push_back(order[size_t(j)]);
    w.logprobs.push_back(row[size_t(order[size_t(j)])] - lse);
  }
  return w;
}

class MaskedTopK : public OpTest {
 protected:
  void SetUp() override {
    OpTest::SetUp();
    // x is f32 whatever the dtype parameter: run once per device.
    if (dtype() != DType::f32) GTEST_SKIP() << "masked_topk takes f32 logits only";
  }

  // rows x v logits on a coarse grid (many ties); `low_tail`: values from `tail_from` on are
  // far below the rest, so the split rule keeps the head.
  std::vector<float> logits(int64_t rows, int64_t v, int64_t tail_from, bool low_tail) {
    std::vector<float> x(size_t(rows * v));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < v; ++i)
        x[size_t(r * v + i)] =
            float(uniform_int(-16, 16)) * 0.25f - (low_tail && i >= tail_from ? 20.0f : 0.0f);
    return x;
  }

  void check(const std::vector<float>& x, int64_t rows, int64_t v, const std::vector<int8_t>& mask,
             const std::vector<std::vector<int32_t>>& rules, int k) {
    const int64_t width = int64_t(rules[0].size());
    std::vector<int32_t> flat;
    for (const auto& r : rules) flat.insert(flat.end(), r.begin(), r.end());
    Tensor xt = Tensor::empty({rows, v}, DType::f32);
    std::copy(x.begin(), x.end(), xt.data<float>());
    Tensor rt = Tensor::empty({rows, width}, DType::i32);
    std::copy(flat.begin(), flat.end(), rt.data<int32_t>());
    Tensor mt;
    if (!mask.empty()) {
      mt = Tensor::empty({v}, DType::i8);
      std::copy(mask.begin(), mask.end(), mt.data<int8_t>());
      mt = dev(mt);
    }
    Tensor lp = out({rows, k}, DType::f32), idx = out({rows, k}, DType::i32);
    masked_topk(dev(xt), mask.empty() ? nullptr : &mt, dev(rt), k, lp, idx);
    const std::vector<float> got_lp = read_floats(lp);
    const std::vector<int32_t> got_i = read_i32(idx);
    std::vector<double> want_lp;
    for (int64_t r = 0; r < rows; ++r) {
      const Want w = reference(&x[size_t(r * v)], v, mask, rules[size_t(r)], k);
      for (int j = 0; j < k; ++j)
        EXPECT_EQ(got_i[size_t(r * k + j)], w.indices[size_t(j)]) << "row " << r << " rank " << j;
      want_lp.insert(want_lp.end(), w.logprobs.begin(), w.logprobs.end());
    }
    // The CPU's logsumexp is f64 like the reference; CUDA's is f32.
    expect_close(got_lp, want_lp, {2e-5, 2e-6}, "logprobs");
  }
};

TEST_P(MaskedTopK, MaskRangesAndSplit) {
  const int64_t rows = 5, v = 3000, split = 2500;
  const std::vector<float> x = logits(rows, v, split, /*low_tail=*/false);
  std::vector<int8_t> mask(size_t(v), 0);
  for (int i = 0; i < 60; ++i) mask[size_t(uniform_int(0, v - 1))] = 1;
  const std::vector<std::vector<int32_t>> rules = {
      {0, 10, 20, 0, 0, 0, 0},                // no split; one range
      {split, 0, 0, 5, 1, 0, 0},              // the tail wins: only values from `split` on
      {split, 0, split, 0, 0, 0, 0},          // the head fully masked
      {split, split, v + 7, 0, 0, 0, 0},      // the tail masked (a range past V is clamped)
      {v + 5, 100, 3000, -4, 2, 2999, 3001},  // split beyond V: no tail, never dropped
  };
  for (int k : {1, 2, 6, 9, 17}) {
    SCOPED_TRACE("k " + std::to_string(k));
    check(x, rows, v, mask, rules, k);
  }
}

TEST_P(MaskedTopK, HeadKeptWhenTheTailIsUnlikely) {
  const int64_t rows = 3, v = 2000, split = 1800;
  const std::vector<float> x = logits(rows, v, split, /*low_tail=*/true);
  const std::vector<std::vector<int32_t>> rules = {{split}, {split}, {0}};
  check(x, rows, v, {}, rules, 3);
}

TEST_P(MaskedTopK, WhisperSizedVocabulary) {
  // One row as long as Whisper's multilingual vocabulary, timestamps from 50365 on.
  const int64_t v = 51866, split = 50365;
  std::vector<float> x = logits(1, v, split, /*low_tail=*/false);
  x[123] = 9.0f;  // the best text token, far above the rest
  for (int k : {4, 6, 12}) check(x, 1, v, {}, {{split, 50257, 50258, 0, 0}}, k);
}

TEST_P(MaskedTopK, ContinuousValuesFewFiniteAndAllTied) {
  // CUDA selects k >= 2 by a bound and a ranking of what passes it, and takes the rounds where
  // that cannot work: a part with fewer than k finite values, or too many tied at the bound.
  // Rows of 51866: continuous values (few ties); a few large values in one segment; one
  // segment holding only 3 finite values; every value equal.
  const int64_t rows = 4, v = 51866, split = 50365;
  std::vector<float> x(size_t(rows * v));
  for (auto& f : x) f = uniform(-8.0f, 8.0f);
  for (int i = 0; i < 40; ++i) x[size_t(1 * v + 4096 + i * 7)] = 30.0f + float(i % 5);
  std::vector<int8_t> mask(size_t(v), 0);
  std::fill(mask.begin() + 2048, mask.begin() + 4096, int8_t(1));  // one segment of CUDA's
  for (int64_t i : {2100, 3000, 4000}) mask[size_t(i)] = 0;
  std::fill(x.begin() + 3 * v, x.end(), 1.5f);
  const std::vector<std::vector<int32_t>> rules = {{int32_t(split), 50257, 50258},
                                                   {int32_t(split), 0, 0},
                                                   {0, 50257, 50258},
                                                   {int32_t(split), 0, 0}};
  for (int k : {2, 5, 6, 11, 32, 33}) {
    SCOPED_TRACE("k " + std::to_string(k));
    check(x, rows, v, mask, rules, k);
  }
}

TEST_P(MaskedTopK, RepeatedCallsStartClean) {
  // CUDA merges each row in the row's last segment block to finish, found with a counter
  // per row that the call must leave at zero: a counter left behind would make the next call
  // (same rows, then more, then fewer) skip the merge and leave its outputs unwritten.
  const int64_t v = 5000, split = 4500;  // 3 segments of CUDA's 2048
  for (int64_t rows : {3, 3, 7, 2}) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    const std::vector<float> x = logits(rows, v, split, /*low_tail=*/false);
    const std::vector<std::vector<int32_t>> rules(size_t(rows), {int32_t(split), 10, 20});
    check(x, rows, v, {}, rules, 2);
  }
}

TEST_P(MaskedTopK, RejectsBadArguments) {
  Tensor x = Tensor::zeros({2, 10}, DType::f32, device());
  Tensor rules = Tensor::zeros({2, 3}, DType::i32, device());
  Tensor lp = Tensor::zeros({2, 1}, DType::f32, device()),
         idx = Tensor::zeros({2, 1}, DType::i32, device());
  expect_error([&] { masked_topk(x, nullptr, rules, 0, lp, idx); }, {"[masked_topk]", "k = 0"});
  Tensor even = Tensor::zeros({2, 4}, DType::i32, device());
  expect_error([&] { masked_topk(x, nullptr, even, 1, lp, idx); }, {"[masked_topk]", "rules"});
  Tensor mask = Tensor::zeros({9}, DType::i8, device());
  expect_error([&] { masked_topk(x, &mask, rules, 1, lp, idx); }, {"[masked_topk]", "mask"});
}

INSTANTIATE_TEST_SUITE_P(Ops, MaskedTopK, ::testing::ValuesIn(op_params()), op_param_name);

}  // namespace
}  // namespace parley::test
