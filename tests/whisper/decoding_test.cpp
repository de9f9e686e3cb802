// Logit filters and greedy window decoding against crafted logits: each rule of
// whisper/decoding.py gets a test that fails when the rule is skipped, and the decoding
// loop runs against a scripted LogitsSource (exact tokens, calls and probabilities).
#include "whisper/decoding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "engine/error.h"
#include "whisper/logit_filters.h"
#include "whisper/tokenizer.h"
#include "whisper/whisper_test_util.h"

namespace parley {
namespace {

using whisper_test::english;
using whisper_test::multilingual;

constexpr float kInf = std::numeric_limits<float>::infinity();

double logsumexp(const std::vector<float>& xs) {
  double m = -kInf;
  for (float x : xs) m = std::max(m, double(x));
  double s = 0;
  for (float x : xs) s += std::exp(double(x) - m);
  return m + std::log(s);
}

// ---------------------------------------------------------------- filters

TEST(LogitFilters, SuppressBlankOnlyAtTheFirstSampledPosition) {
  const auto& tok = english();
  const SuppressBlank f(tok, 3);
  const std::vector<int32_t> space = tok.encode(" ");
  ASSERT_EQ(space, std::vector<int32_t>{220});
  std::vector<float> row(size_t(tok.n_vocab()), 1.0f);
  f.apply(row, std::vector<int32_t>{1, 2, 3});
  EXPECT_EQ(row[220], -kInf);
  EXPECT_EQ(row[size_t(tok.eot())], -kInf);
  EXPECT_EQ(row[221], 1.0f);
  std::vector<float> later(size_t(tok.n_vocab()), 1.0f);
  f.apply(later, std::vector<int32_t>{1, 2, 3, 4});
  EXPECT_EQ(later[220], 1.0f);
  EXPECT_EQ(later[size_t(tok.eot())], 1.0f);
}

TEST(LogitFilters, SuppressTokensMinusOneIsNonSpeechPlusSpecials) {
  const auto& tok = english();
  const auto ids = resolve_suppress_tokens(tok, "-1");
  std::vector<int32_t> expected = tok.non_speech_tokens();
  for (int32_t t : {tok.transcribe(), tok.translate(), tok.sot(), tok.sot_prev(), tok.sot_lm(),
                    tok.no_speech()}) {
    expected.push_back(t);
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(ids, expected);
  EXPECT_GT(tok.non_speech_tokens().size(), 50u);
  // The specials are added to explicit lists too, and lists are sorted and unique.
  const auto explicit_ids = resolve_suppress_tokens(tok, "7,5,7");
  EXPECT_EQ(explicit_ids, (std::vector<int32_t>{5, 7, tok.sot(), tok.translate(), tok.transcribe(),
                                                tok.sot_lm(), tok.sot_prev(), tok.no_speech()}));
  EXPECT_THROW(resolve_suppress_tokens(tok, "1,x"), Error);
  EXPECT_THROW(resolve_suppress_tokens(tok, "99999"), Error);

  SuppressTokens f(ids);
  std::vector<float> row(size_t(tok.n_vocab()), 0.5f);
  f.apply(row, std::vector<int32_t>{});
  for (int32_t t : ids) EXPECT_EQ(row[size_t(t)], -kInf) << t;
  EXPECT_EQ(row[220], 0.5f);
}

TEST(LogitFilters, EmptySuppressTokensLeavesTheFilterOut) {
  LogitFilterSettings s;
  s.suppress_tokens = "";
  EXPECT_EQ(make_logit_filters(english(), s, 1).size(), 2u);  // blank + timestamps
  s.suppress_tokens = "-1";
  EXPECT_EQ(make_logit_filters(english(), s, 1).size(), 3u);
  s.without_timestamps = true;
  s.suppress_blank = false;
  EXPECT_EQ(make_logit_filters(english(), s, 1).size(), 1u);
}

class TimestampRules : public ::testing::Test {
 protected:
  const WhisperTokenizer& tok = english();
  const int32_t tb = tok.timestamp_begin();
  const int32_t eot = tok.eot();
  static constexpr int kBegin = 1;  // sample_begin: the initial tokens are [sot]
  ApplyTimestampRules rules{tok, kBegin, 50};

  std::vector<float> apply(std::vector<int32_t> sampled, float text = 5.0f, float ts = 0.0f) {
    std::vector<float> row(size_t(tok.n_vocab()), text);
    for (size_t i = size_t(tb); i < row.size(); ++i) row[i] = ts;
    std::vector<int32_t> tokens{tok.sot()};
    tokens.insert(tokens.end(), sampled.begin(), sampled.end());
    rules.apply(row, tokens);
    return row;
  }
};

TEST_F(TimestampRules, NoTimestampsIsNeverSampled) {
  const auto row = apply({tb, 100}, 10.0f);
  EXPECT_EQ(row[size_t(tok.no_timestamps())], -kInf);
  EXPECT_EQ(row[100], 10.0f);
}

TEST_F(TimestampRules, FirstTokenIsATimestampAtMostOneSecondIn) {
  const auto row = apply({}, 50.0f);
  EXPECT_EQ(row[100], -kInf);  // text, however likely
  EXPECT_EQ(row[size_t(eot)], -kInf);
  EXPECT_EQ(row[size_t(tb)], 0.0f);
  EXPECT_EQ(row[size_t(tb + 50)], 0.0f);  // 1.00 s
  EXPECT_EQ(row[size_t(tb + 51)], -kInf);
  ApplyTimestampRules unlimited(tok, kBegin, std::nullopt);
  std::vector<float> row2(size_t(tok.n_vocab()), 0.0f);
  unlimited.apply(row2, std::vector<int32_t>{tok.sot()});
  EXPECT_EQ(row2[size_t(tb + 1500)], 0.0f);
}

TEST_F(TimestampRules, AnOpenTimestampIsFollowedByATimestampOrEot) {
  // ts(0.00) text ts(1.00): the last opens a pair, the penultimate is text. Timestamps at
  // -10, so that together they do not outweigh <|endoftext|>.
  const auto row = apply({tb, 100, tb + 50}, 1.0f, -10.0f);
  EXPECT_EQ(row[100], -kInf);
  EXPECT_EQ(row[size_t(eot - 1)], -kInf);
  EXPECT_EQ(row[size_t(eot)], 1.0f);        // the window may end on one timestamp
  EXPECT_EQ(row[size_t(tb + 49)], -kInf);   // never decreasing
  EXPECT_EQ(row[size_t(tb + 50)], -10.0f);  // the same time closes the pair
  EXPECT_EQ(row[size_t(tb + 51)], -10.0f);
}

TEST_F(TimestampRules, AClosedPairIsFollowedByText) {
  const auto row = apply({tb, 100, tb + 50, tb + 50}, 1.0f, 1.0f);
  EXPECT_EQ(row[100], 1.0f);
  EXPECT_EQ(row[size_t(eot)], 1.0f);
  EXPECT_EQ(row[size_t(tb + 60)], -kInf);
  EXPECT_EQ(row[size_t(tok.n_vocab() - 1)], -kInf);
}

TEST_F(TimestampRules, AfterTextTheNextTimestampIsStrictlyLater) {
  const auto row = apply({tb, 100, tb + 50, tb + 50, 200}, 10.0f, 0.0f);
  EXPECT_EQ(row[size_t(tb + 50)], -kInf);  // would make an empty segment
  EXPECT_EQ(row[size_t(tb + 51)], 0.0f);
  EXPECT_EQ(row[200], 10.0f);
}

TEST_F(TimestampRules, TimestampsForcedWhenTogetherLikelierThanAnyText) {
  // 1501 timestamps at 0: logsumexp = log(1501) = 7.31 > 7.0.
  auto row = apply({tb, 100}, 7.0f, 0.0f);
  EXPECT_EQ(row[100], -kInf);
  EXPECT_EQ(row[size_t(eot)], -kInf);
  EXPECT_EQ(row[size_t(tb + 5)], 0.0f);
  // ...but not when one text token beats them all: log(1501) < 7.4.
  row = apply({tb, 100}, 7.4f, 0.0f);
  EXPECT_EQ(row[100], 7.4f);
}

// ---------------------------------------------------------------- scripted decoding

// A LogitsSource that answers every decode() with rows of zeros, puts `no_speech_logit` on
// <|nospeech|> in the rows of <|startoftranscript|> inputs and, in the last row of each
// call, 20 on the next token of the script (kFlat: nothing; after the script: eot).
class ScriptedSource : public LogitsSource {
 public:
  static constexpr int32_t kFlat = -1;
  ScriptedSource(const WhisperTokenizer& tok, std::vector<int32_t> script, float no_speech_logit)
      : tok_(tok), script_(std::move(script)), no_speech_logit_(no_speech_logit) {}

  void encode(const Tensor& mel) override {
    EXPECT_EQ(mel.shape(), Shape({80, 3000}));
    ++encodes;
    next_ = 0;
  }
  Tensor decode(std::span<const int32_t> tokens) override {
    calls.emplace_back(tokens.begin(), tokens.end());
    const int64_t v = tok_.n_vocab();
    Tensor logits = Tensor::zeros({int64_t(tokens.size()), v}, DType::f32);
    float* p = logits.data<float>();
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] == tok_.sot()) p[int64_t(i) * v + tok_.no_speech()] = no_speech_logit_;
    }
    const int32_t next = next_ < script_.size() ? script_[next_] : tok_.eot();
    ++next_;
    if (next != kFlat) p[int64_t(tokens.size() - 1) * v + next] = 20.0f;
    return logits;
  }
  void reset() override { ++resets; }
  int n_text_ctx() const override { return 448; }
  int n_mels() const override { return 80; }

