// Word timestamps (src/whisper/timing.h, alignment_heads.h). Every expected value below
// was produced by openai-whisper 20250625 (whisper/timing.py, whisper/tokenizer.py) on the
// same inputs, run by hand in .venv-ref; the inputs are hand-made.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "engine/error.h"
#include "whisper/alignment_heads.h"
#include "whisper/decoding.h"
#include "whisper/model.h"
#include "whisper/timing.h"
#include "whisper/tokenizer.h"
#include "whisper/transcribe.h"
#include "whisper/whisper_test_util.h"

namespace parley {
namespace {

using whisper_test::english;
using whisper_test::multilingual;

using Ints = std::vector<int32_t>;

DtwPath run_dtw(const std::vector<std::vector<double>>& x) {
  std::vector<double> flat;
  for (const auto& row : x) flat.insert(flat.end(), row.begin(), row.end());
  return dtw(flat, int64_t(x.size()), int64_t(x[0].size()));
}

TEST(Dtw, DiagonalCostFollowsTheDiagonal) {
  // dtw(torch.tensor([[1,2,3,4],[2,1,2,3],[3,2,1,2]]))
  const DtwPath p = run_dtw({{1, 2, 3, 4}, {2, 1, 2, 3}, {3, 2, 1, 2}});
  EXPECT_EQ(p.text_indices, (Ints{0, 1, 2, 2}));
  EXPECT_EQ(p.time_indices, (Ints{0, 1, 2, 3}));
}

TEST(Dtw, TiesPreferTheTimeStep) {
  // All costs equal: the reference's `else` branch (t = 2, a step in time) wins every tie,
  // so the path runs along time first in the backtrace, i.e. text advances early.
  const DtwPath p = run_dtw({{0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}});
  EXPECT_EQ(p.text_indices, (Ints{0, 1, 2, 2, 2, 2, 2}));
  EXPECT_EQ(p.time_indices, (Ints{0, 0, 0, 1, 2, 3, 4}));
}

TEST(Dtw, BlockCost) {
  const DtwPath p = run_dtw({{0, 1, 1, 1, 1}, {1, 0, 0, 1, 1}, {1, 1, 1, 0, 0}, {1, 1, 1, 1, 0}});
  EXPECT_EQ(p.text_indices, (Ints{0, 1, 1, 2, 3, 3}));
  EXPECT_EQ(p.time_indices, (Ints{0, 1, 2, 3, 3, 4}));
}

TEST(Dtw, RandomCost) {
  // np.random.default_rng(3).standard_normal((4, 7)).round(2)
  const DtwPath p = run_dtw({{2.04, -2.56, 0.42, -0.57, -0.45, -0.22, -2.02},
                             {-0.23, -0.87, 3.32, 0.23, -0.35, -0.28, -0.67},
                             {-1.06, -0.39, 0.48, -0.24, 0.96, -0.2, 0.02},
                             {1.55, 0.55, -0.51, -0.18, 0.54, 1.94, -0.27}});
  EXPECT_EQ(p.text_indices, (Ints{0, 0, 0, 0, 0, 0, 0, 1, 2, 3}));
  EXPECT_EQ(p.time_indices, (Ints{0, 1, 2, 3, 4, 5, 6, 6, 6, 6}));
}

std::vector<float> filtered(std::vector<float> x, int64_t rows, int width) {
  median_filter(x, rows, int64_t(x.size()) / rows, width);
  return x;
}

TEST(MedianFilter, ReflectPaddedWindowsOfSeven) {
  EXPECT_EQ(filtered({5, 1, 4, 2, 8, 7, 3, 6, 0, 9, 1, 1, 1, 9, 1, 1, 1, 1, 1, 1}, 2, 7),
            (std::vector<float>{2, 4, 4, 4, 4, 4, 6, 6, 6, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(filtered({3, 1, 2, 5}, 1, 7), (std::vector<float>{2, 2, 2, 2}));
  EXPECT_EQ(filtered({3, 1, 2, 5, 4}, 1, 3), (std::vector<float>{1, 2, 2, 4, 5}));
}

TEST(MedianFilter, RowsNoLongerThanHalfTheWidthStayAsTheyAre) {
  EXPECT_EQ(filtered({3, 1, 2}, 1, 7), (std::vector<float>{3, 1, 2}));
  std::vector<float> x{1, 2, 3};
  EXPECT_THROW(median_filter(x, 1, 3, 4), Error);
}

std::vector<WordTiming> timings(const std::vector<std::string>& words) {
  std::vector<WordTiming> out;
  for (size_t i = 0; i < words.size(); ++i) out.push_back({words[i], {int32_t(i)}, 0, 0, 0});
  return out;
}

void expect_merged(const std::vector<std::string>& in,
                   const std::vector<std::pair<std::string, Ints>>& expected) {
  std::vector<WordTiming> a = timings(in);
  const WordTimestampOptions defaults;
  merge_punctuations(a, defaults.prepend_punctuations, defaults.append_punctuations);
  ASSERT_EQ(a.size(), expected.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].word, expected[i].first) << i;
    EXPECT_EQ(a[i].tokens, expected[i].second) << i;
  }
}

TEST(MergePunctuations, ReferenceCases) {
  expect_merged(
      {" \"", "Hello", ",", " world", "!", "\""},
      {{"", {}}, {" \"Hello,", {0, 1, 2}}, {"", {}}, {" world!\"", {3, 4, 5}}, {"", {}}, {"", {}}});
  expect_merged({" (", " a", ")", " b", "."},
                {{"", {}}, {" ( a)", {0, 1, 2}}, {"", {}}, {" b.", {3, 4}}, {"", {}}});
  expect_merged({" \u00bf", "Qu\u00e9", "?", " ok"},
                {{"", {}}, {" \u00bfQu\u00e9?", {0, 1, 2}}, {"", {}}, {" ok", {3}}});
  // A word ending in a space takes nothing; " -" is prepended across the emptied entry.
  expect_merged({"a ", ".", " -", " x"}, {{"a ", {0}}, {".", {1}}, {"", {}}, {" - x", {2, 3}}});
}

TEST(SplitToWordTokens, SpacesAndPunctuation) {
  // get_tokenizer(False).encode(" And so, my fellow Americans: ask-not! (what) 100%.") + eot
  const Ints toks{843,  523, 11,  616,   5891, 3399, 25,   1265, 12,
                  1662, 0,   357, 10919, 8,    1802, 7225, 50256};
  const WordSplit s = split_to_word_tokens(english(), toks, "en");
  EXPECT_EQ(s.words, (std::vector<std::string>{" And", " so", ",", " my", " fellow", " Americans",
                                               ":", " ask", "-not", "!", " (what", ")", " 100%.",
                                               "<|endoftext|>"}));
  EXPECT_EQ(s.tokens, (std::vector<Ints>{{843},
                                         {523},
                                         {11},
                                         {616},
                                         {5891},
                                         {3399},
                                         {25},
                                         {1265},
                                         {12, 1662},
                                         {0},
                                         {357, 10919},
                                         {8},
                                         {1802, 7225},
                                         {50256}}));
}

TEST(SplitToWordTokens, MultibyteCharactersStayWhole) {
  // get_tokenizer(True, language="de").encode(" Grüße aus Köln, naïve café") + eot
  const WordSplit de = split_to_word_tokens(
      multilingual(), Ints{38908, 11451, 3437, 591, 13072, 77, 11, 1667, 15487, 303, 25118, 50257},
      "de");
  EXPECT_EQ(de.words, (std::vector<std::string>{" Gr\u00fc\u00dfe", " aus", " K\u00f6ln", ",",
                                                " na\u00efve", " caf\u00e9", "<|endoftext|>"}));
  EXPECT_EQ(
      de.tokens,
      (std::vector<Ints>{
          {38908, 11451}, {3437}, {591, 13072, 77}, {11}, {1667, 15487, 303}, {25118}, {50257}}));
  // language="zh": split at whole characters, "？" spans three tokens.
  const WordSplit zh = split_to_word_tokens(
      multilingual(), Ints{15003, 3581, 26668, 31375, 1543, 26410, 14769, 171, 120, 253, 50257},
      "zh");
  EXPECT_EQ(zh.words,
            (std::vector<std::string>{"\u6211\u4eec", "\u5728", "\u5317", "\u4eac", "\u3002",
                                      "\u4f60\u597d", "\u5417", "\uff1f", "<|endoftext|>"}));
  EXPECT_EQ(zh.tokens.at(7), (Ints{171, 120, 253}));
}

TEST(AlignmentHeads, OfficialTableAndFallback) {
  // _ALIGNMENT_HEADS["tiny.en"] decoded; also the real tiny.en's CTranslate2 config.json.
  const auto tiny_en = find_official_alignment_heads("tiny.en");
  ASSERT_TRUE(tiny_en.has_value());
  EXPECT_EQ(tiny_en->heads,
            (AlignmentHeads{{1, 0}, {2, 0}, {2, 5}, {3, 0}, {3, 1}, {3, 2}, {3, 3}, {3, 4}}));
  const auto turbo = find_official_alignment_heads("large-v3-turbo");
  ASSERT_TRUE(turbo.has_value());
  EXPECT_EQ(turbo->heads, (AlignmentHeads{{2, 4}, {2, 11}, {3, 3}, {3, 6}, {3, 11}, {3, 14}}));
  EXPECT_EQ(official_alignment_heads().size(), 14u);
  for (const OfficialAlignmentHeads& e : official_alignment_heads()) {
    EXPECT_FALSE(e.heads.empty()) << e.name;
    for (const auto& [l, h] : e.heads) {
      EXPECT_TRUE(l >= 0 && l < e.n_text_layer && h >= 0 && h < e.n_text_head) << e.name;
    }
  }

  WhisperConfig c;
  c.n_text_layer = 4;
  c.n_text_head = 6;
  EXPECT_EQ(resolve_alignment_heads(c).size(), 12u);  // layers 2 and 3, every head
  EXPECT_EQ(resolve_alignment_heads(c).front(), (std::pair<int, int>{2, 0}));
  EXPECT_EQ(resolve_alignment_heads(c, "tiny"),
            (AlignmentHeads{{2, 2}, {3, 0}, {3, 2}, {3, 3}, {3, 4}, {3, 5}}));
  EXPECT_THROW(resolve_alignment_heads(c, "base"), Error);  // 6 x 8 heads
  EXPECT_THROW(resolve_alignment_heads(c, "nope"), Error);
  c.alignment_heads = {{3, 1}};
  EXPECT_EQ(resolve_alignment_heads(c, "tiny"), (AlignmentHeads{{3, 1}}));  // the model's own
}

TEST(WordTimestamps, Round2IsPythonsRound) {
  EXPECT_EQ(round2(0.125), 0.12);  // exact binary half: to even
  EXPECT_EQ(round2(0.375), 0.38);
  EXPECT_EQ(round2(2.675), 2.67);  // 2.67499999... in binary
  EXPECT_EQ(round2(29.92 + 0.3), 30.22);
}

Segment words_segment(std::vector<Word> words) {
  Segment s;
  s.words = std::move(words);
  return s;
}

TEST(WordTimestamps, SegmentAnomaly) {
  EXPECT_FALSE(is_segment_anomaly(nullptr));
  EXPECT_FALSE(is_segment_anomaly(&static_cast<const Segment&>(Segment{})));
  // Two ordinary words: score 0.
  Segment ok = words_segment({{" a", 0, 0.5, 0.9}, {" b", 0.5, 1.0, 0.8}});
  EXPECT_FALSE(is_segment_anomaly(&ok));
  // One improbable word: 1.0 + 0.01 >= 1.
  Segment bad = words_segment({{" a", 0, 0.5, 0.1}});
  EXPECT_TRUE(is_segment_anomaly(&bad));
  // Punctuation words do not count: "," leaves one short word (0.133 - 0.1) * 15 = 0.495.
  Segment punct = words_segment({{",", 0, 0.02, 0.01}, {" a", 0, 0.1, 0.9}});
  EXPECT_FALSE(is_segment_anomaly(&punct));
  // A 5.5 s word: 3.5 >= 3.
  Segment long_word =
      words_segment({{" a", 0, 5.5, 0.9}, {" b", 5.5, 6, 0.9}, {" c", 6, 6.5, 0.9}});
  EXPECT_TRUE(is_segment_anomaly(&long_word));
}

// A window script (as transcribe_test.cpp's) that also answers the alignment pass: token
// t of the alignment sequence attends to frames [25 t, 25 t + 25) (half a second per
// token), and its logits are flat (every word improbable: a hallucination by the
// reference's anomaly score) or confident (20 on the next token).
class AlignedScript : public LogitsSource {
 public:
  AlignedScript(const WhisperTokenizer& tok, std::vector<int32_t> window, bool confident)
      : tok_(tok), window_(std::move(window)), confident_(confident) {}
  void encode(const Tensor&) override {
    ++encodes;
    next_ = 0;
  }
  Tensor decode(std::span<const int32_t> tokens) override {
    const int64_t v = tok_.n_vocab();
    Tensor logits = Tensor::zeros({int64_t(tokens.size()), v}, DType::f32);
    const int32_t next = next_ < window_.size() ? window_[next_] : tok_.eot();
    ++next_;
    logits.data<float>()[int64_t(tokens.size() - 1) * v + next] = 20.0f;
    return logits;
  }
  void reset() override {}
  int n_text_ctx() const override { return 448; }
  int n_mels() const override { return 80; }
  CrossAttentionWeights cross_attention_weights(std::span<const int32_t> tokens,
                                                std::span<const std::pair<int, int>>) override {
    const int64_t t = int64_t(tokens.size()), v = tok_.n_vocab();
    CrossAttentionWeights out;
    out.logits = Tensor::zeros({t, v}, DType::f32);
    if (confident_)
      for (int64_t i = 0; i + 1 < t; ++i)
        out.logits.data<float>()[i * v + tokens[size_t(i + 1)]] = 20;
    out.qk = Tensor::zeros({1, t, 1500}, DType::f32);
    for (int64_t i = 0; i < t; ++i)
      for (int64_t f = 25 * i; f < 25 * i + 25; ++f) out.qk.data<float>()[i * 1500 + f] = 10;
    return out;
  }
  int encodes = 0;

 private:
  const WhisperTokenizer& tok_;
  std::vector<int32_t> window_;
  bool confident_;
  size_t next_ = 0;
};

struct WordRun {
  TranscribeResult result;
  int windows = 0;
};

// 10 s of audio; every window decodes " Hello, world" from 0 to 3 s.
WordRun transcribe_words(const TranscribeOptions& o, bool confident) {
  const auto& tok = english();
  const int32_t tb = tok.timestamp_begin();
  std::vector<int32_t> window{tb};
  for (int32_t id : tok.encode(" Hello, world")) window.push_back(id);
  window.push_back(tb + 150);
  AlignedScript src(tok, window, confident);
  const Tensor mel = Tensor::zeros({80, 1000 + 3000}, DType::f32);
  WordRun run{transcribe_mel(src, tok, mel, o), 0};
  run.windows = src.encodes;
  return run;
}

std::vector<std::string> word_texts(const Segment& s) {
  std::vector<std::string> out;
  for (const Word& w : s.words) out.push_back(w.word);
  return out;
}

TEST(WordTimestamps, SeekLoopFillsWordsAndMovesSegmentTimes) {
  TranscribeOptions o;
  const WordRun off = transcribe_words(o, true);
  ASSERT_EQ(off.result.segments.size(), 1u);
  EXPECT_TRUE(off.result.segments[0].words.empty());
  EXPECT_DOUBLE_EQ(off.result.segments[0].end, 3.0);

  o.word_timestamps = true;
  const WordRun on = transcribe_words(o, true);
  ASSERT_EQ(on.result.segments.size(), 1u);
  const Segment& s = on.result.segments[0];
  EXPECT_EQ(word_texts(s), (std::vector<std::string>{" Hello,", " world"}));
  EXPECT_GT(s.words[0].probability, 0.99);
  EXPECT_DOUBLE_EQ(s.start, s.words[0].start);
  EXPECT_DOUBLE_EQ(s.end, s.words[1].end);  // 3.0 s moved to the last word's end
  EXPECT_LT(s.end, 3.0);
  EXPECT_LE(s.words[0].end, s.words[1].start + 1e-9);
  EXPECT_EQ(on.windows, 1);  // single timestamp ending: no seek to the last word

  o.word_options.append_punctuations = "";  // "," stays a word of its own
  const WordRun apart = transcribe_words(o, true);
  EXPECT_EQ(word_texts(apart.result.segments.at(0)),
            (std::vector<std::string>{" Hello", ",", " world"}));
  o.word_options = {};
  o.word_options.prepend_punctuations = "";  // nothing to prepend here: unchanged
  EXPECT_EQ(word_texts(transcribe_words(o, true).result.segments.at(0)),
            (std::vector<std::string>{" Hello,", " world"}));
}

TEST(WordTimestamps, HallucinationSilenceThresholdDropsImprobableWindows) {
  TranscribeOptions o;
  o.word_timestamps = true;
  // Improbable words, but no threshold: kept.
  const WordRun kept = transcribe_words(o, false);
  ASSERT_EQ(kept.result.segments.size(), 1u);
  EXPECT_LT(kept.result.segments[0].words[0].probability, 0.15);
  // With a threshold each window is a hallucination surrounded by silence: dropped, the
  // seek moving to max(window start + 1 s, segment start), 1 s at a time. At seek 700 (the
  // last 3 s) the words run to 9.0 s and the silence after them, up to the audio's end at
  // 10 s, is not longer than the threshold: that window is kept.
  o.hallucination_silence_threshold = 1.0f;
  const WordRun dropped = transcribe_words(o, false);
  ASSERT_EQ(dropped.result.segments.size(), 1u);
  EXPECT_EQ(dropped.result.segments[0].seek, 700);
  EXPECT_DOUBLE_EQ(dropped.result.segments[0].end, 9.0);
  EXPECT_EQ(dropped.windows, 8);  // seeks 0, 100, ..., 700
  // Probable words of ordinary length are no hallucination.
  const WordRun confident = transcribe_words(o, true);
  EXPECT_EQ(confident.result.segments.size(), 1u);
}

}  // namespace
}  // namespace parley
