// matmul_masked_top1 (ops/reduce.h) on every built device against the two ops it stands for,
// run one after the other on the same device: matmul, then masked_topk with the advance. On
// CUDA with 16-bit weights the product and the choice share the one-row GEMM's launch, so
// these cases check the segments' ranking and the merge: the logits bit for bit, the same
// choice and advance, the log-probability within f32 summation order.
#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "engine/ops/matmul.h"
#include "engine/ops/reduce.h"
#include "op_test_util.h"

namespace parley::test {
namespace {

constexpr int kWidth = 7;  // a rule row: split and three ranges

struct Top1Case {
  int64_t n = 0, k = 0;
  bool norm = false;
  bool mask = false;
  std::vector<int32_t> rule = std::vector<int32_t>(kWidth, 0);
  float tail_bias = 0.0f;  // added from the split on (the timestamps' side)
  int64_t distinct = 0;    // > 0: w's rows repeat every `distinct` rows (tied logits)
  std::vector<int32_t> state = {1, -1, -1};
};

class MatmulMaskedTop1 : public OpTest {
 protected:
  void run(const Top1Case& tc) {
    SCOPED_TRACE("n " + std::to_string(tc.n) + " k " + std::to_string(tc.k) + " norm " +
                 std::to_string(tc.norm) + " split " + std::to_string(tc.rule[0]));
    const HostTensor a = random({1, tc.k}, -2.0f, 2.0f);
    HostTensor w = random({tc.n, tc.k});
    if (tc.distinct > 0) {
      std::vector<float> rows(w.v);
      for (int64_t j = tc.distinct; j < tc.n; ++j)
        std::copy_n(w.v.begin() + (j % tc.distinct) * tc.k, tc.k, rows.begin() + j * tc.k);
      w = host_tensor(rows, {tc.n, tc.k}, dtype());
    }
    std::vector<float> bias(size_t(tc.n), 0.0f);
    const int64_t split = tc.rule[0] > 0 ? tc.rule[0] : tc.n;
    for (int64_t j = split; j < tc.n; ++j) bias[size_t(j)] = tc.tail_bias;
    Tensor mask = Tensor::zeros({tc.n}, DType::i8);
    if (tc.mask)
      for (int64_t j = 3; j < tc.n; j += 5) mask.data<int8_t>()[j] = 1;
    Tensor rules = Tensor::empty({1, kWidth}, DType::i32);
    std::copy(tc.rule.begin(), tc.rule.end(), rules.data<int32_t>());
    Tensor state = Tensor::empty({1, 3}, DType::i32);
    std::copy(tc.state.begin(), tc.state.end(), state.data<int32_t>());

    Tensor da = dev(a.t), dw = dev(w.t), dbias = dev(host_tensor(bias, {tc.n}, DType::f32).t);
    Tensor dmask = dev(mask), drules = dev(rules), dstate = dev(state);
    Tensor gamma = dev(random({tc.k}, 0.5f, 1.5f).t), shift = dev(random({tc.k}, -0.5f, 0.5f).t);
    Tensor w_gamma = out({tc.n}, DType::f32), w_shift = out({tc.n}, DType::f32);
    Tensor scratch = out({1, tc.k});
    fold_layer_norm(dw, gamma, shift, w_gamma, w_shift);
    const NormInput norm{&gamma, &shift, 1e-5f, &w_gamma, &w_shift, &scratch};
    MatmulOptions opt;
    opt.trans_b = true;
    opt.bias = &dbias;
    opt.norm = tc.norm ? &norm : nullptr;
    const TimestampRuleParams grammar{kEot, int32_t(split)};

    struct Out {
      Tensor logits, lp, ids, next, token, rule;
    };
    const auto outputs = [&] {
      return Out{out({1, tc.n}, DType::f32), out({1, 1}, DType::f32), out({1, 1}, DType::i32),
                 out({1, 3}, DType::i32),    out({1}, DType::i32),    out({1, kWidth}, DType::i32)};
    };
    Out want = outputs(), got = outputs();
    const TimestampRuleAdvance want_adv{&dstate, &want.next, &want.token, &want.rule, grammar};
    matmul(da, dw, want.logits, opt);
    masked_topk(want.logits, tc.mask ? &dmask : nullptr, drules, 1, want.lp, want.ids, &want_adv);
    const TimestampRuleAdvance got_adv{&dstate, &got.next, &got.token, &got.rule, grammar};
    // Twice: each call writes every partial anew, so the second gives the same.
    for (int call = 0; call < 2; ++call)
      matmul_masked_top1(da, dw, got.logits, opt, tc.mask ? &dmask : nullptr, drules, got.lp,
                         got.ids, &got_adv);

    const std::vector<float> want_logits = read_floats(want.logits);
    expect_close(read_floats(got.logits),
                 std::vector<double>(want_logits.begin(), want_logits.end()), {0.0, 0.0}, "logits");
    EXPECT_EQ(read_i32(got.ids), read_i32(want.ids));
    const std::vector<float> want_lp = read_floats(want.lp);
    expect_close(read_floats(got.lp), std::vector<double>(want_lp.begin(), want_lp.end()),
                 {1e-5, 1e-5}, "logprob");
    EXPECT_EQ(read_i32(got.next), read_i32(want.next));
    EXPECT_EQ(read_i32(got.token), read_i32(want.token));
    EXPECT_EQ(read_i32(got.rule), read_i32(want.rule));
    chosen_.push_back(read_i32(got.ids)[0]);
  }