  std::vector<std::vector<int32_t>> calls;
  int encodes = 0;
  int resets = 0;

 private:
  const WhisperTokenizer& tok_;
  std::vector<int32_t> script_;
  float no_speech_logit_;
  size_t next_ = 0;
};

Tensor silent_mel() { return Tensor::zeros({80, 3000}, DType::f32); }

TEST(Decoding, InitialTokensLikeTheReference) {
  const auto& tok = multilingual();
  DecodingOptions o;
  o.language = "de";
  for (int i = 0; i < 300; ++i) o.prompt.push_back(1000 + i);
  o.without_timestamps = true;
  o.prefix = {7, 8};
  const auto t = initial_tokens(tok, o, o.language, 448);
  ASSERT_EQ(t.size(), 1u + 223u + 3u + 1u + 2u);
  EXPECT_EQ(t[0], tok.sot_prev());
  EXPECT_EQ(t[1], 1000 + 300 - 223);  // the last 223 prompt tokens
  EXPECT_EQ(t[223], 1299);
  EXPECT_EQ(t[224], tok.sot());
  EXPECT_EQ(t[225], tok.language_token("de"));
  EXPECT_EQ(t[226], tok.transcribe());
  EXPECT_EQ(t[227], tok.no_timestamps());
  EXPECT_EQ(t[228], 7);
  EXPECT_EQ(t[229], 8);
}

