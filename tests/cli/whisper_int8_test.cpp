// `parley transcribe --dtype int8` (the CPU int8 configuration: q8_0 decoder weights, the
// vocabulary product exact near the top) held to the f32 parity path with the real tiny.en:
// greedy decoding of every clip in the shared audio gives at most 2 differing text tokens
// (the bar) and the same text on jfk.wav; its timestamps are the parity path's, or,
// where more than 2 tokens differ, only timestamps differ, by 0.2 s at most (the jfk
// recordings' segment boundary at 7.74 s is a near-tie that q8_0 weights turn to 7.54 s, and
// the end 10.74 s to 10.58 s, in one container or another as the f32 arithmetic's rounding
// moves: 3 tokens; docs/DECODING.md). --dtype int8 where it does not apply is a clear error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/run_parley.h"

namespace {

namespace fs = std::filesystem;
using parley_test::default_tiny_en_dir;
using parley_test::run_parley;

// Every token of a verbose_json transcript, timestamps included.
std::vector<int> tokens_of(const nlohmann::json& j) {
  std::vector<int> out;
  for (const auto& s : j["segments"])
    for (const auto& t : s["tokens"]) out.push_back(t.get<int>());
  return out;
}

// The text tokens (below <|endoftext|>, 50256).
std::vector<int> text_of(const std::vector<int>& tokens) {
  std::vector<int> out;
  for (int t : tokens)
    if (t < 50256) out.push_back(t);
  return out;
}

size_t edit_distance(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

TEST(WhisperInt8, GreedyDecodingHeldToTheParityPathOnEveryClip) {
  if (!fs::exists(default_tiny_en_dir() + "/model.bin"))
    GTEST_SKIP() << "no tiny.en at " << default_tiny_en_dir();
  int clips = 0;
  for (const auto& e : fs::directory_iterator(std::string(PARLEY_TEST_DATA) + "/audio")) {
    const std::string ext = e.path().extension().string();
    if (ext != ".wav" && ext != ".flac" && ext != ".mp3" && ext != ".aiff") continue;
    const std::string file = e.path().string();
    const auto f32 = run_parley("transcribe -f verbose_json " + file, true);
    const auto int8 = run_parley("transcribe --dtype int8 -f verbose_json " + file, true);
    ASSERT_EQ(f32.exit_code, 0) << file << f32.err;
    ASSERT_EQ(int8.exit_code, 0) << file << int8.err;
    const auto a = nlohmann::json::parse(f32.output), b = nlohmann::json::parse(int8.output);
    const std::vector<int> ta = tokens_of(a), tb = tokens_of(b);
    EXPECT_LE(edit_distance(text_of(ta), text_of(tb)), 2u)
        << file << "\nf32:  " << a["text"] << "\nint8: " << b["text"];
    if (edit_distance(ta, tb) > 2) {  // then only timestamps may differ, by 10 steps at most
      ASSERT_EQ(ta.size(), tb.size()) << file;
      for (size_t i = 0; i < ta.size(); ++i) {
        if (ta[i] == tb[i]) continue;
        // tiny.en's timestamps start at 50363, one per 20 ms.
        EXPECT_TRUE(ta[i] >= 50363 && tb[i] >= 50363 && std::abs(ta[i] - tb[i]) <= 10)
            << file << " token " << i << ": " << ta[i] << " against " << tb[i];
      }
    }
    if (e.path().filename() == "jfk.wav") {
      EXPECT_EQ(a["text"], b["text"]);
    }
    ++clips;
  }
  EXPECT_GE(clips, 5);
}

// --int8-encoder (the encoder's linear layers on integers too, ops/int8_matmul.h) is outside
// the bar above on hard clips (docs/DECODING.md), but keeps jfk.wav's text and tokens close.
TEST(WhisperInt8, Int8EncoderKeepsJfkText) {
  if (!fs::exists(default_tiny_en_dir() + "/model.bin"))
    GTEST_SKIP() << "no tiny.en at " << default_tiny_en_dir();
  const std::string file = std::string(PARLEY_TEST_DATA) + "/audio/jfk.wav";
  const auto f32 = run_parley("transcribe -f verbose_json " + file, true);
  const auto enc =
      run_parley("transcribe --dtype int8 --int8-encoder -f verbose_json " + file, true);
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  ASSERT_EQ(enc.exit_code, 0) << enc.err;
  const auto a = nlohmann::json::parse(f32.output), b = nlohmann::json::parse(enc.output);
  EXPECT_EQ(a["text"], b["text"]);
  // The text tokens equal; the segment boundary near-tie may move (as for --dtype int8).
  EXPECT_EQ(text_of(tokens_of(a)), text_of(tokens_of(b)));
  EXPECT_LE(edit_distance(tokens_of(a), tokens_of(b)), 4u);
}

TEST(WhisperInt8, WhereItDoesNotApplyIsAClearError) {
  auto r = run_parley(
      "transcribe --dtype int8 --device cuda " + std::string(PARLEY_TEST_DATA) + "/audio/jfk.wav",
      true);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, testing::HasSubstr("int8"));
  r = run_parley("transcribe --dtype int4 " + std::string(PARLEY_TEST_DATA) + "/audio/jfk.wav",
                 true);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, testing::HasSubstr("int4 not in {f32,f16,bf16,int8}"));
  r = run_parley("transcribe --int8-encoder " + std::string(PARLEY_TEST_DATA) + "/audio/jfk.wav",
                 true);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, testing::HasSubstr("--int8-encoder needs --dtype int8"));
}

}  // namespace
