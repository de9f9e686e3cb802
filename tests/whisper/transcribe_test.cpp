// The seek loop of transcribe() and the cutting of windows into segments, against the rules
// of openai/whisper whisper/transcribe.py: exact segments, seeks and prompts from scripted
// logits; and, when the real tiny.en model is installed, jfk.wav end to end.
#include "whisper/transcribe.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "audio/decode.h"
#include "audio/mel.h"
#include "engine/error.h"
#include "whisper/model.h"
#include "whisper/tokenizer.h"
#include "whisper/whisper_test_util.h"

namespace parley {
namespace {

using whisper_test::english;
using whisper_test::kNeedsFfmpeg;
using whisper_test::model_dir;
using whisper_test::multilingual;

// ---------------------------------------------------------------- cut_window

constexpr int32_t kTb = 50363;  // <|0.00|> of the English-only vocabulary

TEST(CutWindow, PairsCutSegmentsAndSeekGoesToTheLastTimestamp) {
  // <|0.00|> a <|2.00|><|2.00|> b <|5.00|><|5.00|>: ends with a pair.
  const std::vector<int32_t> t{kTb, 1, kTb + 100, kTb + 100, 2, kTb + 250, kTb + 250};
  const WindowCut c = cut_window(t, kTb, 10.0, 3000);
  ASSERT_EQ(c.slices.size(), 2u);
  EXPECT_EQ(c.slices[0].begin, 0u);
  EXPECT_EQ(c.slices[0].end, 3u);
  EXPECT_DOUBLE_EQ(c.slices[0].start, 10.0);
  EXPECT_DOUBLE_EQ(c.slices[0].end_time, 12.0);
  EXPECT_EQ(c.slices[1].begin, 3u);
  EXPECT_EQ(c.slices[1].end, 6u);  // the closing <|5.00|> belongs to no segment
  EXPECT_DOUBLE_EQ(c.slices[1].start, 12.0);
  EXPECT_DOUBLE_EQ(c.slices[1].end_time, 15.0);
  EXPECT_EQ(c.seek_advance, 500);  // 250 steps * 2 frames
}

TEST(CutWindow, SingleTimestampEndingTakesTheWholeWindow) {
  // <|0.00|> a <|2.00|><|2.00|> b <|7.00|> (eot)
  const std::vector<int32_t> t{kTb, 1, kTb + 100, kTb + 100, 2, kTb + 350};
  const WindowCut c = cut_window(t, kTb, 0.0, 2500);
  ASSERT_EQ(c.slices.size(), 2u);
  EXPECT_EQ(c.slices[1].begin, 3u);
  EXPECT_EQ(c.slices[1].end, 6u);
  EXPECT_DOUBLE_EQ(c.slices[1].end_time, 7.0);
  EXPECT_EQ(c.seek_advance, 2500);
}

TEST(CutWindow, NoPairGivesOneSegmentEndingAtTheLastTimestamp) {
  const std::vector<int32_t> t{kTb, 1, 2, kTb + 150};
  WindowCut c = cut_window(t, kTb, 30.0, 3000);
  ASSERT_EQ(c.slices.size(), 1u);
  EXPECT_EQ(c.slices[0].end, 4u);
  EXPECT_DOUBLE_EQ(c.slices[0].start, 30.0);
  EXPECT_DOUBLE_EQ(c.slices[0].end_time, 33.0);
  EXPECT_EQ(c.seek_advance, 3000);
  // No timestamp (or only <|0.00|>): the segment spans the window's audio.
  c = cut_window(std::vector<int32_t>{1, 2}, kTb, 30.0, 1234);
  EXPECT_DOUBLE_EQ(c.slices[0].end_time, 30.0 + 12.34);
  c = cut_window(std::vector<int32_t>{kTb, 1, 2}, kTb, 0.0, 1234);
  EXPECT_DOUBLE_EQ(c.slices[0].end_time, 12.34);
  EXPECT_EQ(c.seek_advance, 1234);
  c = cut_window(std::vector<int32_t>{}, kTb, 0.0, 77);
  ASSERT_EQ(c.slices.size(), 1u);
  EXPECT_EQ(c.slices[0].end, 0u);
}

TEST(Transcribe, FormatTimestamp) {
  EXPECT_EQ(format_timestamp(0.0), "00:00.000");
  EXPECT_EQ(format_timestamp(65.4321), "01:05.432");
  EXPECT_EQ(format_timestamp(3725.5), "01:02:05.500");
}

// ---------------------------------------------------------------- the seek loop

// Scripted windows: on each encode() the next window's script starts. In a decode() call the
// last row gets 20 on the script's next token (after the script: eot; kFlat: nothing), and
// rows of <|startoftranscript|> get the window's no_speech logit. Records every window's
// first decode() input (the initial tokens).
class WindowScript : public LogitsSource {
 public:
  static constexpr int32_t kFlat = -1;
  struct Window {
    std::vector<int32_t> tokens;
    float no_speech_logit = 0;
  };
  WindowScript(const WhisperTokenizer& tok, std::vector<Window> windows)
      : tok_(tok), windows_(std::move(windows)) {}

