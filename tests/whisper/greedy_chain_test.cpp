// Greedy decoding chained on the device (engine advance_timestamp_rule, WhisperSession::
// chain_*, decode_encoded with LogitsSource::chains_greedy) against the step-by-step paths it
// replaces: the op's rule rows equal step_rule's (ApplyTimestampRules::add_rule) after random
// token histories on every built device; whole windows of the real tiny.en (timestamps on and
// off, a prompt, an early <|endoftext|>, the sample_len and context limits) give the same
// DecodingResult, callbacks and final cache length with the chain on and off.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/ops/timestamp_rule.h"
#include "whisper/decoding.h"
#include "whisper/logit_filters.h"
#include "whisper/model.h"
#include "whisper/tokenizer.h"
#include "whisper/whisper_test_util.h"

namespace parley {
namespace {

using whisper_test::english;
using whisper_test::have_tiny_en;
using whisper_test::jfk_window;
using whisper_test::model_dir;

std::vector<Device> devices() {
  std::vector<Device> d = {Device::cpu};
  if (cuda_available()) d.push_back(Device::cuda);
  return d;
}

// A sampled history: text, <|endoftext|> and timestamps (pairs, singles, rising or not, the
// first timestamp <|0.00|> often: its monotonic range is empty after an open timestamp).
std::vector<int32_t> random_sampled(std::mt19937& rng, const WhisperTokenizer& tok, int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) {
    const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
    if (kind < 4)
      t.push_back(int32_t(tok.timestamp_begin() + std::uniform_int_distribution<int>(0, 3)(rng)));
    else if (kind < 6)
      t.push_back(
          int32_t(tok.timestamp_begin() + std::uniform_int_distribution<int>(0, 1500)(rng)));
    else if (kind == 6)
      t.push_back(tok.eot());
    else
      t.push_back(std::uniform_int_distribution<int32_t>(0, tok.eot() - 1)(rng));
  }
  return t;
}

// From the state after the first sampled token, the op fed the later tokens one at a time
// writes, at every position, the rule row step_rule gives for the sequence so far.
TEST(GreedyChain, AdvanceTimestampRuleWritesStepRuleRows) {
  const WhisperTokenizer& tok = english();
  const TimestampRuleParams grammar{tok.eot(), tok.timestamp_begin()};
  std::mt19937 rng(11);
  const std::vector<int32_t> initial = {tok.sot(), 220, 1000};  // any ids; sample_begin 3
  int rows = 0, with_ranges = 0, two_ranges = 0;
  for (Device dev : devices()) {
    SCOPED_TRACE(std::string(device_name(dev)));
    // Two rows of (token, rule row, state), as WhisperSession's chain keeps them: step k reads
    // row (k - 1) % 2 and writes row k % 2.
    constexpr int64_t kState = 1 + kRuleWidth, kEnd = kState + kTimestampRuleState;
    Tensor io = Tensor::zeros({2, kEnd}, DType::i32, dev);
    auto part = [&](int64_t row, int64_t b, int64_t e) {
      return io.slice0(row, row + 1).reshape({kEnd}).slice0(b, e);
    };
    for (bool no_ts : {false, true}) {
      for (bool blank : {true, false}) {
        LogitFilterSettings s;
        s.without_timestamps = no_ts;
        s.suppress_blank = blank;
        const auto filters = make_logit_filters(tok, s, int(initial.size()));
        for (int trial = 0; trial < 200; ++trial) {
          const std::vector<int32_t> sampled = random_sampled(rng, tok, 1 + trial % 8);
          // The chain starts after the first sampled token, with the host's state.
          const auto state =
              timestamp_rule_state({sampled.data(), 1}, !no_ts, grammar.timestamp_begin);
          Tensor start = Tensor::empty({kTimestampRuleState}, DType::i32);
          std::copy(state.begin(), state.end(), start.data<int32_t>());
          part(0, kState, kEnd).copy_from(start);
          std::vector<int32_t> tokens = initial;
          tokens.push_back(sampled[0]);
          for (size_t k = 1; k < sampled.size(); ++k) {
            const int64_t in = int64_t(k - 1) % 2, out = int64_t(k) % 2;
            Tensor chosen = Tensor::empty({1}, DType::i32);
            chosen.data<int32_t>()[0] = sampled[k];
            Tensor next_state = part(out, kState, kEnd).reshape({1, kTimestampRuleState});
            Tensor token = part(out, 0, 1);
            Tensor rule = part(out, 1, 1 + kRuleWidth).reshape({1, kRuleWidth});
            advance_timestamp_rule(chosen.to(dev),
                                   part(in, kState, kEnd).reshape({1, kTimestampRuleState}),
                                   next_state, token, rule, grammar);
            tokens.push_back(sampled[k]);
            StepRule want;
            ASSERT_TRUE(step_rule(filters, tokens, want));
            const Tensor got = io.slice0(out, out + 1).to(Device::cpu);
            const int32_t* g = got.data<int32_t>();
            ASSERT_EQ(g[0], sampled[k]);
            ASSERT_EQ(std::vector<int32_t>(g + 1, g + 1 + kRuleWidth),
                      std::vector<int32_t>(want.v.begin(), want.v.end()))
                << "trial " << trial << " step " << k << " no_ts " << no_ts;
            const auto want_state = timestamp_rule_state(std::span(sampled).first(k + 1), !no_ts,
                                                         grammar.timestamp_begin);
            ASSERT_EQ(std::vector<int32_t>(g + kState, g + kEnd),
                      std::vector<int32_t>(want_state.begin(), want_state.end()));
            ++rows;
            with_ranges += want.n_ranges > 0;
            two_ranges += want.n_ranges == 2;
          }
        }
      }
    }
  }
  EXPECT_GT(rows, 1000);
  EXPECT_GT(with_ranges, 300);  // the grammar's ranges were exercised, not only empty rows
  EXPECT_GT(two_ranges, 100);
}

// The edge cases by name, on the CPU op: a closed pair, an open timestamp (its closing one or
// <|endoftext|>), <|0.00|> opened (its monotonic range is empty), text after a timestamp.
TEST(GreedyChain, AdvanceTimestampRuleEdgeCases) {
  const WhisperTokenizer& tok = english();
  const int32_t tb = tok.timestamp_begin(), eot = tok.eot();
  constexpr int32_t kMax = INT32_MAX;
  struct Case {
    std::vector<int32_t> before;  // sampled before `chosen`
    int32_t chosen;
    bool on;
    std::vector<int32_t> want;  // the rule row, kRuleWidth values
  };
  const std::vector<Case> cases = {
      {{tb + 5}, tb + 9, true, {tb, tb, kMax, tb, tb + 10, 0, 0, 0, 0}},  // pair closed
      {{42}, tb + 9, true, {tb, 0, eot, tb, tb + 9, 0, 0, 0, 0}},         // open timestamp
      {{42}, tb, true, {tb, 0, eot, 0, 0, 0, 0, 0, 0}},                   // <|0.00|> opened
      {{}, tb + 3, true, {tb, tb, kMax, tb, tb + 4, 0, 0, 0, 0}},         // first: a pair
      {{tb + 5, tb + 7}, 42, true, {tb, tb, tb + 8, 0, 0, 0, 0, 0, 0}},   // text after a pair
      {{42, 43}, 44, true, {tb, 0, 0, 0, 0, 0, 0, 0, 0}},                 // no timestamp yet
      {{tb + 5, tb + 7}, tb + 9, false, {0, 0, 0, 0, 0, 0, 0, 0, 0}},     // timestamps off
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const auto s = timestamp_rule_state(c.before, c.on, tb);
    Tensor state = Tensor::empty({1, kTimestampRuleState}, DType::i32);
    std::copy(s.begin(), s.end(), state.data<int32_t>());
    Tensor chosen = Tensor::empty({1, 1}, DType::i32);
    chosen.data<int32_t>()[0] = c.chosen;
    Tensor next = Tensor::empty({1, kTimestampRuleState}, DType::i32);
    Tensor token = Tensor::empty({1}, DType::i32),
           rule = Tensor::empty({1, kRuleWidth}, DType::i32);
    advance_timestamp_rule(chosen, state, next, token, rule, {eot, tb});
    EXPECT_EQ(std::vector<int32_t>(rule.data<int32_t>(), rule.data<int32_t>() + kRuleWidth), c.want)
        << "case " << i;
  }
}

// Forwards to a session (SessionLogitsSource) with the device choice and, when `chain`, the
// greedy chain forced on (a CPU session runs both synchronously); records the cache length
// each time it is reset after tokens were decoded.
class Source : public SessionLogitsSource {
 public:
  Source(WhisperSession& s, bool chain) : SessionLogitsSource(s), session_(s), chain_(chain) {}
  bool chooses_on_device() const override { return true; }
  bool chains_greedy() const override { return chain_; }
  void reset() override {
    if (session_.n_cached() > 0) cached_at_reset.push_back(session_.n_cached());
    SessionLogitsSource::reset();
  }
  std::vector<int> cached_at_reset;

