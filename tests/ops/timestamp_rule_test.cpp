// advance_timestamp_rule (ops/timestamp_rule.h) on every built device against a plain reading
// of its definition written here, for several sequences at once and rule widths 5 to 9; and
// its argument checks; masked_topk's advance (ops/reduce.h) against masked_topk then this op.
// (tests/whisper/greedy_chain_test.cpp holds it to the whisper layer's
// ApplyTimestampRules::add_rule.)
#include <climits>
#include <vector>

#include "engine/ops/reduce.h"
#include "engine/ops/timestamp_rule.h"
#include "op_test_util.h"

namespace parley::test {
namespace {

constexpr int32_t kEot = 100, kTb = 200;  // a small vocabulary: text < 100 < 200 <= timestamps

// One sequence: the state after `chosen` and the rule row of width w.
void reference(int32_t chosen, const int32_t* s, std::vector<int32_t>& state,
               std::vector<int32_t>& rule, int w) {
  const bool on = s[0] != 0;
  const int32_t last = s[1];
  const int32_t last_ts = chosen >= kTb ? chosen : s[2];
  state = {s[0], chosen, last_ts};
  rule.assign(size_t(w), 0);
  if (!on) return;
  std::vector<std::pair<int32_t, int32_t>> ranges;
  const bool open = chosen >= kTb && last >= 0 && last < kTb;  // a timestamp after text
  if (chosen >= kTb) ranges.push_back(open ? std::pair{0, kEot} : std::pair{kTb, INT32_MAX});
  if (last_ts >= 0) ranges.push_back({kTb, open ? last_ts : last_ts + 1});
  rule[0] = kTb;
  int n = 0;
  for (auto [b, e] : ranges) {
    if (b >= e) continue;
    rule[size_t(1 + 2 * n)] = b;
    rule[size_t(2 + 2 * n)] = e;
    ++n;
  }
}

class AdvanceTimestampRule : public OpTest {
 protected:
  void SetUp() override {
    OpTest::SetUp();
    if (dtype() != DType::f32) GTEST_SKIP() << "i32 only: run once per device";
  }
  int32_t random_token() {
    const int64_t kind = uniform_int(0, 3);
    if (kind == 0) return int32_t(uniform_int(0, kEot));     // text or eot
    if (kind == 1) return int32_t(kTb + uniform_int(0, 1));  // the first timestamps
    return int32_t(kTb + uniform_int(0, 50));
  }
};

TEST_P(AdvanceTimestampRule, MatchesItsDefinition) {
  for (int w : {5, 7, 9}) {
    SCOPED_TRACE("width " + std::to_string(w));
    const int64_t n = 37;
    Tensor chosen = Tensor::empty({n, 1}, DType::i32), state = Tensor::empty({n, 3}, DType::i32);
    for (int64_t r = 0; r < n; ++r) {
      chosen.data<int32_t>()[r] = random_token();
      int32_t* s = state.data<int32_t>() + r * 3;
      s[0] = int32_t(uniform_int(0, 3) != 0);
      s[1] = uniform_int(0, 4) == 0 ? -1 : random_token();
      s[2] = uniform_int(0, 2) == 0 ? -1 : int32_t(kTb + uniform_int(0, 50));
    }
    Tensor next = out({n, 3}, DType::i32), tokens = out({n}, DType::i32),
           rules = out({n, w}, DType::i32);
    advance_timestamp_rule(dev(chosen), dev(state), next, tokens, rules, {kEot, kTb});
    const std::vector<int32_t> got_next = read_i32(next), got_tokens = read_i32(tokens),
                               got_rules = read_i32(rules);
    std::vector<int32_t> want_state, want_rule;
    for (int64_t r = 0; r < n; ++r) {
      reference(chosen.data<int32_t>()[r], state.data<int32_t>() + r * 3, want_state, want_rule, w);
      EXPECT_EQ(got_tokens[size_t(r)], chosen.data<int32_t>()[r]);
      EXPECT_EQ(std::vector<int32_t>(got_next.begin() + r * 3, got_next.begin() + r * 3 + 3),
                want_state)
          << "row " << r;
      EXPECT_EQ(std::vector<int32_t>(got_rules.begin() + r * w, got_rules.begin() + (r + 1) * w),
                want_rule)
          << "row " << r;
    }
  }
}

TEST_P(AdvanceTimestampRule, RejectsBadArguments) {
  auto i32 = [&](const Shape& s) { return Tensor::zeros(s, DType::i32, device()); };
  Tensor chosen = i32({2}), state = i32({2, 3}), next = i32({2, 3}), tokens = i32({2}),
         rules = i32({2, 9});
  const TimestampRuleParams p{kEot, kTb};
  const char* op = "[advance_timestamp_rule]";
  Tensor wide = i32({2, 4});
  expect_error([&] { advance_timestamp_rule(chosen, wide, next, tokens, rules, p); },
               {op, "state"});
  Tensor narrow = i32({2, 3});
  expect_error([&] { advance_timestamp_rule(chosen, state, next, tokens, narrow, p); },
               {op, "rules"});
  Tensor three = i32({3});
  expect_error([&] { advance_timestamp_rule(three, state, next, tokens, rules, p); },
               {op, "chosen"});
  expect_error([&] { advance_timestamp_rule(chosen, state, state, tokens, rules, p); },
               {op, "overlaps"});
  expect_error(
      [&] {
        advance_timestamp_rule(chosen, state, next, tokens, rules, {kTb, kEot});
      },
      {op, "eot"});
  Tensor f = Tensor::zeros({2}, DType::f32, device());
  expect_error([&] { advance_timestamp_rule(f, state, next, tokens, rules, p); }, {op, "chosen"});
}

// masked_topk with `advance` gives what masked_topk then advance_timestamp_rule give, over
// rows of 5000 logits (several segments on CUDA), with and without a split and ranges, the
// grammar on and off, and a row whose every logit is masked (all -inf: index 0, NaN).
TEST_P(AdvanceTimestampRule, MaskedTopKAdvancesInTheSameCall) {
  const int64_t n = 6, v = 5000, w = 7;
  const HostTensor x = random({n, v}, DType::f32, -4.0f, 4.0f);
  Tensor mask = Tensor::zeros({v}, DType::i8);
  for (int64_t i = 0; i < v; i += 7) mask.data<int8_t>()[i] = 1;
  Tensor rules = Tensor::zeros({n, w}, DType::i32), state = Tensor::empty({n, 3}, DType::i32);
  for (int64_t r = 0; r < n; ++r) {
    int32_t* rule = rules.data<int32_t>() + r * w;
    if (r % 2 == 1) {  // split at the timestamps, text banned below eot, timestamps up to 300
      rule[0] = kTb;
      rule[1] = 0;
      rule[2] = kEot;
      rule[3] = 300;
      rule[4] = INT32_MAX;
    }
    if (r == n - 1) {  // everything banned
      rule[1] = 0;
      rule[2] = INT32_MAX;
    }
    int32_t* st = state.data<int32_t>() + r * 3;
    st[0] = int32_t(r % 3 != 0);
    st[1] = r % 2 == 0 ? -1 : int32_t(kTb + r);
    st[2] = r < 2 ? -1 : int32_t(kTb + 2 * r);
  }
  const Tensor dx = dev(x.t), dmask = dev(mask), drules = dev(rules), dstate = dev(state);
  const TimestampRuleParams p{kEot, kTb};
  Tensor lp1 = out({n, 1}, DType::f32), id1 = out({n, 1}, DType::i32);
  Tensor next1 = out({n, 3}, DType::i32), tok1 = out({n}, DType::i32),
         rule1 = out({n, w}, DType::i32);
  masked_topk(dx, &dmask, drules, 1, lp1, id1);
  advance_timestamp_rule(id1, dstate, next1, tok1, rule1, p);
  Tensor lp2 = out({n, 1}, DType::f32), id2 = out({n, 1}, DType::i32);
  Tensor next2 = out({n, 3}, DType::i32), tok2 = out({n}, DType::i32),
         rule2 = out({n, w}, DType::i32);
  const TimestampRuleAdvance advance{&dstate, &next2, &tok2, &rule2, p};
  masked_topk(dx, &dmask, drules, 1, lp2, id2, &advance);
  EXPECT_EQ(read_i32(id2), read_i32(id1));
  const std::vector<float> want_lp = read_floats(lp1);
  expect_close(read_floats(lp2), std::vector<double>(want_lp.begin(), want_lp.end()), {0.0, 0.0},
               "logprobs");
  EXPECT_EQ(read_i32(next2), read_i32(next1));
  EXPECT_EQ(read_i32(tok2), read_i32(tok1));
  EXPECT_EQ(read_i32(rule2), read_i32(rule1));
  // k must be 1; the outputs must not overlap the inputs.
  Tensor lp3 = out({n, 2}, DType::f32), id3 = out({n, 2}, DType::i32);
  expect_error([&] { masked_topk(dx, &dmask, drules, 2, lp3, id3, &advance); },
               {"[masked_topk]", "k = 1"});
  Tensor rules_copy = dev(rules);
  const TimestampRuleAdvance onto_rules{&dstate, &next2, &tok2, &rules_copy, p};
  expect_error([&] { masked_topk(dx, &dmask, rules_copy, 1, lp2, id2, &onto_rules); },
               {"[masked_topk]", "overlaps"});
}

INSTANTIATE_TEST_SUITE_P(Ops, AdvanceTimestampRule, ::testing::ValuesIn(op_params()),
                         op_param_name);

}  // namespace
}  // namespace parley::test
