// speech_segments_from_probs on hand-made probability sequences (16 kHz: 512-sample chunks,
// defaults: threshold 0.5, neg 0.35, min speech 4000 samples, min silence 1600, pad 480).
// Each expectation was worked out by hand from silero-vad 6.2.1's get_speech_timestamps and
// checked by running it on the same sequences (a stand-in model returning them). The same
// rules on real audio against the reference itself: tests/parity/vad_parity_test.py.
#include "vad/segments.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "audio/decode.h"

namespace {

using parley::vad::speech_segments_from_probs;
using parley::vad::SpeechOptions;
using parley::vad::SpeechSegment;
using parley::vad::VadEvent;

// `runs` of (value, count) concatenated.
std::vector<float> probs(std::initializer_list<std::pair<float, int>> runs) {
  std::vector<float> p;
  for (auto [v, n] : runs) p.insert(p.end(), size_t(n), v);
  return p;
}

std::vector<SpeechSegment> segs(const std::vector<float>& p, SpeechOptions o = {}) {
  return speech_segments_from_probs(p, int64_t(p.size()) * 512, 16000, o);
}

TEST(SpeechSegments, OneSegmentPadded) {
  // Speech from chunk 2 (1024) to chunk 21; silence from 22 (11264) ends it once 1600
  // samples of silence have passed; padded by 480 each side.
  EXPECT_EQ(segs(probs({{0, 2}, {1, 20}, {0, 10}})), (std::vector<SpeechSegment>{{544, 11744}}));
}

TEST(SpeechSegments, MinSpeechDuration) {
  // 7 chunks of speech: 3584 samples, not more than 4000: dropped. 8 chunks: 4096, kept.
  EXPECT_TRUE(segs(probs({{0, 1}, {1, 7}, {0, 10}})).empty());
  EXPECT_EQ(segs(probs({{0, 1}, {1, 8}, {0, 10}})), (std::vector<SpeechSegment>{{32, 5088}}));
}

TEST(SpeechSegments, ShortSilenceDoesNotSplit) {
  // 4 silent chunks (1536 < 1600 samples) inside speech: one segment.
  EXPECT_EQ(segs(probs({{0, 2}, {1, 10}, {0, 4}, {1, 10}, {0, 10}})),
            (std::vector<SpeechSegment>{{544, 13792}}));
}

TEST(SpeechSegments, TwoSegmentsAndSharedPadding) {
  const auto p = probs({{0, 2}, {1, 10}, {0, 5}, {1, 14}, {0, 10}});
  // Ends at 6144 and starts at 8704: 2560 samples apart, more than two pads.
  EXPECT_EQ(segs(p), (std::vector<SpeechSegment>{{544, 6624}, {8224, 16352}}));
  // Pads of 1600: closer than two pads, so the gap is split in the middle.
  SpeechOptions o;
  o.speech_pad_ms = 100;
  EXPECT_EQ(segs(p, o), (std::vector<SpeechSegment>{{0, 7424}, {7424, 17472}}));
}

TEST(SpeechSegments, NegThresholdHysteresis) {
  // 0.4 is below the threshold but above the default neg threshold 0.35: still speech.
  const auto p = probs({{0, 1}, {1, 10}, {0.4f, 10}, {0, 10}});
  EXPECT_EQ(segs(p), (std::vector<SpeechSegment>{{32, 11232}}));
  SpeechOptions o;
  o.neg_threshold = 0.45;
  EXPECT_EQ(segs(p, o), (std::vector<SpeechSegment>{{32, 6112}}));
}

TEST(SpeechSegments, MaxSpeechDurationCutsHard) {
  // 1 s limit: 16000 - 512 - 960 = 14528 samples; no silence inside, so cut at the first
  // chunk past it (14848), and speech restarts at the next chunk.
  SpeechOptions o;
  o.max_speech_duration_s = 1.0;
  EXPECT_EQ(segs(probs({{1, 60}}), o), (std::vector<SpeechSegment>{{0, 15104}, {15104, 30688}}));
}

TEST(SpeechSegments, MaxSpeechDurationCutsAtTheLongestSilence) {
  // A 2048-sample pause (> 98 ms, too short to end speech) at 5120: the 1 s limit cuts
  // there and the next segment starts after it (7168); that one is then cut hard at 22016.
  const auto p = probs({{1, 10}, {0, 4}, {1, 30}, {0, 10}});
  SpeechOptions o;
  o.max_speech_duration_s = 1.0;
  EXPECT_EQ(segs(p, o), (std::vector<SpeechSegment>{{0, 5600}, {6688, 22496}}));
  // The legacy rule only remembers silences longer than 98 ms while they last; this one
  // (1536 samples then) is not, so the cut is hard.
  o.use_max_poss_sil_at_max_speech = false;
  EXPECT_EQ(segs(p, o), (std::vector<SpeechSegment>{{0, 15104}, {15104, 23008}}));
}

TEST(SpeechSegments, SpeechToTheEndRunsToTheLastSample) {
  // Still in speech at the end: the segment ends at the audio's length (here not a chunk
  // multiple), padding clipped to it.
  const auto p = probs({{0, 4}, {1, 20}});
  EXPECT_EQ(speech_segments_from_probs(p, 23 * 512 + 100, 16000),
            (std::vector<SpeechSegment>{{1568, 23 * 512 + 100}}));
}

TEST(SpeechSegments, EightKilohertzUsesItsChunk) {
  // 256-sample chunks, pad 240, min silence 800, min speech 2000.
  const auto p = probs({{0, 2}, {1, 20}, {0, 10}});
  EXPECT_EQ(speech_segments_from_probs(p, int64_t(p.size()) * 256, 8000),
            (std::vector<SpeechSegment>{{272, 5872}}));
}

TEST(SpeechSegments, NoSpeech) {
  EXPECT_TRUE(segs(probs({{0.2f, 100}})).empty());
  EXPECT_TRUE(segs({}).empty());
}

}  // namespace