  void encode(const Tensor& mel) override {
    EXPECT_EQ(mel.shape(), Shape({80, 3000}));
    mels.push_back(mel.data<float>()[probe_frame]);  // mel bin 0
    ++window_;
    next_ = 0;
    first_call_ = true;
  }
  Tensor decode(std::span<const int32_t> tokens) override {
    if (first_call_) initial.emplace_back(tokens.begin(), tokens.end());
    if (after_reset_) attempts.emplace_back(tokens.begin(), tokens.end());
    first_call_ = false;
    after_reset_ = false;
    const auto& w = windows_.at(size_t(window_ - 1));
    const int64_t v = tok_.n_vocab();
    Tensor logits = Tensor::zeros({int64_t(tokens.size()), v}, DType::f32);
    float* p = logits.data<float>();
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] == tok_.sot()) p[int64_t(i) * v + tok_.no_speech()] = w.no_speech_logit;
    }
    const int32_t next = next_ < w.tokens.size() ? w.tokens[next_] : tok_.eot();
    ++next_;
    if (next != kFlat) p[int64_t(tokens.size() - 1) * v + next] = 20.0f;
    return logits;
  }
  void reset() override { after_reset_ = true; }
  // Rows all get the script's next token (one script step per call).
  void fork(int n) override {
    forks.push_back(n);
    rows_ = n;
  }
  Tensor decode_rows(std::span<const int32_t> tokens) override {
    EXPECT_EQ(int(tokens.size()), rows_);
    const auto& w = windows_.at(size_t(window_ - 1));
    const int64_t v = tok_.n_vocab();
    Tensor logits = Tensor::zeros({int64_t(tokens.size()), v}, DType::f32);
    const int32_t next = next_ < w.tokens.size() ? w.tokens[next_] : tok_.eot();
    ++next_;
    for (size_t r = 0; r < tokens.size(); ++r) {
      if (next != kFlat) logits.data<float>()[int64_t(r) * v + next] = 20.0f;
    }
    return logits;
  }
  void reorder_rows(std::span<const int32_t>) override {}
  int n_text_ctx() const override { return 448; }
  int n_mels() const override { return 80; }

  std::vector<std::vector<int32_t>> initial;
  std::vector<std::vector<int32_t>> attempts;  // the first decode() input after each reset()
  std::vector<int> forks;
  std::vector<float> mels;
  int64_t probe_frame = 2999;
  int window_ = 0;

 private:
  const WhisperTokenizer& tok_;
  std::vector<Window> windows_;
  size_t next_ = 0;
  bool first_call_ = true;
  bool after_reset_ = false;
  int rows_ = 0;
};