 private:
  WhisperSession& session_;
  bool chain_;
};

struct WindowRun {
  DecodingResult result;
  std::vector<int32_t> streamed;
  std::vector<float> no_speech;
  std::vector<int> cached_at_reset;
};

TEST(GreedyChain, WindowsDecodeAsStepByStep) {
  if (!have_tiny_en()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const auto model = WhisperModel::load(model_dir());
  const WhisperTokenizer tok = load_tokenizer(*model);
  const Tensor mel = jfk_window();
  const std::string no_eot = "-1," + std::to_string(tok.eot());
  std::vector<DecodingOptions> cases(7);
  cases[1].without_timestamps = true;
  cases[2].prompt = tok.encode(" And so my fellow Americans.");
  cases[2].suppress_blank = false;
  cases[3].sample_len = 6;  // ends at the length limit, mid-sentence
  cases[4].sample_len = 2;  // one chained step
  cases[4].without_timestamps = true;
  cases[5].suppress_tokens = no_eot;  // never ends early: runs to sample_len (224)
  cases[5].token_logprobs = true;
  // A prompt of 223 tokens and no <|endoftext|>: the context (448) ends the window.
  for (int i = 0; i < 223; ++i) cases[6].prompt.push_back(int32_t(1000 + i));
  cases[6].sample_len = 300;
  cases[6].suppress_tokens = no_eot;
  cases[6].without_timestamps = true;
  WhisperSession session(model);
  session.encode(mel);
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    WindowRun runs[2];
    for (int chain : {0, 1}) {
      WindowRun& r = runs[chain];
      Source source(session, chain == 1);
      DecodingOptions o = cases[i];
      o.on_token = [&](int32_t t) { r.streamed.push_back(t); };
      o.on_no_speech_prob = [&](float p) { r.no_speech.push_back(p); };
      r.result = decode_encoded(source, tok, o);
      r.cached_at_reset = source.cached_at_reset;
    }
    const WindowRun &want = runs[0], &got = runs[1];
    EXPECT_EQ(got.result.tokens, want.result.tokens);
    EXPECT_EQ(got.result.text, want.result.text);
    EXPECT_EQ(got.result.avg_logprob, want.result.avg_logprob);
    EXPECT_EQ(got.result.no_speech_prob, want.result.no_speech_prob);
    EXPECT_EQ(got.result.compression_ratio, want.result.compression_ratio);
    EXPECT_EQ(got.result.token_logprobs, want.result.token_logprobs);
    EXPECT_EQ(got.streamed, want.streamed);
    EXPECT_EQ(got.no_speech, want.no_speech);
    // The step queued after the window's end was dropped: the cache ends where it ended.
    EXPECT_EQ(got.cached_at_reset, want.cached_at_reset);
    const size_t n = want.result.tokens.size();
    switch (i) {
      case 3: EXPECT_EQ(n, 6u); break;
      case 4: EXPECT_EQ(n, 2u); break;
      case 5: EXPECT_EQ(n, 224u); break;
      case 6: EXPECT_EQ(n, 448u - 226u + 1u); break;  // 226 initial tokens
      default: EXPECT_GT(n, 10u); EXPECT_EQ(want.streamed.back(), tok.eot());
    }
  }
}

// Cancelled between chained steps: Error(cancelled), the cache ends at the last step read
// (not at the one queued behind it), and the next window on the session decodes as before.
TEST(GreedyChain, CancelledMidWindow) {
  if (!have_tiny_en()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const auto model = WhisperModel::load(model_dir());
  const WhisperTokenizer tok = load_tokenizer(*model);
  WhisperSession session(model);
  session.encode(jfk_window());
  Source chain(session, true), step(session, false);
  const DecodingResult want = decode_encoded(step, tok, {});
  DecodingOptions o;
  int polls = 0;
  std::vector<int32_t> streamed;
  o.cancelled = [&] { return ++polls > 6; };
  o.on_token = [&](int32_t t) { streamed.push_back(t); };
  try {
    decode_encoded(chain, tok, o);
    FAIL() << "expected Error(cancelled)";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::cancelled);
  }
  // Polls 1-6 allowed the prefill and steps 1-5 (the chain polls before each launch, one
  // step ahead of its reads): tokens 0-4 were read and streamed; the cache holds the initial
  // token and tokens 0-3 (steps 1-4), not token 4: step 5 was launched and never read.
  EXPECT_EQ(streamed, std::vector<int32_t>(want.tokens.begin(), want.tokens.begin() + 5));
  EXPECT_EQ(session.n_cached(), 1 + 4);
  const DecodingResult again = decode_encoded(chain, tok, {});
  EXPECT_EQ(again.tokens, want.tokens);
  EXPECT_EQ(again.avg_logprob, want.avg_logprob);
}

// The chain begun at a window's initial pass: its first step (offset initial - 1) chooses what
// decode_initial_choose chooses, with the same log-probability, and hands back the same
// <|startoftranscript|> logits; the next step continues from the token it chose. On every
// built device (f32), with timestamps on and off.
TEST(GreedyChain, InitialPassIsTheFirstStep) {
  if (!have_tiny_en()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const Tensor mel = jfk_window();
  for (Device dev : devices()) {
    SCOPED_TRACE(std::string(device_name(dev)));
    const auto model = WhisperModel::load(model_dir(), {dev, DType::f32});
    const WhisperTokenizer tok = load_tokenizer(*model);
    WhisperSession session(model);
    session.encode(mel);
    for (bool timestamps : {true, false}) {
      DecodingOptions o;
      o.without_timestamps = !timestamps;
      const std::vector<int32_t> initial = initial_tokens(tok, o, "en", 448);
      const int t = int(initial.size());
      const int64_t sot_index =
          std::find(initial.begin(), initial.end(), tok.sot()) - initial.begin();
      ASSERT_LT(sot_index, t);
      LogitFilterSettings settings;
      settings.without_timestamps = !timestamps;
      const auto filters = make_logit_filters(tok, settings, t);
      const std::vector<int32_t> always = always_masked(filters);
      GreedyChainStart start;
      ASSERT_TRUE(greedy_chain_start(filters, initial, t, timestamps, always,
                                     {tok.eot(), tok.timestamp_begin()}, start));
      EXPECT_EQ(start.token, initial.back());

      session.reset();
      Tensor at_sot;
      const WhisperSession::Choices want =
          session.decode_initial_choose(initial, sot_index, always, start.rule.v, 1, at_sot);
      ASSERT_EQ(session.n_cached(), t);
      // The host filters agree with that choice.
      std::vector<float> row(size_t(at_sot.numel()));
      session.reset();
      const int64_t last = t - 1;
      const Tensor logits = session.decode(initial, std::span<const int64_t>(&last, 1));
      std::copy_n(logits.data<float>(), logits.numel(), row.begin());
      for (const auto& f : filters) f->apply(row, initial);
      EXPECT_EQ(int32_t(std::max_element(row.begin(), row.end()) - row.begin()), want.ids[0]);
      if (timestamps) {
        EXPECT_GE(want.ids[0], tok.timestamp_begin());  // the first is a timestamp
      }

      session.reset();
      session.chain_begin_initial(initial, sot_index, start);
      ASSERT_EQ(session.n_cached(), t);
      const auto [id, logprob] = session.chain_result(t - 1);
      EXPECT_EQ(id, want.ids[0]);
      EXPECT_EQ(logprob, want.logprobs[0]);
      const std::span<const float> chained_sot = session.chain_initial_logits();
      ASSERT_EQ(int64_t(chained_sot.size()), at_sot.numel());
      EXPECT_TRUE(std::equal(chained_sot.begin(), chained_sot.end(), at_sot.data<float>()));
      // The next step decodes the chosen token: as decode_choose after it.
      session.chain_launch();
      const auto [next, next_lp] = session.chain_result(t);
      std::vector<int32_t> seq = initial;
      seq.push_back(id);
      StepRule rule;
      ASSERT_TRUE(step_rule(filters, seq, rule));
      session.truncate(t);
      const auto& step = session.decode_choose({&id, 1}, always, rule.v, 1);
      EXPECT_EQ(next, step.ids[0]);
      EXPECT_EQ(next_lp, step.logprobs[0]);
    }
  }
}

TEST(GreedyChain, SessionChecksItsCalls) {
  if (!have_tiny_en()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  WhisperSession session(WhisperModel::load(model_dir()));
  EXPECT_THROW(session.chain_launch(), Error);  // no chain
  session.encode(Tensor::zeros({80, 3000}, DType::f32));
  const int32_t sot = 50257;
  session.decode({&sot, 1});
  GreedyChainStart start;
  start.token = 50363;  // <|notimestamps|>'s neighbour: any id
  start.grammar = {50256, 50363};
  session.chain_begin(start);
  session.chain_launch();
  session.chain_launch();
  EXPECT_EQ(session.n_cached(), 3);
  EXPECT_THROW(session.chain_result(3), Error);  // not launched
  const auto [id, logprob] = session.chain_result(1);
  EXPECT_GE(id, 0);
  EXPECT_LE(logprob, 0.0f);
  session.truncate(2);
  EXPECT_THROW(session.chain_result(2), Error);  // dropped
  EXPECT_THROW(session.chain_launch(), Error);   // the chain ended
  start.grammar.eot = 1;
  EXPECT_THROW(session.chain_begin(start), Error);  // other grammar values than the graphs'
  start.grammar.eot = 50256;
  EXPECT_THROW(session.chain_initial_logits(), Error);  // the chain began after tokens
  session.reset();
  start.token = sot;
  const int32_t two[2] = {sot, 50359};
  EXPECT_THROW(session.chain_begin_initial({two, 2}, 0, start), Error);   // token is not the last
  EXPECT_THROW(session.chain_begin_initial({&sot, 1}, 1, start), Error);  // sot_index outside
  EXPECT_EQ(session.n_cached(), 0);
  session.chain_begin_initial({&sot, 1}, 0, start);
  EXPECT_EQ(session.n_cached(), 1);
  EXPECT_EQ(session.chain_initial_logits().size(), size_t(session.model().config().n_vocab));
  session.fork(2);
  EXPECT_THROW(session.chain_begin_initial({&sot, 1}, 0, start), Error);  // rows in use
}

}  // namespace
}  // namespace parley