TEST(Decoding, GreedyWithTimestampsUsesTheCacheAndStopsAtEot) {
  const auto& tok = english();
  const int32_t tb = tok.timestamp_begin();
  const int32_t hello = tok.encode(" Hello")[0];
  // The script asks for text first: the timestamp rule overrides it with <|0.00|>, the
  // first allowed timestamp of a flat row.
  ScriptedSource src(tok, {hello, hello, tb + 40, tok.eot()}, 3.0f);
  DecodingOptions o;
  o.prompt = {11, 12};
  const DecodingResult r = decode_window(src, tok, silent_mel(), o);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{tb, hello, tb + 40}));
  EXPECT_EQ(r.text, "Hello");
  EXPECT_EQ(r.language, "en");
  EXPECT_EQ(src.encodes, 1);
  // One call with every initial token, then one token per call.
  ASSERT_EQ(src.calls.size(), 4u);
  EXPECT_EQ(src.calls[0], (std::vector<int32_t>{tok.sot_prev(), 11, 12, tok.sot()}));
  EXPECT_EQ(src.calls[1], std::vector<int32_t>{tb});
  EXPECT_EQ(src.calls[3], std::vector<int32_t>{tb + 40});

  // no_speech_prob: softmax of the raw <|startoftranscript|> row (index 3, here also the
  // row whose next token is scripted).
  std::vector<float> sot_row(size_t(tok.n_vocab()), 0.0f);
  sot_row[size_t(tok.no_speech())] = 3.0f;
  sot_row[size_t(hello)] = 20.0f;
  EXPECT_NEAR(r.no_speech_prob, std::exp(3.0 - logsumexp(sot_row)), 1e-9);

  // Step 0: the filtered row allows <|0.00|>..<|1.00|> only, all at 0: log(1/51).
  // Step 1: " Hello" at 20 among the text tokens not suppressed and the allowed timestamps
  // (>= <|0.00|>... no: after one timestamp, timestamps are suppressed), all at 0.
  const double step0 = -std::log(51.0);
  EXPECT_LT(r.avg_logprob, float(step0 / 4 + 1e-3));
  EXPECT_GT(r.avg_logprob, float(step0 / 4 - 1e-3));
  EXPECT_EQ(r.temperature, 0.0f);
  EXPECT_NEAR(r.compression_ratio, 5.0 / 13.0, 1e-6);  // zlib.compress(b"Hello") is 13 bytes
}

