// The token choice made next to the logits (LogitFilter's masked_topk form, engine
// masked_topk, WhisperSession::decode_choose, LogitsSource::decode_choose) against the host
// filters it replaces: on random logits after random token histories, every filter
// combination chooses the same token with the same log-probability; and whole windows
// (greedy with and without timestamps, a prompt, beam search) decode to the same tokens,
// scores and no-speech probability on the real tiny.en, through the session's own
// decode_choose and through LogitsSource's default.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

#include "audio/mel.h"
#include "engine/ops/reduce.h"
#include "whisper/batch_session.h"
#include "whisper/decoding.h"
#include "whisper/logit_filters.h"
#include "whisper/model.h"
#include "whisper/sampling.h"
#include "whisper/tokenizer.h"
#include "whisper/whisper_test_util.h"

namespace parley {
namespace {

using whisper_test::english;
using whisper_test::have_tiny_en;
using whisper_test::jfk_window;
using whisper_test::model_dir;

// A history after `initial` tokens: text, timestamps (in pairs, single, rising or not) mixed.
std::vector<int32_t> random_history(std::mt19937& rng, const WhisperTokenizer& tok,
                                    const std::vector<int32_t>& initial) {
  std::vector<int32_t> t = initial;
  const int n = std::uniform_int_distribution<int>(0, 6)(rng);
  for (int i = 0; i < n; ++i) {
    if (std::uniform_int_distribution<int>(0, 2)(rng) == 0)
      t.push_back(int32_t(tok.timestamp_begin() + std::uniform_int_distribution<int>(0, 60)(rng)));
    else
      t.push_back(std::uniform_int_distribution<int32_t>(0, tok.eot() - 1)(rng));
  }
  return t;
}

TEST(DeviceChoice, RuleFormChoosesWhatTheHostFiltersChoose) {
  const WhisperTokenizer& tok = english();
  const int64_t v = tok.n_vocab();
  std::mt19937 rng(7);
  const std::vector<int32_t> initial = {tok.sot(), tok.no_timestamps() - 1};  // any 2 ids
  int steps = 0, timestamp_forced = 0;
  for (bool blank : {true, false}) {
    for (const char* suppress : {"-1", "", "50,3"}) {
      for (bool no_ts : {false, true}) {
        for (float max_initial : {1.0f, 0.0f}) {
          LogitFilterSettings s;
          s.suppress_blank = blank;
          s.suppress_tokens = suppress;
          s.without_timestamps = no_ts;
          s.max_initial_timestamp = max_initial;
          const auto filters = make_logit_filters(tok, s, int(initial.size()));
          const std::vector<int32_t> always = always_masked(filters);
          Tensor mask = Tensor::zeros({v}, DType::i8);
          for (int32_t id : always) mask.data<int8_t>()[id] = 1;
          for (int trial = 0; trial < 12; ++trial) {
            const std::vector<int32_t> tokens =
                trial < 2 ? initial : random_history(rng, tok, initial);
            // Logits where timestamps sometimes win together and sometimes do not.
            std::vector<float> logits(static_cast<size_t>(v));
            std::normal_distribution<float> noise(0.0f, 2.0f);
            const float ts_shift = trial % 3 == 0 ? 3.0f : -2.0f;
            for (int64_t i = 0; i < v; ++i)
              logits[size_t(i)] = noise(rng) + (i >= tok.timestamp_begin() ? ts_shift : 0.0f);
            StepRule rule;
            ASSERT_TRUE(step_rule(filters, tokens, rule));
            Tensor x = Tensor::empty({1, v}, DType::f32);
            std::copy(logits.begin(), logits.end(), x.data<float>());
            Tensor rules = Tensor::empty({1, kRuleWidth}, DType::i32);
            std::copy(rule.v.begin(), rule.v.end(), rules.data<int32_t>());
            Tensor lp = Tensor::empty({1, 1}, DType::f32), id = Tensor::empty({1, 1}, DType::i32);
            masked_topk(x, &mask, rules, 1, lp, id);

            for (const auto& f : filters) f->apply(logits, tokens);
            const int32_t want = argmax(logits);
            const float want_lp = float(double(logits[size_t(want)]) - logsumexp(logits));
            ASSERT_EQ(id.data<int32_t>()[0], want) << "trial " << trial << " suppress '" << suppress
                                                   << "' no_ts " << no_ts << " blank " << blank;
            ASSERT_EQ(lp.data<float>()[0], want_lp);
            timestamp_forced += want >= tok.timestamp_begin();
            ++steps;
          }
        }
      }
    }
  }
  EXPECT_EQ(steps, 2 * 3 * 2 * 2 * 12);
  EXPECT_GT(timestamp_forced, 10);  // the split rule and the ranges were both exercised
}

// The session's source with the choice switched on (on the CPU it is off by default).
class ChoosingSource : public SessionLogitsSource {
 public:
  using SessionLogitsSource::SessionLogitsSource;
  bool chooses_on_device() const override { return true; }
};

// Forwards to a session but keeps LogitsSource's default decode_choose (decode + the CPU op).
class DefaultChoiceSource : public LogitsSource {
 public:
  explicit DefaultChoiceSource(WhisperSession& s) : inner_(s) {}
  void encode(const Tensor& mel) override { inner_.encode(mel); }
  Tensor decode(std::span<const int32_t> tokens) override { return inner_.decode(tokens); }
  Tensor decode_selected(std::span<const int32_t> tokens, std::span<const int64_t> rows) override {
    return inner_.decode_selected(tokens, rows);  // the same GEMM shapes as `host` below
  }
  void reset() override { inner_.reset(); }
  void fork(int n) override { inner_.fork(n); }
  Tensor decode_rows(std::span<const int32_t> tokens) override {
    return inner_.decode_rows(tokens);
  }
  void reorder_rows(std::span<const int32_t> source) override { inner_.reorder_rows(source); }
  bool chooses_on_device() const override { return true; }
  int n_text_ctx() const override { return inner_.n_text_ctx(); }
  int n_mels() const override { return inner_.n_mels(); }