TEST(Transcribe, SeekLoopSegmentsPromptsAndSilence) {
  const auto& tok = english();
  const int32_t tb = tok.timestamp_begin();
  const int32_t hello = tok.encode(" Hello")[0];
  const int32_t world = tok.encode(" world")[0];
  const int32_t again = tok.encode(" again")[0];
  // 45 s of audio: content_frames 4500, padded mel 7500 frames. Frame 3499 is marked to
  // check that window 2 (seek 500) ends at the right place: its last column is frame 3499.
  Tensor mel = Tensor::zeros({80, 7500}, DType::f32);
  mel.data<float>()[3499] = 0.25f;
  const std::vector<WindowScript::Window> windows = {
      // seek 0: two segments, ends with a pair at 5.00 s -> seek 500.
      {{tb, hello, tb + 100, tb + 100, world, tb + 250, tb + 250}, -5.0f},
      // seek 500: " " (blank, cleared) then " again" up to 3.00 s, single timestamp at
      // the end -> seek += 3000.
      {{tb, 220, tb + 50, tb + 50, again, tb + 150}, -5.0f},
      // seek 3500: 10 s of silence: no_speech likely and a low avg_logprob -> skipped.
      {{WindowScript::kFlat}, 30.0f},
  };
  WindowScript src(tok, windows);
  TranscribeOptions o;
  std::vector<int> seen;
  o.on_segment = [&](const Segment& s) { seen.push_back(s.id); };
  const TranscribeResult r = transcribe_mel(src, tok, mel, o);

  EXPECT_EQ(src.window_, 3);
  EXPECT_EQ(src.mels[1], 0.25f);
  EXPECT_EQ(src.mels[2], 0.0f);  // seek 3500: 1000 frames of audio, then zeros
  ASSERT_EQ(r.segments.size(), 4u);
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3}));
  const auto& s = r.segments;
  EXPECT_EQ(s[0].seek, 0);
  EXPECT_DOUBLE_EQ(s[0].start, 0.0);
  EXPECT_DOUBLE_EQ(s[0].end, 2.0);
  EXPECT_EQ(s[0].text, " Hello");
  EXPECT_EQ(s[0].tokens, (std::vector<int32_t>{tb, hello, tb + 100}));
  EXPECT_DOUBLE_EQ(s[1].start, 2.0);
  EXPECT_DOUBLE_EQ(s[1].end, 5.0);
  EXPECT_EQ(s[1].text, " world");
  EXPECT_EQ(s[2].seek, 500);
  EXPECT_DOUBLE_EQ(s[2].start, 5.0);
  EXPECT_DOUBLE_EQ(s[2].end, 6.0);
  EXPECT_EQ(s[2].text, "");  // only " ": cleared
  EXPECT_TRUE(s[2].tokens.empty());
  EXPECT_EQ(s[3].id, 3);
  EXPECT_DOUBLE_EQ(s[3].start, 6.0);
  EXPECT_DOUBLE_EQ(s[3].end, 8.0);
  EXPECT_EQ(s[3].tokens, (std::vector<int32_t>{tb + 50, again, tb + 150}));
  EXPECT_EQ(r.text, " Hello world again");
  EXPECT_EQ(r.language, "en");
  EXPECT_GT(s[0].avg_logprob, -0.1f);
  EXPECT_LT(s[0].no_speech_prob, 0.01f);

  // Prompts: window 2 gets every earlier segment's tokens, window 3 also the cleared
  // segment's (none) and segment 3's.
  ASSERT_EQ(src.initial.size(), 3u);
  EXPECT_EQ(src.initial[0], std::vector<int32_t>{tok.sot()});
  EXPECT_EQ(src.initial[1], (std::vector<int32_t>{tok.sot_prev(), tb, hello, tb + 100, tb + 100,
                                                  world, tb + 250, tok.sot()}));
  EXPECT_EQ(src.initial[2].size(), 1u + 6u + 3u + 1u);
}

TEST(Transcribe, NoConditioningAndInitialPromptAndNoTimestamps) {
  const auto& tok = english();
  const int32_t hello = tok.encode(" Hello")[0];
  Tensor mel = Tensor::zeros({80, 3000 + 4000}, DType::f32);  // 40 s: windows of 3000, 1000
  WindowScript src(tok, {{{hello}, -5.0f}, {{hello, hello}, -5.0f}});
  TranscribeOptions o;
  o.without_timestamps = true;
  o.condition_on_previous_text = false;
  o.initial_prompt = "  Names.  ";
  const TranscribeResult r = transcribe_mel(src, tok, mel, o);
  const auto prompt = tok.encode(" Names.");
  std::vector<int32_t> first{tok.sot_prev()};
  first.insert(first.end(), prompt.begin(), prompt.end());
  first.push_back(tok.sot());
  first.push_back(tok.no_timestamps());
  ASSERT_EQ(src.initial.size(), 2u);
  EXPECT_EQ(src.initial[0], first);
  EXPECT_EQ(src.initial[1], (std::vector<int32_t>{tok.sot(), tok.no_timestamps()}));
  ASSERT_EQ(r.segments.size(), 2u);
  EXPECT_DOUBLE_EQ(r.segments[0].end, 30.0);
  EXPECT_EQ(r.segments[1].seek, 3000);
  EXPECT_DOUBLE_EQ(r.segments[1].start, 30.0);
  EXPECT_DOUBLE_EQ(r.segments[1].end, 40.0);
  EXPECT_EQ(r.text, " Hello Hello Hello");  // the initial prompt is not part of the text
}

TEST(Transcribe, DetectsTheLanguageOnceFromThePaddedMel) {
  const WhisperTokenizer& tok = multilingual();
  const int32_t de = tok.language_token("de");
  const int32_t hallo = tok.encode(" Hallo")[0];
  // 10 s of audio; frame 2000 lies in the 30 s padding. Language detection sees the padded
  // mel's first 3000 frames (2000 included); the decoder sees 1000 frames then zeros.
  Tensor mel = Tensor::zeros({80, 1000 + 3000}, DType::f32);
  mel.data<float>()[2000] = 0.5f;
  WindowScript src(tok, {{{de}, -5.0f}, {{tok.timestamp_begin(), hallo}, -5.0f}});
  src.probe_frame = 2000;
  const TranscribeResult r = transcribe_mel(src, tok, mel, TranscribeOptions{});
  EXPECT_EQ(r.language, "de");
  ASSERT_EQ(src.mels.size(), 2u);
  EXPECT_EQ(src.mels[0], 0.5f);
  EXPECT_EQ(src.mels[1], 0.0f);
  ASSERT_EQ(src.initial.size(), 2u);
  EXPECT_EQ(src.initial[0], std::vector<int32_t>{tok.sot()});
  EXPECT_EQ(src.initial[1], (std::vector<int32_t>{tok.sot(), de, tok.transcribe()}));
  EXPECT_EQ(r.text, " Hallo");
}

