// `parley transcribe --dtype int8` (the CPU int8 configuration: q8_0 decoder weights, the
// vocabulary product exact near the top) held to the f32 parity path with the real tiny.en:
// greedy decoding of every clip in the shared audio gives the same tokens (the bar:
// at most 2 differing), the same text on jfk.wav; --dtype int8 where it does not apply is a
// clear error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
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

TEST(WhisperInt8, GreedyTokensEqualTheParityPathOnEveryClip) {
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
    EXPECT_LE(edit_distance(tokens_of(a), tokens_of(b)), 2u)
        << file << "\nf32:  " << a["text"] << "\nint8: " << b["text"];
    if (e.path().filename() == "jfk.wav") {
      EXPECT_EQ(a["text"], b["text"]);
    }
    ++clips;
  }
  EXPECT_GE(clips, 5);
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
}

}  // namespace
