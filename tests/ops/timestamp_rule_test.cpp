// advance_timestamp_rule (ops/timestamp_rule.h) on every built device against a plain reading
// of its definition written here, for several sequences at once and rule widths 5 to 9; and
// its argument checks. (tests/whisper/greedy_chain_test.cpp holds it to the whisper layer's
// ApplyTimestampRules::add_rule.)
#include <climits>
#include <vector>

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

INSTANTIATE_TEST_SUITE_P(Ops, AdvanceTimestampRule, ::testing::ValuesIn(op_params()),
                         op_param_name);

}  // namespace
}  // namespace parley::test