// ---------------------------------------------------------------- fallback and prompts

TranscribeOptions text_only() {
  TranscribeOptions o;
  o.without_timestamps = true;
  return o;
}

TEST(TranscribeFallback, RepetitiveTextRetriesAtTheNextTemperatureWithBestOf) {
  const auto& tok = english();
  const int32_t hello = tok.encode(" Hello")[0];
  const int32_t world = tok.encode(" world")[0];
  std::vector<int32_t> script(40, hello);  // attempt 1: " Hello" x 40 (ratio ~12)
  script.push_back(tok.eot());
  script.push_back(tok.eot());  // the beams' last step: the other beams end
  script.push_back(world);      // attempt 2 goes on with the script
  Tensor mel = Tensor::zeros({80, 3000 + 1000}, DType::f32);
  TranscribeOptions o = text_only();
  o.temperatures = {0.0f, 0.4f};
  o.beam_size = 3;
  o.best_of = 4;
  {
    WindowScript src(tok, {{script, -5.0f}});
    const TranscribeResult r = transcribe_mel(src, tok, mel, o);
    EXPECT_EQ(r.text, " world");
    ASSERT_EQ(r.segments.size(), 1u);
    EXPECT_FLOAT_EQ(r.segments[0].temperature, 0.4f);
    // Beam search at 0, best_of sampling at 0.4: the reference's decode_with_fallback.
    EXPECT_EQ(src.forks, (std::vector<int>{3, 4}));
    EXPECT_EQ(src.attempts.size(), 2u);
  }
  o.compression_ratio_threshold = std::nullopt;  // no retry
  WindowScript src(tok, {{script, -5.0f}});
  const TranscribeResult r = transcribe_mel(src, tok, mel, o);
  EXPECT_EQ(r.segments[0].temperature, 0.0f);
  EXPECT_GT(r.segments[0].compression_ratio, 2.4f);
  EXPECT_EQ(src.forks, std::vector<int>{3});
}

TEST(TranscribeFallback, UnlikelyTextRetriesAndAHighTemperatureResetsThePrompt) {
  const auto& tok = english();
  const int32_t hello = tok.encode(" Hello")[0];
  constexpr int32_t kFlat = WindowScript::kFlat;
  // Window 1: five flat steps (avg_logprob ~ -10.8), then " Hello" on the retry.
  // Window 2: " Hello".
  const std::vector<WindowScript::Window> windows = {
      {{kFlat, kFlat, kFlat, kFlat, kFlat, hello}, -5.0f}, {{hello}, -5.0f}};
  Tensor mel = Tensor::zeros({80, 3000 + 4000}, DType::f32);
  auto run = [&](TranscribeOptions o) {
    o.sample_len = 5;
    auto src = std::make_unique<WindowScript>(tok, windows);
    const TranscribeResult r = transcribe_mel(*src, tok, mel, o);
    return std::make_pair(r, std::move(src));
  };
  TranscribeOptions o = text_only();
  o.temperatures = {0.0f, 0.6f};
  auto [r, src] = run(o);
  ASSERT_EQ(r.segments.size(), 2u);
  EXPECT_FLOAT_EQ(r.segments[0].temperature, 0.6f);
  EXPECT_EQ(r.segments[0].text, " Hello");
  ASSERT_EQ(src->initial.size(), 2u);
  // Decoded above 0.5: window 2 gets no prompt.
  EXPECT_EQ(src->initial[1], (std::vector<int32_t>{tok.sot(), tok.no_timestamps()}));

  o.temperatures = {0.0f, 0.4f};  // at 0.4 the prompt stays
  auto [r2, src2] = run(o);
  EXPECT_FLOAT_EQ(r2.segments[0].temperature, 0.4f);
  EXPECT_EQ(src2->initial[1],
            (std::vector<int32_t>{tok.sot_prev(), hello, tok.sot(), tok.no_timestamps()}));

  o.logprob_threshold = std::nullopt;  // flat text is kept
  auto [r3, src3] = run(o);
  EXPECT_EQ(r3.segments[0].temperature, 0.0f);
  EXPECT_EQ(r3.segments[0].tokens.size(), 5u);
}

