// beam_step and copy_slot_rows (ops/beam_step.h) on every built device against a plain
// reading of their definitions written here: openai-whisper's BeamSearchDecoder.update over
// distinct rows (a stable sort of the candidates), the slot rule of WhisperSession::
// reorder_rows, and advance_timestamp_rule (held to its own definition in
// timestamp_rule_test.cpp) of each row's source state; with tied scores, -inf and NaN scores,
// <|endoftext|> candidates and the finished list's limit. And their argument checks.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "engine/ops/beam_step.h"
#include "op_test_util.h"

namespace parley::test {
namespace {

constexpr int32_t kEot = 100, kTb = 200;
constexpr int kWidth = 9;
constexpr int32_t kStride = 50, kNext = 7;

struct Want {
  std::vector<int32_t> source, tokens, slots, copy_from, cache_rows, states, rules;
  std::vector<float> sums;
  std::vector<std::pair<int32_t, float>> finished;
  int32_t finished_count = 0;
  bool completed = false;
};

// m candidate rows (m = n, or 1: the first step, all n rows one sequence) for n rows.
Want reference(const std::vector<int32_t>& ids, const std::vector<float>& lp, int m, int n, int k,
               const std::vector<float>& sums, const std::vector<int32_t>& slots,
               const std::vector<int32_t>& states, int32_t finished, int32_t max_finished) {
  struct Cand {
    int row;
    int32_t token;
    float score;
  };
  std::vector<Cand> cands;
  for (int r = 0; r < m; ++r)
    for (int j = 0; j < k; ++j) {
      const float s = sums[size_t(r)] + lp[size_t(r * k + j)];
      cands.push_back({r, ids[size_t(r * k + j)], std::isnan(s) ? -INFINITY : s});
    }
  std::stable_sort(cands.begin(), cands.end(),
                   [](const Cand& a, const Cand& b) { return a.score > b.score; });
  Want w;
  w.finished_count = finished;
  for (const Cand& c : cands) {
    if (c.token == kEot) {
      if (w.finished_count < max_finished) {
        w.finished.push_back({c.row, c.score});
        ++w.finished_count;
      }
      continue;
    }
    w.source.push_back(c.row);
    w.tokens.push_back(c.token);
    w.sums.push_back(c.score);
    if (int(w.source.size()) == n) break;
  }
  w.completed = w.finished_count >= max_finished;
  // reorder_rows' rule.
  std::vector<char> taken(size_t(n), 0);
  w.slots.assign(size_t(n), -1);
  w.copy_from.assign(size_t(n), -1);
  for (int i = 0; i < n; ++i) {
    const int32_t s = slots[size_t(w.source[size_t(i)])];
    if (!taken[size_t(s)]) {
      taken[size_t(s)] = 1;
      w.slots[size_t(i)] = s;
    }
  }
  int32_t free_slot = 0;
  for (int i = 0; i < n; ++i) {
    if (w.slots[size_t(i)] >= 0) continue;
    while (taken[size_t(free_slot)]) ++free_slot;
    taken[size_t(free_slot)] = 1;
    w.slots[size_t(i)] = free_slot;
    w.copy_from[size_t(i)] = slots[size_t(w.source[size_t(i)])];
  }
  for (int i = 0; i < n; ++i) w.cache_rows.push_back(w.slots[size_t(i)] * kStride + kNext);
  // The grammar: the CPU op on the sources' states.
  Tensor chosen = Tensor::empty({n}, DType::i32), state = Tensor::empty({n, 3}, DType::i32);
  for (int i = 0; i < n; ++i) {
    chosen.data<int32_t>()[i] = w.tokens[size_t(i)];
    std::copy_n(states.begin() + w.source[size_t(i)] * 3, 3, state.data<int32_t>() + i * 3);
  }
  Tensor next = Tensor::empty({n, 3}, DType::i32), toks = Tensor::empty({n}, DType::i32),
         rules = Tensor::empty({n, kWidth}, DType::i32);
  advance_timestamp_rule(chosen, state, next, toks, rules, {kEot, kTb});
  w.states = read_i32(next);
  w.rules = read_i32(rules);
  return w;
}

float from_bits(int32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

class BeamStep : public OpTest {
 protected:
  void SetUp() override {
    OpTest::SetUp();
    if (dtype() != DType::f32) GTEST_SKIP() << "i32 and f32 only: run once per device";
  }
  Tensor i32(const std::vector<int32_t>& v, const Shape& s) {
    Tensor t = Tensor::empty(s, DType::i32);
    std::copy(v.begin(), v.end(), t.data<int32_t>());
    return dev(t);
  }
  Tensor f32(const std::vector<float>& v, const Shape& s) {
    Tensor t = Tensor::empty(s, DType::f32);
    std::copy(v.begin(), v.end(), t.data<float>());
    return dev(t);
  }
};

TEST_P(BeamStep, MatchesTheReferenceUpdate) {
  for (int trial = 0; trial < 80; ++trial) {
    const int n = trial % 10 < 8 ? int(uniform_int(1, 8)) : int(uniform_int(9, 31));
    // Every fourth trial a first step: one row of candidates for the n rows (k > n then, so
    // that n of them are not <|endoftext|>).
    const int m = trial % 4 == 3 ? 1 : n;
    const int k = m == 1 || trial % 3 == 0 ? n + 1 : int(uniform_int(2, std::min(2 * n + 2, 32)));
    SCOPED_TRACE("trial " + std::to_string(trial) + " m " + std::to_string(m) + " n " +
                 std::to_string(n) + " k " + std::to_string(k));
    // Each row's k distinct ids, <|endoftext|> among them at times, best first.
    std::vector<int32_t> ids;
    std::vector<float> lp;
    for (int r = 0; r < m; ++r) {
      std::vector<int32_t> row;
      if (uniform_int(0, 2) == 0) row.push_back(kEot);
      while (int(row.size()) < k) {
        const int32_t t = uniform_int(0, 3) == 0 ? int32_t(kTb + uniform_int(0, 40))
                                                 : int32_t(uniform_int(0, kEot - 1));
        if (std::find(row.begin(), row.end(), t) == row.end()) row.push_back(t);
      }
      std::vector<float> v;
      for (int j = 0; j < k; ++j) {
        const int64_t kind = uniform_int(0, 19);
        // Coarse values tie often; -inf is a masked candidate; NaN counts as -inf.
        v.push_back(kind == 0 ? -INFINITY : kind == 1 ? NAN : -0.25f * float(uniform_int(0, 12)));
      }
      std::stable_sort(v.begin(), v.end(), [](float a, float b) {
        return (std::isnan(a) ? -INFINITY : a) > (std::isnan(b) ? -INFINITY : b);
      });
      std::shuffle(row.begin(), row.end(), rng_);
      ids.insert(ids.end(), row.begin(), row.end());
      lp.insert(lp.end(), v.begin(), v.end());
    }
    std::vector<float> sums;
    for (int r = 0; r < m; ++r) sums.push_back(-0.5f * float(uniform_int(0, 6)));
    std::vector<int32_t> slots(static_cast<size_t>(m));
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng_);
    std::vector<int32_t> states;
    for (int r = 0; r < m; ++r) {
      states.push_back(int32_t(uniform_int(0, 3) != 0));
      states.push_back(uniform_int(0, 3) == 0 ? -1 : int32_t(uniform_int(0, kTb + 40)));
      states.push_back(uniform_int(0, 2) == 0 ? -1 : int32_t(kTb + uniform_int(0, 40)));
    }
    const int32_t max_finished = int32_t(uniform_int(1, n + 2));
    const int32_t finished = int32_t(uniform_int(0, max_finished - 1));
    const Want w = reference(ids, lp, m, n, k, sums, slots, states, finished, max_finished);

    const BeamStepIn in{f32(sums, {m}), i32(slots, {m}), i32(states, {m, 3}), i32({finished}, {1})};
    BeamStepOut o{out({n}, DType::i32),
                  out({n}, DType::f32),
                  out({n}, DType::i32),
                  out({n}, DType::i32),
                  out({n}, DType::i32),
                  out({n, 3}, DType::i32),
                  out({n, kWidth}, DType::i32),
                  out({1}, DType::i32),
                  out({beam_record_width(n)}, DType::i32)};
    BeamStepParams p;
    p.max_finished = max_finished;
    p.slot_stride = kStride;
    p.next_position = kNext;
    p.grammar = {kEot, kTb};
    beam_step(i32(ids, {m, k}), f32(lp, {m, k}), in, o, p);

    const std::vector<int32_t> rec = read_i32(o.record);
    EXPECT_EQ(read_i32(o.tokens), w.tokens);
    EXPECT_EQ(read_floats(o.sums), w.sums);
    EXPECT_EQ(read_i32(o.slots), w.slots);
    EXPECT_EQ(read_i32(o.copy_from), w.copy_from);
    EXPECT_EQ(read_i32(o.cache_rows), w.cache_rows);
    EXPECT_EQ(read_i32(o.states), w.states);
    EXPECT_EQ(read_i32(o.rules), w.rules);
    EXPECT_EQ(read_i32(o.finished), std::vector<int32_t>{w.finished_count});
    EXPECT_EQ(std::vector<int32_t>(rec.begin(), rec.begin() + n), w.source);
    EXPECT_EQ(std::vector<int32_t>(rec.begin() + n, rec.begin() + 2 * n), w.tokens);
    for (int i = 0; i < n; ++i) EXPECT_EQ(from_bits(rec[size_t(2 * n + i)]), w.sums[size_t(i)]);
    ASSERT_EQ(rec[size_t(3 * n)], int32_t(w.finished.size()));
    EXPECT_EQ(rec[size_t(3 * n + 1)], w.completed ? 1 : 0);
    for (size_t f = 0; f < w.finished.size(); ++f) {
      EXPECT_EQ(rec[size_t(3 * n + 2) + f], w.finished[f].first);
      EXPECT_EQ(from_bits(rec[size_t(4 * n + 2) + f]), w.finished[f].second);
    }
  }
}

TEST_P(BeamStep, CopySlotRowsCopiesOnlyTheNamedRanges) {
  for (const DType dt : {DType::f32, DType::f16}) {
    for (const int64_t d : {int64_t(24), int64_t(5)}) {  // 16-byte rows and odd ones
      SCOPED_TRACE(std::string(dtype_name(dt)) + " d " + std::to_string(d));
      const int64_t s = 5, t = 40, end = 23;
      std::vector<HostTensor> host;
      std::vector<Tensor> caches;
      for (int c = 0; c < 3; ++c) {
        host.push_back(random({s, t, d}, dt));
        caches.push_back(dev(host.back().t));
      }
      const std::vector<int32_t> slots = {3, 1, 4, 0, 2}, from = {-1, 2, 0, -1, 7};
      const int32_t first = 6;
      copy_slot_rows(caches, i32(slots, {5}), i32(from, {5}), i32({first}, {1}), end);
      for (int c = 0; c < 3; ++c) {
        std::vector<float> want = host[size_t(c)].v;
        for (int i = 0; i < 5; ++i) {
          const int32_t f = from[size_t(i)];
          if (f < 0 || f >= s) continue;
          for (int64_t p = first; p < end; ++p)
            for (int64_t j = 0; j < d; ++j)
              want[size_t((slots[size_t(i)] * t + p) * d + j)] =
                  host[size_t(c)].v[size_t((f * t + p) * d + j)];
        }
        EXPECT_EQ(read_floats(caches[size_t(c)]), want) << "cache " << c;
      }
    }
  }
}

TEST_P(BeamStep, RejectsBadArguments) {
  auto i32z = [&](const Shape& sh) { return Tensor::zeros(sh, DType::i32, device()); };
  auto f32z = [&](const Shape& sh) { return Tensor::zeros(sh, DType::f32, device()); };
  const int n = 2, k = 3;
  Tensor ids = i32z({n, k}), lp = f32z({n, k});
  const BeamStepIn in{f32z({n}), i32z({n}), i32z({n, 3}), i32z({1})};
  auto fresh = [&] {
    return BeamStepOut{i32z({n}),         f32z({n}), i32z({n}),
                       i32z({n}),         i32z({n}), i32z({n, 3}),
                       i32z({n, kWidth}), i32z({1}), i32z({beam_record_width(n)})};
  };
  BeamStepParams p;
  p.grammar = {kEot, kTb};
  const char* op = "[beam_step]";
  BeamStepOut o = fresh();
  Tensor wide = i32z({n, 65});
  expect_error([&] { beam_step(wide, f32z({n, 65}), in, o, p); }, {op, "ids"});
  expect_error([&] { beam_step(ids, f32z({n, 2}), in, o, p); }, {op, "logprobs"});
  expect_error(
      [&] {
        beam_step(i32z({n + 1, k}), f32z({n + 1, k}), in, o, p);
      },
      {op, "M <= N"});  // more candidate rows than rows
  expect_error(
      [&] {
        beam_step(i32z({1, k}), f32z({1, k}), in, o, p);
      },
      {op, "in.sums"});  // one candidate row, in's shapes for two
  o.record = i32z({4});
  expect_error([&] { beam_step(ids, lp, in, o, p); }, {op, "record"});
  o = fresh();
  o.rules = i32z({n, 4});
  expect_error([&] { beam_step(ids, lp, in, o, p); }, {op, "out.rules"});
  o = fresh();
  o.sums = in.sums;
  expect_error([&] { beam_step(ids, lp, in, o, p); }, {op, "overlaps"});
  o = fresh();
  p.max_finished = 0;
  expect_error([&] { beam_step(ids, lp, in, o, p); }, {op, "max_finished"});
  std::vector<Tensor> caches = {Tensor::zeros({2, 4, 3}, DType::f32, device()),
                                Tensor::zeros({2, 5, 3}, DType::f32, device())};
  expect_error([&] { copy_slot_rows(caches, i32z({2}), i32z({2}), i32z({1}), 3); },
               {"[copy_slot_rows]", "every cache"});
  caches.pop_back();
  expect_error([&] { copy_slot_rows(caches, i32z({2}), i32z({2}), i32z({1}), 5); },
               {"[copy_slot_rows]", "end"});
}

INSTANTIATE_TEST_SUITE_P(Ops, BeamStep, ::testing::ValuesIn(op_params()), op_param_name);

}  // namespace
}  // namespace parley::test
