// Whisper log-mel: the computed filter bank equals the reference's mel_filters.npz, and the
// spectrogram matches golden values from tools/reference/mel_reference.py (a NumPy
// reimplementation of whisper/audio.py log_mel_spectrogram, float32 like torch).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <string>
#include <vector>

#include "audio/decode.h"
#include "audio/mel.h"
#include "engine/error.h"
#include "io/npz.h"

namespace parley {
namespace {

const std::string kData = PARLEY_TEST_DATA;

struct Golden {
  int mel;
  int64_t frame;
  float value;
};

// Checks shape, a handful of values, the mean and the max against the reference.
void expect_golden(const Tensor& mel, int n_mels, int64_t n_frames, std::initializer_list<Golden> g,
                   double mean, float max) {
  ASSERT_EQ(mel.shape(), Shape({n_mels, n_frames}));
  const float* p = mel.data<float>();
  for (const Golden& x : g)
    EXPECT_NEAR(p[x.mel * n_frames + x.frame], x.value, 1e-4) << x.mel << ", " << x.frame;
  double sum = 0;
  for (int64_t i = 0; i < mel.numel(); ++i) sum += p[i];
  EXPECT_NEAR(sum / double(mel.numel()), mean, 1e-5);
  EXPECT_NEAR(*std::max_element(p, p + mel.numel()), max, 1e-4);
}

TEST(MelFilters, MatchTheReferenceNpz) {
  const io::TensorMap npz = io::read_npz(kData + "/whisper/mel_filters.npz");
  for (int n_mels : {80, 128}) {
    const Tensor ref = npz.at("mel_filters.npz", "mel_" + std::to_string(n_mels));
    const Tensor ours = mel_filters(n_mels);
    ASSERT_EQ(ours.shape(), Shape({n_mels, kNFreqs}));
    ASSERT_EQ(ref.shape(), ours.shape());
    float worst = 0;
    for (int64_t i = 0; i < ours.numel(); ++i)
      worst = std::max(worst, std::fabs(ours.data<float>()[i] - ref.data<float>()[i]));
    std::printf("  mel_%d max abs diff vs mel_filters.npz: %g\n", n_mels, double(worst));
    EXPECT_LE(worst, 1e-6f) << n_mels;
  }
}

TEST(MelFilters, RejectsBadSize) { EXPECT_THROW(mel_filters(0), Error); }

// Golden values: python3 tools/reference/mel_reference.py ../shared/data/audio/jfk.wav
//   /tmp/jfk_pad.npy --padding 480000   (then a[m, t], a.mean(), a.max() with NumPy 2.4)
TEST(LogMel, JfkWithThirtySecondsOfPadding) {
  const std::vector<float> audio = load_audio(kData + "/audio/jfk.wav");
  const auto t0 = std::chrono::steady_clock::now();
  const Tensor mel = log_mel_spectrogram(audio, 80, kChunkSamples);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  log-mel of 11 s + 30 s padding (4100 frames): %.1f ms\n", ms);
  expect_golden(mel, 80, 4100,
                {{0, 0, -0.5387419f},
                 {3, 57, 0.6239716f},
                 {10, 100, 0.4284381f},
                 {25, 333, 0.6822808f},
                 {40, 500, -0.0443619f},
                 {55, 777, -0.1774893f},
                 {70, 1000, -0.5387419f},
                 {79, 1099, -0.5387419f},
                 {5, 1100, 0.4255711f},
                 {60, 2000, -0.5387419f},
                 {79, 4099, -0.5387419f}},
                -0.3604154, 1.4612581f);
}

// python3 tools/reference/mel_reference.py ../shared/data/audio/english.wav /tmp/english.npy
TEST(LogMel, English) {
  const std::vector<float> audio = load_audio(kData + "/audio/english.wav");
  if (audio.size() != 43919u) GTEST_SKIP() << "english.wav needs FFmpeg to resample";
  expect_golden(log_mel_spectrogram(audio, 80), 80, 274,
                {{0, 0, -0.7990967f},
                 {7, 20, 0.8386175f},
                 {20, 50, -0.4841437f},
                 {33, 99, -0.7990967f},
                 {50, 137, -0.4593787f},
                 {64, 200, -0.7915307f},
                 {79, 273, -0.7990967f}},
                -0.3754777, 1.2009033f);
}

// python3 tools/reference/mel_reference.py ../shared/data/audio/jfk.wav /tmp/j.npy --n-mels 128
TEST(LogMel, Jfk128Bins) {
  const std::vector<float> audio = load_audio(kData + "/audio/jfk.wav");
  expect_golden(log_mel_spectrogram(audio, 128), 128, 1100,
                {{0, 0, -0.5063077f},
                 {17, 150, 0.4897075f},
                 {64, 300, -0.1677775f},
                 {100, 800, -0.3822007f},
                 {127, 1099, -0.5063077f}},
                0.1069765, 1.4936923f);
}

TEST(LogMel, PaddingEqualsAppendedZeros) {
  const std::vector<float> audio = load_audio(kData + "/audio/jfk.wav");
  std::vector<float> padded = audio;
  padded.resize(audio.size() + 12345, 0.0f);
  const Tensor a = log_mel_spectrogram(audio, 80, 12345);
  const Tensor b = log_mel_spectrogram(padded, 80);
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(a.dim(1), int64_t(audio.size() + 12345) / kHopLength);
  EXPECT_TRUE(std::equal(a.data<float>(), a.data<float>() + a.numel(), b.data<float>()));
}

TEST(LogMel, FrameCounts) {
  const std::vector<float> x(1000, 0.25f);
  EXPECT_EQ(log_mel_spectrogram(x, 80).shape(), Shape({80, 6}));  // 1000 / 160
  EXPECT_EQ(log_mel_spectrogram(std::span(x).first(319), 80).shape(), Shape({80, 1}));
  EXPECT_EQ(log_mel_spectrogram(std::span(x).first(320), 128).shape(), Shape({128, 2}));
  EXPECT_EQ(log_mel_spectrogram({}, 80).shape(), Shape({80, 0}));
  // Fewer than 201 samples cannot be reflect-padded (torch.stft fails too).
  EXPECT_THROW(log_mel_spectrogram(std::span(x).first(180), 80), Error);
  EXPECT_THROW(log_mel_spectrogram(x, 80, -1), Error);
}

TEST(LogMel, SilenceIsFlat) {
  // All-zero input: log10(1e-10) = -10 everywhere, so (x + 4) / 4 = -1.5.
  const Tensor mel = log_mel_spectrogram({}, 80, kChunkSamples);
  ASSERT_EQ(mel.shape(), Shape({80, kChunkFrames}));
  for (int64_t i = 0; i < mel.numel(); ++i) ASSERT_EQ(mel.data<float>()[i], -1.5f) << i;
}

TEST(LogMel, SinePeaksInTheRightBand) {
  // A 1 kHz tone sits in rfft bin 25 (40 Hz per bin); the loudest mel band is the filter
  // with the largest weight at bin 25.
  std::vector<float> tone(16000);
  for (size_t i = 0; i < tone.size(); ++i)
    tone[i] = 0.5f * float(std::sin(2.0 * std::numbers::pi * 1000.0 * double(i) / 16000.0));
  const Tensor mel = log_mel_spectrogram(tone, 80);
  const Tensor f = mel_filters(80);
  int expect = 0;
  for (int m = 1; m < 80; ++m)
    if (f.data<float>()[m * kNFreqs + 25] > f.data<float>()[expect * kNFreqs + 25]) expect = m;
  const int64_t t = 50, n = mel.dim(1);
  int loudest = 0;
  for (int m = 1; m < 80; ++m)
    if (mel.data<float>()[m * n + t] > mel.data<float>()[loudest * n + t]) loudest = m;
  EXPECT_EQ(loudest, expect);
}

TEST(PadOrTrim, PadsAndTrimsFrames) {
  Tensor mel = Tensor::empty({2, 5}, DType::f32);
  for (int i = 0; i < 10; ++i) mel.data<float>()[i] = float(i + 1);
  const Tensor padded = pad_or_trim_frames(mel, 7);
  ASSERT_EQ(padded.shape(), Shape({2, 7}));
  const std::vector<float> want_pad = {1, 2, 3, 4, 5, 0, 0, 6, 7, 8, 9, 10, 0, 0};
  EXPECT_TRUE(std::equal(want_pad.begin(), want_pad.end(), padded.data<float>()));
  const Tensor trimmed = pad_or_trim_frames(mel, 3);
  const std::vector<float> want_trim = {1, 2, 3, 6, 7, 8};
  ASSERT_EQ(trimmed.shape(), Shape({2, 3}));
  EXPECT_TRUE(std::equal(want_trim.begin(), want_trim.end(), trimmed.data<float>()));
  EXPECT_EQ(pad_or_trim_frames(mel).shape(), Shape({2, kChunkFrames}));
  EXPECT_THROW(pad_or_trim_frames(Tensor::empty({10}, DType::f32)), Error);
}

TEST(LogMel, ThirtySecondTiming) {
  std::vector<float> audio(kChunkSamples);
  uint32_t x = 1;
  for (float& s : audio) s = float(int32_t(x = x * 1664525u + 1013904223u)) * 0x1p-32f;
  const auto t0 = std::chrono::steady_clock::now();
  const Tensor mel = log_mel_spectrogram(audio, 80);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  log-mel of 30 s (3000 frames, 80 bins): %.1f ms\n", ms);
  EXPECT_EQ(mel.shape(), Shape({80, kChunkFrames}));
}

}  // namespace
}  // namespace parley