 private:
  SessionLogitsSource inner_;
};

TEST(DeviceChoice, WindowsDecodeAsWithHostFilters) {
  if (!have_tiny_en()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const auto model = WhisperModel::load(model_dir());
  const WhisperTokenizer tok = load_tokenizer(*model);
  const Tensor mel = jfk_window();
  std::vector<DecodingOptions> cases(5);
  cases[1].without_timestamps = true;
  cases[2].prompt = tok.encode(" And so my fellow Americans.");
  cases[2].suppress_blank = false;
  cases[3].beam_size = 5;
  cases[4].beam_size = 3;
  cases[4].without_timestamps = true;
  cases[4].max_initial_timestamp = 0.0f;
  WhisperSession session(model);
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    SessionLogitsSource host(session);
    const DecodingResult want = decode_window(host, tok, mel, cases[i]);
    ASSERT_GT(want.tokens.size(), 10u);

    ChoosingSource choosing(session);
    DefaultChoiceSource by_default(session);
    for (LogitsSource* src :
         {static_cast<LogitsSource*>(&choosing), static_cast<LogitsSource*>(&by_default)}) {
      const DecodingResult got = decode_window(*src, tok, mel, cases[i]);

      EXPECT_EQ(got.tokens, want.tokens);
      EXPECT_EQ(got.text, want.text);
      EXPECT_EQ(got.avg_logprob, want.avg_logprob);
      EXPECT_EQ(got.no_speech_prob, want.no_speech_prob);
    }
  }
  // Timestamps were decoded: the rules had something to do.
  SessionLogitsSource host(session);
  const DecodingResult ts = decode_window(host, tok, mel, cases[0]);
  EXPECT_GE(std::count_if(ts.tokens.begin(), ts.tokens.end(),
                          [&](int32_t t) { return t >= tok.timestamp_begin(); }),
            2);
}

TEST(DeviceChoice, SessionChecksItsArguments) {
  if (!have_tiny_en()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  WhisperSession session(WhisperModel::load(model_dir()));
  session.encode(Tensor::zeros({80, 3000}, DType::f32));
  const int32_t sot = 50257;
  std::vector<int32_t> rules(kRuleWidth, 0);
  EXPECT_THROW(session.decode_choose({&sot, 1}, {}, {rules.data(), 3}, 1), Error);
  EXPECT_THROW(session.decode_choose({&sot, 1}, {}, rules, 0), Error);
  const int32_t bad = 99999;
  EXPECT_THROW(session.decode_choose({&sot, 1}, {&bad, 1}, rules, 1), Error);
  const auto& c = session.decode_choose({&sot, 1}, {}, rules, 3);
  EXPECT_EQ(c.ids.size(), 3u);
  EXPECT_GE(c.logprobs[0], c.logprobs[1]);
  EXPECT_EQ(session.n_cached(), 1);
}

// WhisperBatchSession::step_choose + WindowSearch::next_chosen against step + next (the host
// filters), two windows side by side to the end.
TEST(DeviceChoice, BatchStepsChooseAsTheHostFilters) {
  if (!have_tiny_en()) GTEST_SKIP() << "no tiny.en model at " << model_dir();
  const auto model = WhisperModel::load(model_dir());
  const WhisperTokenizer tok = load_tokenizer(*model);
  const Tensor one = jfk_window();
  Tensor mels = Tensor::empty({2, 80, kChunkFrames}, DType::f32);
  mels.slice0(0, 1).reshape({80, kChunkFrames}).copy_from(one);
  mels.slice0(1, 2).reshape({80, kChunkFrames}).copy_from(one);
  DecodingOptions a, b;
  a.language = b.language = "en";
  b.prompt = tok.encode(" Ask not.");  // another length of initial tokens
  b.suppress_blank = false;
  const std::vector<int32_t> slots = {0, 1};
  std::vector<DecodingResult> results[2];
  for (bool choose : {false, true}) {
    WhisperBatchSession batch(model, 2);
    batch.encode(slots, mels);
    std::vector<WindowSearch> searches;
    searches.emplace_back(tok, a, model->config().n_text_ctx);
    searches.emplace_back(tok, b, model->config().n_text_ctx);
    for (int s = 0; s < 2; ++s) {
      const std::array<int64_t, 2> rows = {
          searches[size_t(s)].sot_index(),
          int64_t(searches[size_t(s)].initial_tokens().size()) - 1};
      const Tensor logits = batch.prefill(s, searches[size_t(s)].initial_tokens(), rows);
      const auto v = size_t(logits.dim(1));
      searches[size_t(s)].first({logits.data<float>(), v}, {logits.data<float>() + v, v});
    }
    std::vector<int32_t> step_slots, step_tokens, rules, ids;
    std::vector<float> logprobs;
    while (true) {
      step_slots.clear();
      step_tokens.clear();
      rules.clear();
      for (int32_t s : slots) {
        if (searches[size_t(s)].done()) continue;
        step_slots.push_back(s);
        step_tokens.push_back(searches[size_t(s)].last_token());
        StepRule rule;
        ASSERT_TRUE(searches[size_t(s)].next_rule(rule));
        rules.insert(rules.end(), rule.v.begin(), rule.v.end());
      }
      if (step_slots.empty()) break;
      if (choose) {
        ASSERT_EQ(searches[0].always_masked(), searches[1].always_masked());
        batch.step_choose(step_slots, step_tokens, searches[0].always_masked(), rules, 1, ids,
                          logprobs);
        for (size_t r = 0; r < step_slots.size(); ++r)
          searches[size_t(step_slots[r])].next_chosen(ids[r], logprobs[r]);
      } else {
        const Tensor logits = batch.step(step_slots, step_tokens);
        const auto v = size_t(logits.dim(1));
        for (size_t r = 0; r < step_slots.size(); ++r)
          searches[size_t(step_slots[r])].next({logits.data<float>() + r * v, v});
      }
    }
    for (const auto& s : searches) results[choose].push_back(s.result());
  }
  for (int s = 0; s < 2; ++s) {
    SCOPED_TRACE("window " + std::to_string(s));
    EXPECT_GT(results[0][size_t(s)].tokens.size(), 10u);
    EXPECT_EQ(results[1][size_t(s)].tokens, results[0][size_t(s)].tokens);
    EXPECT_EQ(results[1][size_t(s)].avg_logprob, results[0][size_t(s)].avg_logprob);
  }
}

}  // namespace
}  // namespace parley
