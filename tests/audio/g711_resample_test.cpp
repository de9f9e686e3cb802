// G.711 decoding against Python's audioop (the ITU reference decoder's values) and the
// streaming resampler against analytic tones: pass band kept, stop band removed, block sizes
// irrelevant.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "audio/g711.h"
#include "audio/resample.h"

namespace parley {
namespace {

// audioop.ulaw2lin / alaw2lin (Python 3.11) of these codes.
TEST(G711, MulawMatchesAudioop) {
  const uint8_t codes[] = {0x00, 0x01, 0x0f, 0x7f, 0x80, 0xff, 0xfe, 0x8f, 0x55, 0xd5};
  const int16_t want[] = {-32124, -31100, -16764, 0, 32124, 0, 8, 16764, -716, 716};
  for (size_t i = 0; i < std::size(codes); ++i)
    EXPECT_EQ(mulaw_to_pcm16(codes[i]), want[i]) << "code " << int(codes[i]);
}

TEST(G711, AlawMatchesAudioop) {
  const uint8_t codes[] = {0x00, 0x01, 0x0f, 0x7f, 0x80, 0xff, 0xfe, 0x8f, 0x55, 0xd5, 0x2a, 0xaa};
  const int16_t want[] = {-5504, -5248, -6784, -848, 5504, 848, 880, 6784, -8, 8, -32256, 32256};
  for (size_t i = 0; i < std::size(codes); ++i)
    EXPECT_EQ(alaw_to_pcm16(codes[i]), want[i]) << "code " << int(codes[i]);
}

TEST(G711, TablesAreOddSymmetricAndMonotonic) {
  // Flipping the sign bit negates the value; within one sign, larger magnitude codes decode
  // to larger magnitudes (mu-law codes count down, A-law's are bit-scrambled).
  for (int c = 0; c < 128; ++c) {
    EXPECT_EQ(mulaw_to_pcm16(uint8_t(c)), -mulaw_to_pcm16(uint8_t(c | 0x80)));
    EXPECT_EQ(alaw_to_pcm16(uint8_t(c)), -alaw_to_pcm16(uint8_t(c | 0x80)));
  }
  for (int c = 0x81; c < 0x100; ++c)
    EXPECT_LT(mulaw_to_pcm16(uint8_t(c)), mulaw_to_pcm16(uint8_t(c - 1)));
  std::vector<float> f;
  mulaw_to_float(std::vector<uint8_t>{0x80, 0xff}, f);
  alaw_to_float(std::vector<uint8_t>{0xaa}, f);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_FLOAT_EQ(f[0], 32124.0f / 32768.0f);
  EXPECT_FLOAT_EQ(f[1], 0.0f);
  EXPECT_FLOAT_EQ(f[2], 32256.0f / 32768.0f);
}

std::vector<float> tone(double hz, int rate, int n, double amp = 0.5) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) x[size_t(i)] = float(amp * std::sin(2 * M_PI * hz * i / rate));
  return x;
}

// Resamples x in random block sizes (and at once: the two must agree exactly).
std::vector<float> resample(const std::vector<float>& x, int in_rate, int out_rate) {
  StreamResampler whole(in_rate, out_rate);
  std::vector<float> once;
  whole.push(x, once);
  StreamResampler blocks(in_rate, out_rate);
  std::vector<float> out;
  std::mt19937 rng(7);
  for (size_t i = 0; i < x.size();) {
    const size_t n = std::min(x.size() - i, size_t(rng() % 700));
    blocks.push(std::span<const float>(x.data() + i, n), out);
    i += n;
  }
  EXPECT_EQ(out, once) << "block sizes changed the output";
  return out;
}

void expect_tone(const std::vector<float>& y, double hz, int rate, double tol) {
  const auto want = tone(hz, rate, int(y.size()));
  double worst = 0;
  for (size_t i = 128; i + 128 < y.size(); ++i)  // the start sees the stream's zero past
    worst = std::max(worst, double(std::abs(y[i] - want[i])));
  EXPECT_LT(worst, tol) << hz << " Hz at " << rate;
}

TEST(StreamResampler, Pcm24kTo16kKeepsSpeechBand) {
  const int n = 24000;
  for (double hz : {100.0, 440.0, 3000.0, 5500.0}) {
    const auto y = resample(tone(hz, 24000, n), 24000, 16000);
    // 24000 inputs give 16000 outputs, less the last W inputs' worth not yet determined.
    EXPECT_GE(y.size(), 15960u);
    EXPECT_LE(y.size(), 16000u);
    expect_tone(y, hz, 16000, 2e-3);
  }
}

TEST(StreamResampler, Pcm24kTo16kRemovesAboveNyquist) {
  // 10 kHz cannot exist at 16 kHz; unfiltered it would alias to 6 kHz at full amplitude.
  const auto y = resample(tone(10000, 24000, 24000), 24000, 16000);
  double energy = 0;
  for (size_t i = 64; i + 64 < y.size(); ++i) energy += double(y[i]) * y[i];
  EXPECT_LT(std::sqrt(energy / double(y.size() - 128)), 1e-3);
}

TEST(StreamResampler, Telephone8kTo16k) {
  for (double hz : {300.0, 1000.0, 3000.0}) {
    const auto y = resample(tone(hz, 8000, 8000), 8000, 16000);
    EXPECT_GE(y.size(), 15900u);
    expect_tone(y, hz, 16000, 3e-3);
  }
}

TEST(StreamResampler, SameRateIsIdentity) {
  const auto x = tone(1234, 16000, 4000);
  EXPECT_EQ(resample(x, 16000, 16000), x);
}

}  // namespace
}  // namespace parley