TEST(TranscribePrompts, CarryInitialPromptKeepsItBeforeEveryWindow) {
  const auto& tok = english();
  const int32_t hello = tok.encode(" Hello")[0];
  const int32_t a = tok.encode(" a")[0];
  std::string text;
  for (int i = 0; i < 210; ++i) text += " a";
  Tensor mel = Tensor::zeros({80, 3000 + 7000}, DType::f32);  // 3 windows
  const std::vector<WindowScript::Window> windows = {
      {std::vector<int32_t>(30, hello), -5.0f}, {{hello}, -5.0f}, {{hello}, -5.0f}};
  TranscribeOptions o = text_only();
  o.compression_ratio_threshold = std::nullopt;
  o.initial_prompt = text;
  o.carry_initial_prompt = true;
  WindowScript src(tok, windows);
  transcribe_mel(src, tok, mel, o);
  ASSERT_EQ(src.initial.size(), 3u);
  // Window 2: <|startofprev|>, the 210 prompt tokens, the last 223 - 210 = 13 " Hello"s.
  const auto& w2 = src.initial[1];
  ASSERT_EQ(w2.size(), 1u + 223u + 2u);
  EXPECT_EQ(w2[1], a);
  EXPECT_EQ(w2[210], a);
  EXPECT_EQ(w2[211], hello);
  EXPECT_EQ(w2[223], hello);
  // Without carrying, the initial prompt slides out of window 2's budget from the front.
  o.carry_initial_prompt = false;
  WindowScript plain_src(tok, windows);
  transcribe_mel(plain_src, tok, mel, o);
  EXPECT_EQ(plain_src.initial[1][1], a);
  EXPECT_EQ(plain_src.initial[1][223 - 30 + 1], hello);
  EXPECT_EQ(plain_src.initial[1].size(), 1u + 223u + 2u);

  // No conditioning: the carried prompt alone.
  o.carry_initial_prompt = true;
  o.condition_on_previous_text = false;
  o.initial_prompt = "Names.";
  WindowScript src3(tok, windows);
  transcribe_mel(src3, tok, mel, o);
  std::vector<int32_t> expected{tok.sot_prev()};
  for (int32_t t : tok.encode(" Names.")) expected.push_back(t);
  expected.push_back(tok.sot());
  expected.push_back(tok.no_timestamps());
  EXPECT_EQ(src3.initial[1], expected);
  EXPECT_EQ(src3.initial[2], expected);
}

TEST(TranscribePrompts, PrefixAndHotwordsGoToEveryWindow) {
  const auto& tok = english();
  const int32_t hello = tok.encode(" Hello")[0];
  Tensor mel = Tensor::zeros({80, 3000 + 4000}, DType::f32);
  const std::vector<WindowScript::Window> windows = {{{hello}, -5.0f}, {{hello}, -5.0f}};
  TranscribeOptions o = text_only();
  o.hotwords = "  ComfyUI, Kubernetes ";
  WindowScript src(tok, windows);
  transcribe_mel(src, tok, mel, o);
  const auto hot = tok.encode(" ComfyUI, Kubernetes");
  std::vector<int32_t> w1{tok.sot_prev()};
  w1.insert(w1.end(), hot.begin(), hot.end());
  std::vector<int32_t> w2 = w1;
  w1.push_back(tok.sot());
  w1.push_back(tok.no_timestamps());
  w2.push_back(hello);  // the previous text after the hotwords
  w2.push_back(tok.sot());
  w2.push_back(tok.no_timestamps());
  ASSERT_EQ(src.initial.size(), 2u);
  EXPECT_EQ(src.initial[0], w1);
  EXPECT_EQ(src.initial[1], w2);

  o.hotwords.reset();
  o.prefix = " And so ";
  o.condition_on_previous_text = false;
  WindowScript src2(tok, windows);
  const TranscribeResult r = transcribe_mel(src2, tok, mel, o);
  std::vector<int32_t> p{tok.sot(), tok.no_timestamps()};
  for (int32_t t : tok.encode(" And so")) p.push_back(t);
  EXPECT_EQ(src2.initial[0], p);
  EXPECT_EQ(src2.initial[1], p);
  EXPECT_EQ(r.text, " Hello Hello");  // the prefix is not part of the sampled text
}