TEST(Decoding, WithoutTimestampsAndSuppressBlank) {
  const auto& tok = english();
  const int32_t hello = tok.encode(" Hello")[0];
  // eot and " " at the first position are suppressed; the flat row then picks id 0 ("!").
  ScriptedSource src(tok, {tok.eot(), 220, hello}, 0.0f);
  DecodingOptions o;
  o.without_timestamps = true;
  const DecodingResult r = decode_window(src, tok, silent_mel(), o);
  EXPECT_EQ(src.calls[0], (std::vector<int32_t>{tok.sot(), tok.no_timestamps()}));
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{0, 220, hello}));
  EXPECT_EQ(r.text, "!  Hello");  // "!", " ", " Hello"
  o.suppress_blank = false;
  ScriptedSource src2(tok, {tok.eot()}, 0.0f);
  EXPECT_TRUE(decode_window(src2, tok, silent_mel(), o).tokens.empty());
}

TEST(Decoding, SampleLenBoundsTheLoop) {
  const auto& tok = english();
  ScriptedSource src(tok, std::vector<int32_t>(100, 300), 0.0f);
  DecodingOptions o;
  o.without_timestamps = true;
  o.sample_len = 5;
  const DecodingResult r = decode_window(src, tok, silent_mel(), o);
  EXPECT_EQ(r.tokens, std::vector<int32_t>(5, 300));
  EXPECT_EQ(src.calls.size(), 5u);
  // Each step: 20 against ~(n_vocab - suppressed) zeros; avg over len + 1 = 6.
  EXPECT_LT(r.avg_logprob, 0.0f);
  EXPECT_GT(r.avg_logprob, -1e-3f);
}

