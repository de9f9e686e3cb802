// collect_speech and SpeechTimeMap (faster-whisper's collect_chunks / SpeechTimestampsMap):
// times in the speech-only audio map back to the original timeline.
#include "vad/speech_map.h"

#include <gtest/gtest.h>

#include <vector>

#include "engine/error.h"

namespace {

using parley::vad::collect_speech;
using parley::vad::SpeechSegment;
using parley::vad::SpeechTimeMap;

TEST(SpeechMap, CollectConcatenatesSegments) {
  std::vector<float> audio(100);
  for (size_t i = 0; i < audio.size(); ++i) audio[i] = float(i);
  const std::vector<SpeechSegment> segs = {{10, 13}, {50, 52}};
  EXPECT_EQ(collect_speech(audio, segs), (std::vector<float>{10, 11, 12, 50, 51}));
  const std::vector<SpeechSegment> bad = {{50, 52}, {10, 13}};
  EXPECT_THROW(collect_speech(audio, bad), parley::Error);
  const std::vector<SpeechSegment> outside = {{90, 120}};
  EXPECT_THROW(collect_speech(audio, outside), parley::Error);
}

TEST(SpeechMap, TimesMapBack) {
  // 16 kHz: speech [1 s, 3 s) and [10 s, 12 s); collected, they are [0, 2) and [2, 4).
  const std::vector<SpeechSegment> segs = {{16000, 48000}, {160000, 192000}};
  const SpeechTimeMap map(segs, 16000);
  EXPECT_DOUBLE_EQ(map.original_time(0.0), 1.0);
  EXPECT_DOUBLE_EQ(map.original_time(1.5), 2.5);
  // 2.0 s is the first segment's end and the second's start.
  EXPECT_DOUBLE_EQ(map.original_time(2.0, /*is_end=*/true), 3.0);
  EXPECT_DOUBLE_EQ(map.original_time(2.0), 10.0);
  EXPECT_DOUBLE_EQ(map.original_time(3.5), 11.5);
  // Past the last segment: the last segment's offset.
  EXPECT_DOUBLE_EQ(map.original_time(5.0), 13.0);
  // No segments: identity.
  EXPECT_DOUBLE_EQ(SpeechTimeMap({}, 16000).original_time(7.25), 7.25);
}

}  // namespace