  static constexpr int32_t kEot = 50;
  std::vector<int32_t> chosen_;
};

TEST_P(MatmulMaskedTop1, MatchesTheProductThenMaskedTopK) {
  const int32_t s = 51866 - 1501;  // Whisper's vocabulary: 1501 timestamps at the end
  // Timestamps likelier together than any text token: the head is dropped.
  run({.n = 51866,
       .k = 1280,
       .norm = true,
       .mask = true,
       .rule = {s, 0, 0, 0, 0, 0, 0},
       .tail_bias = 6.0f});
  // Timestamps unlikely: the head kept; a range bans text, another the early timestamps.
  run({.n = 51866,
       .k = 1280,
       .norm = true,
       .mask = true,
       .rule = {s, 100, 20000, s, s + 40, 0, 0},
       .tail_bias = -6.0f});
  // No split, no norm, a range to the end of the row (INT32_MAX), a short K slice.
  run({.n = 4099, .k = 384, .rule = {0, 1000, INT32_MAX, 0, 0, 0, 0}});
  // A row short enough that every block splits K (few outputs a block), K = 5120.
  run({.n = 100, .k = 5120, .norm = true, .mask = true, .rule = {80, 0, 10, 0, 0, 0, 0}});
  // Tied logits in many blocks: the lowest index of the best wins.
  run({.n = 6000, .k = 256, .rule = {5000, 0, 0, 0, 0, 0, 0}, .distinct = 37});
  // Everything banned: masked_topk's choice among -inf (index 0) and its -inf log-probability.
  run({.n = 3000, .k = 64, .rule = {0, 0, INT32_MAX, 0, 0, 0, 0}});
  // The grammar off (state on = 0).
  run({.n = 3000, .k = 64, .mask = true, .rule = {2000, 0, 0, 0, 0, 0, 0}, .state = {0, -1, -1}});
  // The cases chose different tokens: the test sees more than one choice.
  std::sort(chosen_.begin(), chosen_.end());
  EXPECT_GE(std::unique(chosen_.begin(), chosen_.end()) - chosen_.begin(), 4);
}

// Both ops' checks run before anything is launched.
TEST_P(MatmulMaskedTop1, RejectsBadArguments) {
  Tensor a = dev(random({1, 64}).t), w = dev(random({300, 64}).t);
  Tensor logits = out({1, 300}, DType::f32), lp = out({1, 1}, DType::f32),
         ids = out({1, 1}, DType::i32);
  Tensor rules = dev(Tensor::zeros({1, kWidth}, DType::i32));
  MatmulOptions opt;
  opt.trans_b = true;
  const auto call = [&](Tensor& l, const Tensor& r, Tensor& p, Tensor& i, const MatmulOptions& o) {
    matmul_masked_top1(a, w, l, o, nullptr, r, p, i);
  };
  Tensor two_rows = out({2, 300}, DType::f32);
  expect_error([&] { call(two_rows, rules, lp, ids, opt); }, {"[matmul_masked_top1]", "one row"});
  MatmulOptions no_trans = opt;
  no_trans.trans_b = false;
  expect_error([&] { call(logits, rules, lp, ids, no_trans); }, {"[matmul_masked_top1]"});
  Tensor even_rules = dev(Tensor::zeros({1, 6}, DType::i32));
  expect_error([&] { call(logits, even_rules, lp, ids, opt); }, {"[matmul_masked_top1]", "rules"});
  Tensor lp2 = out({1, 2}, DType::f32);
  expect_error([&] { call(logits, rules, lp2, ids, opt); }, {"[matmul_masked_top1]", "logprobs"});
  Tensor lp_in_logits = logits.slice0(0, 1).reshape({300}).slice0(0, 1).reshape({1, 1});
  expect_error([&] { call(logits, rules, lp_in_logits, ids, opt); },
               {"[matmul_masked_top1]", "share memory"});
}

INSTANTIATE_TEST_SUITE_P(Ops, MatmulMaskedTop1, ::testing::ValuesIn(op_params()), op_param_name);

}  // namespace
}  // namespace parley::test