TEST(Decoding, RejectsBadOptionsLikeTheReference) {
  const auto& tok = english();
  auto error_kind = [&](const DecodingOptions& o) {
    ScriptedSource src(tok, {}, 0.0f);
    try {
      decode_window(src, tok, silent_mel(), o);
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::internal;  // no error
  };
  DecodingOptions o;
  o.temperature = -0.1f;
  EXPECT_EQ(error_kind(o), ErrorKind::invalid_argument);
  o = {};
  o.best_of = 3;  // best_of at temperature 0
  EXPECT_EQ(error_kind(o), ErrorKind::invalid_argument);
  o.temperature = 0.5f;
  o.beam_size = 2;  // with best_of
  EXPECT_EQ(error_kind(o), ErrorKind::invalid_argument);
  o = {};
  o.patience = 2.0f;  // without beam_size
  EXPECT_EQ(error_kind(o), ErrorKind::invalid_argument);
  o = {};
  o.length_penalty = 1.5f;
  EXPECT_EQ(error_kind(o), ErrorKind::invalid_argument);
  o = {};
  o.beam_size = -1;
  EXPECT_EQ(error_kind(o), ErrorKind::invalid_argument);
}

TEST(Decoding, HotwordsShareThePromptBudget) {
  const auto& tok = multilingual();
  DecodingOptions o;
  o.language = "en";
  for (int i = 0; i < 300; ++i) o.prompt.push_back(1000 + i);
  for (int i = 0; i < 150; ++i) o.hotwords.push_back(5000 + i);
  auto t = initial_tokens(tok, o, o.language, 448);
  // <|startofprev|>, the first 111 hotwords, the last 223 - 111 = 112 prompt tokens, sot seq.
  ASSERT_EQ(t.size(), 1u + 223u + 3u);
  EXPECT_EQ(t[0], tok.sot_prev());
  EXPECT_EQ(t[1], 5000);
  EXPECT_EQ(t[111], 5110);
  EXPECT_EQ(t[112], 1000 + 300 - 112);
  EXPECT_EQ(t[223], 1299);
  EXPECT_EQ(t[224], tok.sot());
  // Short hotwords leave the rest of the budget to the prompt.
  o.hotwords = {7, 8};
  t = initial_tokens(tok, o, o.language, 448);
  ASSERT_EQ(t.size(), 1u + 223u + 3u);
  EXPECT_EQ(t[1], 7);
  EXPECT_EQ(t[3], 1000 + 300 - 221);
  // Hotwords alone still open a <|startofprev|> block; a prefix turns them off.
  o.prompt.clear();
  t = initial_tokens(tok, o, o.language, 448);
  EXPECT_EQ(t, (std::vector<int32_t>{tok.sot_prev(), 7, 8, tok.sot(), tok.language_token("en"),
                                     tok.transcribe()}));
  o.prefix = {9};
  t = initial_tokens(tok, o, o.language, 448);
  EXPECT_EQ(t, (std::vector<int32_t>{tok.sot(), tok.language_token("en"), tok.transcribe(), 9}));
}

// Language detection: a non-language token is likelier than every language, <|de|> is the
// likeliest language.
class LanguageSource : public LogitsSource {
 public:
  explicit LanguageSource(const WhisperTokenizer& tok) : tok_(tok) {}
  void encode(const Tensor&) override {}
  Tensor decode(std::span<const int32_t> tokens) override {
    EXPECT_EQ(tokens.size(), 1u);
    EXPECT_EQ(tokens[0], tok_.sot());
    Tensor logits = Tensor::zeros({1, tok_.n_vocab()}, DType::f32);
    float* p = logits.data<float>();
    p[500] = 50.0f;
    p[tok_.language_token("de")] = 4.0f;
    p[tok_.language_token("fr")] = 3.0f;
    return logits;
  }
  void reset() override {}
  int n_text_ctx() const override { return 448; }
  int n_mels() const override { return 80; }

 private:
  const WhisperTokenizer& tok_;
};

TEST(Decoding, DetectLanguageSoftmaxOverLanguageTokensOnly) {
  const auto& tok = multilingual();
  LanguageSource src(tok);
  const auto d = detect_language(src, tok);
  EXPECT_EQ(d.code, "de");
  ASSERT_EQ(d.probs.size(), tok.language_codes().size());
  const double z = std::exp(4.0) + std::exp(3.0) + double(d.probs.size() - 2);
  std::map<std::string, float> probs(d.probs.begin(), d.probs.end());
  EXPECT_NEAR(probs["de"], std::exp(4.0) / z, 1e-6);
  EXPECT_NEAR(probs["fr"], std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(probs["en"], 1.0 / z, 1e-6);
  EXPECT_THROW(detect_language(src, english()), Error);
}

// ---------------------------------------------------------------- text helpers

TEST(Decoding, CompressionRatioIsZlibDefaultLevel) {
  // Sizes from Python: len(zlib.compress(s.encode())).
  EXPECT_FLOAT_EQ(compression_ratio("hello world"), 11.0f / 19.0f);
  EXPECT_FLOAT_EQ(compression_ratio("And so my fellow Americans, ask not what your country can "
                                    "do for you, ask what you can do for your country."),
                  107.0f / 79.0f);
  EXPECT_FLOAT_EQ(compression_ratio("la la la la la la la la la la la la la la la la"),
                  47.0f / 14.0f);
}

TEST(Decoding, Utf8ReplacementLikePython) {
  // Expected values from bytes.decode("utf-8", "replace").
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8_replace_invalid("\xE2\x82"
                                 "a"),
            r + "a");
  EXPECT_EQ(utf8_replace_invalid("\xFF"), r);
  EXPECT_EQ(utf8_replace_invalid("ab\xF0\x9F\x98"), "ab" + r);
  EXPECT_EQ(utf8_replace_invalid("\xED\xA0\x80x"), r + r + r + "x");
  EXPECT_EQ(utf8_replace_invalid("\xE0\x80\x80"), r + r + r);
  EXPECT_EQ(utf8_replace_invalid("\xC3\xA9\x80"), "\xC3\xA9" + r);
  EXPECT_EQ(utf8_replace_invalid("caf\xC3\xA9 \xF0\x9F\x98\x80"), "caf\xC3\xA9 \xF0\x9F\x98\x80");
}

TEST(Decoding, PyStripRemovesUnicodeWhitespace) {
  EXPECT_EQ(py_strip(" \xE3\x80\x80\xC2\xA0 hi\xE2\x80\xA9\x1C "), "hi");
  EXPECT_EQ(py_strip("  a b  "), "a b");
  EXPECT_EQ(py_strip(" \t\n"), "");
}

TEST(Decoding, ReferenceDecodeKeepsSpecialTextButDropsTimestamps) {
  const auto& tok = multilingual();
  const std::vector<int32_t> ids{tok.timestamp_begin(), tok.encode(" Hi")[0],
                                 tok.language_token("de"), tok.timestamp_begin() + 3};
  EXPECT_EQ(reference_decode(tok, ids), " Hi<|de|>");
}

TEST(Decoding, OnTokenSeesEverySampledTokenAndCancelledStops) {
  const auto& tok = english();
  const int32_t tb = tok.timestamp_begin();
  const int32_t hello = tok.encode(" Hello")[0];
  ScriptedSource src(tok, {hello, hello, tb + 40, tok.eot()}, 3.0f);
  DecodingOptions o;
  std::vector<int32_t> seen;
  o.on_token = [&](int32_t t) { seen.push_back(t); };
  // The no-speech probability arrives once, before the first token.
  std::vector<float> no_speech;
  o.on_no_speech_prob = [&](float p) {
    EXPECT_TRUE(seen.empty());
    no_speech.push_back(p);
  };
  const DecodingResult r = decode_window(src, tok, silent_mel(), o);
  ASSERT_EQ(no_speech.size(), 1u);
  EXPECT_EQ(no_speech[0], r.no_speech_prob);
  o.on_no_speech_prob = nullptr;
  EXPECT_EQ(seen, (std::vector<int32_t>{tb, hello, tb + 40, tok.eot()}));
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{tb, hello, tb + 40}));

  ScriptedSource src2(tok, std::vector<int32_t>(100, 300), 0.0f);
  int polls = 0;
  o.on_token = nullptr;
  o.cancelled = [&] { return ++polls > 3; };
  try {
    decode_window(src2, tok, silent_mel(), o);
    FAIL() << "expected Error(cancelled)";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::cancelled);
  }
  EXPECT_EQ(src2.calls.size(), 3u);  // three steps ran, the fourth poll stopped it
}

}  // namespace
}  // namespace parley