TEST(TranscribeClips, CompleteWindowsOnlyStopsBeforeACutOffWindow) {
  const auto& tok = english();
  const int32_t hello = tok.encode(" Hello")[0];
  Tensor mel = Tensor::zeros({80, 7500 + 3000}, DType::f32);  // 75 s
  const std::vector<WindowScript::Window> windows(3, {{hello}, -5.0f});
  TranscribeOptions o = text_only();  // no timestamps: every window moves the seek 30 s
  WindowScript all(tok, windows);
  const TranscribeResult whole = transcribe_mel(all, tok, mel, o);
  EXPECT_EQ(all.window_, 3);
  EXPECT_EQ(whole.next_seek, 7500);

  o.complete_windows_only = true;
  WindowScript complete(tok, windows);
  const TranscribeResult r = transcribe_mel(complete, tok, mel, o);
  EXPECT_EQ(complete.window_, 2);  // 0 and 3000; the one at 6000 has 15 s
  ASSERT_EQ(r.segments.size(), 2u);
  EXPECT_EQ(r.segments[1].seek, 3000);
  EXPECT_EQ(r.next_seek, 6000);
  EXPECT_EQ(r.text, " Hello Hello");

  Tensor exact = Tensor::zeros({80, 6000 + 3000}, DType::f32);  // 60 s: both windows whole
  WindowScript two(tok, windows);
  EXPECT_EQ(transcribe_mel(two, tok, exact, o).next_seek, 6000);
  EXPECT_EQ(two.window_, 2);
}

TEST(TranscribeClips, ClipTimestampsPickTheDecodedParts) {
  const auto& tok = english();
  const int32_t hello = tok.encode(" Hello")[0];
  Tensor mel = Tensor::zeros({80, 6000 + 3000}, DType::f32);  // 60 s
  WindowScript src(tok, {{{hello}, -5.0f}, {{hello}, -5.0f}});
  TranscribeOptions o = text_only();
  o.clip_timestamps = parse_clip_timestamps("5,10,40");
  const TranscribeResult r = transcribe_mel(src, tok, mel, o);
  ASSERT_EQ(r.segments.size(), 2u);
  EXPECT_EQ(r.segments[0].seek, 500);
  EXPECT_DOUBLE_EQ(r.segments[0].start, 5.0);
  EXPECT_DOUBLE_EQ(r.segments[0].end, 10.0);  // the clip's 500 frames
  EXPECT_EQ(r.segments[1].seek, 4000);
  EXPECT_DOUBLE_EQ(r.segments[1].start, 40.0);
  EXPECT_DOUBLE_EQ(r.segments[1].end, 60.0);  // an odd count: to the end of the audio
  EXPECT_EQ(src.window_, 2);

  EXPECT_EQ(parse_clip_timestamps(""), std::vector<double>{});
  EXPECT_EQ(parse_clip_timestamps("0"), std::vector<double>{0.0});
  EXPECT_EQ(parse_clip_timestamps("1.5, 3"), (std::vector<double>{1.5, 3.0}));
  EXPECT_THROW(parse_clip_timestamps("1,x"), Error);
  EXPECT_THROW(parse_clip_timestamps("-1"), Error);
}

