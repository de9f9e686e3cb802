// has_speech, the gate in front of Whisper: no speech in digital silence, in white noise
// at -50 dBFS, in a pure tone, in an empty file; speech in every spoken clip.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "audio/decode.h"
#include "vad/segments.h"
#include "vad/silero.h"

namespace {

using parley::vad::has_speech;
using parley::vad::SileroModel;

const std::string kData = PARLEY_TEST_DATA;

std::shared_ptr<const SileroModel> model() {
  static auto m = SileroModel::load(kData + "/vad/silero_vad_v6.2.onnx");
  return m;
}

// Gaussian white noise whose RMS is `dbfs` relative to full scale (1.0).
std::vector<float> white_noise(double dbfs, size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, float(std::pow(10.0, dbfs / 20.0)));
  std::vector<float> x(n);
  for (auto& v : x) v = d(rng);
  return x;
}

TEST(VadGate, SilenceHasNoSpeech) {
  for (int rate : {16000, 8000}) {
    EXPECT_FALSE(has_speech(*model(), std::vector<float>(size_t(rate) * 10, 0.0f), rate));
  }
}

TEST(VadGate, WhiteNoiseAtMinus50DbfsHasNoSpeech) {
  for (unsigned seed : {1u, 2u, 3u}) {
    const auto noise = white_noise(-50.0, 16000 * 10, seed);
    EXPECT_FALSE(has_speech(*model(), noise, 16000)) << "seed " << seed;
  }
}

TEST(VadGate, ToneHasNoSpeech) {
  std::vector<float> tone(16000 * 5);
  for (size_t i = 0; i < tone.size(); ++i) tone[i] = 0.3f * std::sin(2 * M_PI * 440.0 * i / 16000);
  EXPECT_FALSE(has_speech(*model(), tone, 16000));
}

TEST(VadGate, EmptyAudioHasNoSpeech) {
  EXPECT_FALSE(has_speech(*model(), std::vector<float>{}, 16000));
  EXPECT_TRUE(model()->probabilities(std::vector<float>{}, 16000).empty());
}

TEST(VadGate, SpokenClipsHaveSpeech) {
  for (const char* clip : {"jfk.wav", "english.wav", "french.aiff", "multilingual.mp3",
                           "stereo_diarization.wav", "silero_test.wav"}) {
    const auto audio = parley::load_audio(kData + "/audio/" + clip);
    EXPECT_TRUE(has_speech(*model(), audio, 16000)) << clip;
  }
  // Speech stays speech under the noise floor above.
  auto jfk = parley::load_audio(kData + "/audio/jfk.wav");
  const auto noise = white_noise(-50.0, jfk.size(), 9);
  for (size_t i = 0; i < jfk.size(); ++i) jfk[i] += noise[i];
  EXPECT_TRUE(has_speech(*model(), jfk, 16000));
}

}  // namespace
