// serving/delta_stream.h: text goes out at timestamp pairs and with segments, never text the
// seek loop later drops; a window that may be judged silent sends nothing before its
// segments.
#include "serving/delta_stream.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "whisper/tokenizer.h"

namespace parley {
namespace {

const WhisperTokenizer& english() {
  static const WhisperTokenizer tok = WhisperTokenizer::from_tiktoken(
      std::string(PARLEY_TEST_DATA) + "/whisper/gpt2.tiktoken", false, 51864);
  return tok;
}

struct Fixture {
  std::vector<std::string> deltas;
  DeltaStream stream;
  explicit Fixture(std::optional<float> no_speech = 0.6f, std::optional<float> logprob = -1.0f)
      : stream(
            english(), [this](const std::string& d) { deltas.push_back(d); }, no_speech, logprob) {}
};

// One window: <|0.00|> Hello world <|1.00|><|1.00|> again <|2.00|> <|endoftext|>, whose
// segments are the two timestamped pieces.
struct Window {
  std::vector<int32_t> tokens;
  std::vector<Segment> segments;
};

Window a_window() {
  const WhisperTokenizer& t = english();
  const int32_t tb = t.timestamp_begin();
  const auto hello = t.encode(" Hello world");
  const auto again = t.encode(" again");
  Window w;
  w.tokens.push_back(tb);
  w.tokens.insert(w.tokens.end(), hello.begin(), hello.end());
  w.tokens.push_back(tb + 50);
  w.tokens.push_back(tb + 50);
  w.tokens.insert(w.tokens.end(), again.begin(), again.end());
  w.tokens.push_back(tb + 100);
  w.tokens.push_back(t.eot());
  Segment first, second;
  first.tokens = hello;
  second.tokens = again;
  w.segments = {first, second};
  return w;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x;
  return s;
}

TEST(DeltaStream, SendsAtTimestampPairsThenTheSegments) {
  Fixture f;
  const Window w = a_window();
  f.stream.on_no_speech_prob(0.01f);
  for (int32_t id : w.tokens) f.stream.on_token(id);
  // " Hello world" went out when the pair was sampled, before the window's segments.
  ASSERT_EQ(f.deltas.size(), 1u);
  EXPECT_EQ(f.deltas[0], " Hello world");
  for (const Segment& s : w.segments) f.stream.on_segment(s);
  f.stream.finish();
  EXPECT_EQ(joined(f.deltas), " Hello world again");
}

TEST(DeltaStream, AWindowThatMayBeSilentWaitsForItsSegments) {
  Fixture f;
  const Window w = a_window();
  f.stream.on_no_speech_prob(0.9f);  // > 0.6: the seek loop may skip this window
  for (int32_t id : w.tokens) f.stream.on_token(id);
  EXPECT_TRUE(f.deltas.empty());
  // Skipped as silence: no segments, nothing was ever sent. The next window streams again.
  f.stream.on_no_speech_prob(0.01f);
  for (int32_t id : w.tokens) f.stream.on_token(id);
  ASSERT_EQ(f.deltas.size(), 1u);
  for (const Segment& s : w.segments) f.stream.on_segment(s);
  EXPECT_EQ(joined(f.deltas), " Hello world again");
}

TEST(DeltaStream, HeldWindowKeptByTheSeekLoopSendsItsSegments) {
  Fixture f;
  const Window w = a_window();
  f.stream.on_no_speech_prob(0.9f);
  for (int32_t id : w.tokens) f.stream.on_token(id);
  for (const Segment& s : w.segments) f.stream.on_segment(s);
  f.stream.finish();
  EXPECT_EQ(joined(f.deltas), " Hello world again");
}

TEST(DeltaStream, WithoutALogprobThresholdNoWindowIsHeld) {
  // The silence rule needs both thresholds; without logprob_threshold nothing is skipped.
  Fixture f(0.6f, std::nullopt);
  const Window w = a_window();
  f.stream.on_no_speech_prob(0.99f);
  for (int32_t id : w.tokens) f.stream.on_token(id);
  ASSERT_EQ(f.deltas.size(), 1u);
  EXPECT_EQ(f.deltas[0], " Hello world");
}

}  // namespace
}  // namespace parley