TEST(TranscribeOptionsCheck, BadOptionsAreInvalidArguments) {
  const auto& tok = english();
  Tensor mel = Tensor::zeros({80, 3000 + 100}, DType::f32);
  auto kind = [&](const TranscribeOptions& o) {
    WindowScript src(tok, {{{}, -5.0f}});
    try {
      transcribe_mel(src, tok, mel, o);
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::internal;
  };
  TranscribeOptions o;
  o.temperatures = {};
  EXPECT_EQ(kind(o), ErrorKind::invalid_argument);
  o = {};
  o.temperatures = {0.0f, -1.0f};
  EXPECT_EQ(kind(o), ErrorKind::invalid_argument);
  o = {};
  o.patience = 2.0f;
  EXPECT_EQ(kind(o), ErrorKind::invalid_argument);
  o = {};
  o.length_penalty = -0.5f;
  EXPECT_EQ(kind(o), ErrorKind::invalid_argument);
  o = {};
  o.clip_timestamps = {-3.0};
  EXPECT_EQ(kind(o), ErrorKind::invalid_argument);
}

// ---------------------------------------------------------------- the real model

// Golden segments from faster-whisper 1.x on the same CTranslate2 model (fp32 compute),
// whose greedy decoding follows openai/whisper's rules:
//   WhisperModel(DIR, device="cpu", compute_type="float32").transcribe("jfk.wav",
//       beam_size=1, best_of=1, temperature=0.0, condition_on_previous_text=True,
//       without_timestamps=False, vad_filter=False, language="en")
// -> [0.00 -> 7.74] " And so my fellow Americans ask not what your country can do for you"
//    [7.74 -> 10.74] " ask what you can do for your country"
//    avg_logprob -0.3775, no_speech_prob 0.0628 (one window).
const std::vector<int32_t> kJfkTokens = {50363, 843,  523, 616, 5891, 3399, 1265,  407,   644,
                                         534,   1499, 460, 466, 329,  345,  50750, 50750, 1265,
                                         644,   345,  460, 466, 329,  534,  1499,  50900};

TEST(TranscribeReal, JfkTinyEnMatchesTheReference) {
  if (!std::filesystem::exists(model_dir() + "/model.bin")) {
    GTEST_SKIP() << "no tiny.en model at " << model_dir();
  }
  const auto model = WhisperModel::load(model_dir());
  WhisperSession session(model);
  const auto& tok = english();
  const auto samples = load_audio(std::string(PARLEY_TEST_DATA) + "/audio/jfk.wav");
  const WhisperRunCounters before = whisper_run_counters();
  const TranscribeResult r = transcribe(session, tok, samples, TranscribeOptions{});
  const WhisperRunCounters after = whisper_run_counters();
  EXPECT_EQ(after.encoder_runs - before.encoder_runs, 1u);                     // one window
  EXPECT_EQ(after.decoder_runs - before.decoder_runs, kJfkTokens.size() + 1);  // + <|endoftext|>
  EXPECT_NE(r.text.find("ask not what your country can do for you"), std::string::npos) << r.text;
  std::vector<int32_t> tokens;
  for (const auto& s : r.segments) tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
  EXPECT_EQ(tokens, kJfkTokens);
  ASSERT_EQ(r.segments.size(), 2u);
  EXPECT_DOUBLE_EQ(r.segments[0].start, 0.0);
  EXPECT_DOUBLE_EQ(r.segments[0].end, 7.74);
  EXPECT_DOUBLE_EQ(r.segments[1].start, 7.74);
  EXPECT_DOUBLE_EQ(r.segments[1].end, 10.74);
  EXPECT_EQ(r.segments[1].text, " ask what you can do for your country");
  EXPECT_EQ(r.language, "en");
  // faster-whisper's figures come from CTranslate2's scores and its own mel: close, not
  // bit-equal.
  std::printf(
      "jfk: avg_logprob %.6f (faster-whisper -0.377484), no_speech_prob %.6f (0.062824), "
      "compression_ratio %.6f (1.386667)\n",
      r.segments[0].avg_logprob, r.segments[0].no_speech_prob, r.segments[0].compression_ratio);
  // Measured: -0.377512, 0.062824, 1.386667 (104 / 75).
  EXPECT_NEAR(r.segments[0].avg_logprob, -0.377484, 1e-3);
  EXPECT_NEAR(r.segments[0].no_speech_prob, 0.062824, 1e-4);
  EXPECT_NEAR(r.segments[0].compression_ratio, 104.0 / 75.0, 1e-6);
}

}  // namespace
}  // namespace parley