namespace {

using parley::vad::SileroModel;
using parley::vad::VadIterator;

const std::string kData = PARLEY_TEST_DATA;

// jfk.wav through silero-vad 6.2.1's VADIterator (onnxruntime, silero_vad_v6.2.onnx,
// 512-sample chunks; tools/reference/vad_reference.py): speech starts (S) and ends (E).
TEST(VadIterator, JfkEventsMatchTheReference) {
  const auto model = SileroModel::load(kData + "/vad/silero_vad_v6.2.onnx");
  const auto jfk = parley::load_audio(kData + "/audio/jfk.wav");
  const auto S = VadEvent::Kind::start, E = VadEvent::Kind::end;
  const std::vector<VadEvent> want = {{S, 5152},   {E, 36320},  {S, 52256},  {E, 71136}, {S, 86048},
                                      {E, 122848}, {S, 130592}, {E, 169952}, {S, 174112}};
  // Blocks of 1000 samples (not a chunk multiple) and of one whole file give the same.
  for (size_t block : {size_t(1000), jfk.size()}) {
    VadIterator it(model, 16000);
    std::vector<VadEvent> got;
    for (size_t i = 0; i < jfk.size(); i += block) {
      const size_t n = std::min(block, jfk.size() - i);
      for (const auto& e : it.push(std::span<const float>(jfk.data() + i, n))) got.push_back(e);
    }
    EXPECT_EQ(got, want) << "block " << block;
    EXPECT_TRUE(it.triggered());
    // Whole chunks only: the last 384 samples wait for more audio.
    ASSERT_EQ(it.probabilities().size(), jfk.size() / 512);
    const auto whole = model->probabilities(jfk, 16000);
    for (size_t k = 0; k < it.probabilities().size(); ++k) {
      ASSERT_EQ(it.probabilities()[k], whole[k]) << k;
    }
    it.reset();
    EXPECT_FALSE(it.triggered());
    EXPECT_TRUE(it.probabilities().empty());
  }
}

TEST(VadIterator, SilenceHasNoEvents) {
  const auto model = SileroModel::load(kData + "/vad/silero_vad_v6.2.onnx");
  VadIterator it(model, 8000);
  const std::vector<float> silence(8000 * 3, 0.0f);
  EXPECT_TRUE(it.push(silence).empty());
  EXPECT_EQ(it.probabilities().size(), silence.size() / 256);
}

}  // namespace
