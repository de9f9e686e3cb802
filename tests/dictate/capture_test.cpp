// The --input file source (src/dictate/capture.h): every sample, in 20 ms chunks, paced at
// `speed` times real time.
#include "dictate/capture.h"

#include <gtest/gtest.h>

#include <chrono>

#include "audio/decode.h"
#include "engine/error.h"

namespace parley::dictate {
namespace {

const std::string kJfk = std::string(PARLEY_TEST_DATA) + "/audio/jfk.wav";

TEST(DictateCapture, FileIsStreamedWholeAtTheGivenSpeed) {
  const std::vector<float> whole = load_audio(kJfk);  // 11.0 s
  const auto source = open_file_source(kJfk, 10.0);
  EXPECT_EQ(source->name(), kJfk);
  std::vector<float> got;
  size_t chunks = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (source->read(got)) ++chunks;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(got, whole);
  EXPECT_EQ(chunks, (whole.size() + kChunkSamples - 1) / kChunkSamples);
  // The last chunk starts at 10.98 s of audio: 1.098 s at 10x.
  EXPECT_GT(s, 1.05);
  EXPECT_LT(s, 3.0);
}

TEST(DictateCapture, BadSpeedAndMissingFileAreClearErrors) {
  EXPECT_THROW(open_file_source(kJfk, 0), Error);
  EXPECT_THROW(open_file_source(kJfk, -2), Error);
  EXPECT_THROW(open_file_source("/nonexistent.wav", 1), Error);
}

}  // namespace
}  // namespace parley::dictate