namespace parley {
namespace {

// Vocabulary hints on the real model: hotwords.mp3 says "ComfyUI", which tiny.en writes as
// "comfy eye" without a hint (measured 2026-11-30).
TEST(TranscribeReal, HotwordsTeachTheRealModelAWord) {
  if (!has_ffmpeg()) GTEST_SKIP() << kNeedsFfmpeg;
  if (!std::filesystem::exists(model_dir() + "/model.bin")) {
    GTEST_SKIP() << "no tiny.en model at " << model_dir();
  }
  const auto model = WhisperModel::load(model_dir());
  WhisperSession session(model);
  const auto samples = load_audio(std::string(PARLEY_TEST_DATA) + "/audio/hotwords.mp3");
  TranscribeOptions o;
  const TranscribeResult plain = transcribe(session, english(), samples, o);
  EXPECT_EQ(plain.text.find("ComfyUI"), std::string::npos) << plain.text;
  o.hotwords = "ComfyUI";
  const TranscribeResult hinted = transcribe(session, english(), samples, o);
  EXPECT_NE(hinted.text.find("ComfyUI"), std::string::npos) << hinted.text;
}

// Sampling on the real model: a seed gives one transcript, run after run.
TEST(TranscribeReal, SampledTranscriptDependsOnlyOnTheSeed) {
  if (!std::filesystem::exists(model_dir() + "/model.bin")) {
    GTEST_SKIP() << "no tiny.en model at " << model_dir();
  }
  const auto model = WhisperModel::load(model_dir());
  WhisperSession session(model);
  const auto samples = load_audio(std::string(PARLEY_TEST_DATA) + "/audio/jfk.wav");
  TranscribeOptions o;
  o.temperatures = {1.0f};
  o.best_of = 2;
  auto tokens = [&](uint64_t seed) {
    o.seed = seed;
    std::vector<int32_t> out;
    for (const auto& s : transcribe(session, english(), samples, o).segments) {
      out.insert(out.end(), s.tokens.begin(), s.tokens.end());
      EXPECT_EQ(s.temperature, 1.0f);
    }
    return out;
  };
  const auto a = tokens(11);
  EXPECT_EQ(tokens(11), a);
  bool differs = false;
  for (uint64_t seed = 12; seed < 15 && !differs; ++seed) differs = tokens(seed) != a;
  EXPECT_TRUE(differs);  // at T = 1 tiny.en's choices spread
}

// Sessions of one model transcribing in several threads at once (as the server's workers
// do) get what each gets alone, token for token and score for score: nothing a session
// computes with is shared (the GEMM library's scratch memory once was).
TEST(TranscribeReal, SessionsInThreadsTranscribeAsAlone) {
  if (!has_ffmpeg()) GTEST_SKIP() << kNeedsFfmpeg;
  if (!std::filesystem::exists(model_dir() + "/model.bin")) {
    GTEST_SKIP() << "no tiny.en model at " << model_dir();
  }
  const auto model = WhisperModel::load(model_dir());
  const std::vector<std::string> names = {"jfk.wav", "english.wav", "hotwords.mp3"};
  std::vector<std::vector<float>> samples;
  for (const auto& name : names)
    samples.push_back(load_audio(std::string(PARLEY_TEST_DATA) + "/audio/" + name));
  TranscribeOptions o;
  o.temperatures = {0.0f};
  const auto run = [&](WhisperSession& session, size_t i) {
    std::vector<int32_t> tokens;
    std::vector<float> scores;
    for (const auto& s : transcribe(session, english(), samples[i], o).segments) {
      tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
      scores.push_back(s.avg_logprob);
      scores.push_back(s.no_speech_prob);
    }
    return std::make_pair(tokens, scores);
  };
  std::vector<std::pair<std::vector<int32_t>, std::vector<float>>> alone;
  {
    WhisperSession session(model);
    for (size_t i = 0; i < names.size(); ++i) alone.push_back(run(session, i));
  }
  constexpr int kRounds = 2;
  std::vector<std::vector<std::pair<std::vector<int32_t>, std::vector<float>>>> got(names.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < names.size(); ++i) {
    threads.emplace_back([&, i] {
      WhisperSession session(model);
      for (int r = 0; r < kRounds; ++r) got[i].push_back(run(session, i));
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_GT(alone[i].first.size(), 3u) << names[i];
    for (int r = 0; r < kRounds; ++r) {
      EXPECT_EQ(got[i][size_t(r)].first, alone[i].first) << names[i] << " round " << r;
      EXPECT_EQ(got[i][size_t(r)].second, alone[i].second) << names[i] << " round " << r;
    }
  }
}

TEST(TranscribeReal, TokenLogprobsAddUpToTheWindowsScore) {
  if (!std::filesystem::exists(model_dir() + "/model.bin")) {
    GTEST_SKIP() << "no tiny.en model at " << model_dir();
  }
  const auto model = WhisperModel::load(model_dir());
  WhisperSession session(model);
  const auto& tok = english();
  const auto samples = load_audio(std::string(PARLEY_TEST_DATA) + "/audio/jfk.wav");
  TranscribeOptions o;
  o.token_logprobs = true;
  const TranscribeResult r = transcribe(session, tok, samples, o);
  // One entry per text token, in order, spelling the transcript.
  std::string joined;
  size_t n_text = 0, n_all = 0;
  double sum = 0;
  for (const auto& s : r.segments) {
    ASSERT_EQ(s.token_logprobs.size(), s.tokens.size());
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      EXPECT_LE(s.token_logprobs[i], 0.0f);
      sum += s.token_logprobs[i];
      ++n_all;
      n_text += s.tokens[i] < tok.eot();
    }
  }
  ASSERT_EQ(r.logprobs.size(), n_text);
  for (const auto& t : r.logprobs) joined += t.bytes;
  EXPECT_EQ(joined, r.text);
  // avg_logprob is (sum over the sampled tokens + <|endoftext|>'s) / (n + 1): the tokens'
  // own log-probabilities add up to it, less <|endoftext|>'s (<= 0), up to fp32 noise.
  const double window = double(r.segments[0].avg_logprob) * double(n_all + 1);
  EXPECT_GE(sum, window - 1e-3);
  EXPECT_LT(sum - window, 0.5);
  // Without the option nothing is scored.
  const TranscribeResult plain = transcribe(session, tok, samples, TranscribeOptions{});
  EXPECT_TRUE(plain.logprobs.empty());
  EXPECT_TRUE(plain.segments[0].token_logprobs.empty());
}

}  // namespace
}  // namespace parley
