// The device-generic log-mel (audio/mel_device.h) against the kissfft one (mel.h, itself
// held to the reference's golden values in mel_test.cpp): on the CPU always, on CUDA when a
// GPU is present. Prints the measured max differences.
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
#include "audio/mel_device.h"
#include "engine/alloc_stats.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/pool.h"

namespace parley {
namespace {

const std::string kData = PARLEY_TEST_DATA;

// The GEMM DFT (f32 dot products of 400 terms) and kissfft round differently: both are
// within ~3e-5 of a double-precision DFT (DoubleReference below), and within 7.1e-5 of each
// other on these clips (the worst: quiet bins near the global max - 8 clamp of 128-mel
// silero_test.wav). 1e-4 is what mel_test.cpp allows kissfft against the reference.
constexpr float kTolerance = 1e-4f;

#define REQUIRE_CUDA() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device"

struct Clip {
  std::string name;
  std::vector<float> samples;
  int64_t padding;
};

std::vector<float> noise(size_t n, uint32_t seed) {
  std::vector<float> x(n);
  for (float& s : x) s = float(int32_t(seed = seed * 1664525u + 1013904223u)) * 0x1p-32f;
  return x;
}

std::vector<Clip> clips() {
  const std::vector<float> jfk = load_audio(kData + "/audio/jfk.wav");
  const std::vector<float> long_clip = load_audio(kData + "/audio/silero_test.wav");  // 60 s
  return {
      {"jfk.wav + 30 s", jfk, kChunkSamples},
      {"jfk.wav", jfk, 0},
      {"silero_test.wav (60 s) + 30 s", long_clip, kChunkSamples},
      {"2 s of silence + 30 s", std::vector<float>(32000, 0.0f), kChunkSamples},
      {"30 s of noise", noise(size_t(kChunkSamples), 7), 0},
      {"201 samples", noise(201, 3), 0},  // one frame, reflected on both sides
      {"319 samples", noise(319, 4), 0},  // still one frame
      {"1000 samples + 30 s", noise(1000, 5), kChunkSamples},
      {"no samples + 30 s", {}, kChunkSamples},
  };
}

// max |a - b| over two mels of one shape (any devices); NaN anywhere gives infinity.
float max_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  if (a.shape() != b.shape()) return INFINITY;
  const Tensor ha = a.to(Device::cpu), hb = b.to(Device::cpu);
  float worst = 0;
  for (int64_t i = 0; i < ha.numel(); ++i) {
    const float d = std::fabs(ha.data<float>()[i] - hb.data<float>()[i]);
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

void expect_matches_kissfft(Device device) {
  for (const Clip& c : clips()) {
    for (int n_mels : {80, 128}) {
      SCOPED_TRACE(c.name + ", " + std::to_string(n_mels) + " mels");
      const Tensor want = log_mel_spectrogram(c.samples, n_mels, c.padding);
      const Tensor got = log_mel_spectrogram_on(device, c.samples, n_mels, c.padding);
      ASSERT_EQ(got.device(), device);
      ASSERT_EQ(got.shape(), want.shape());
      const float d = max_diff(got, want);
      std::printf("  %s %s, %d mels, %lld frames: max |diff| vs kissfft %.3g\n",
                  std::string(device_name(device)).c_str(), c.name.c_str(), n_mels,
                  (long long)want.dim(1), double(d));
      EXPECT_LE(d, kTolerance);
    }
  }
}

TEST(DeviceMel, CpuMatchesKissfft) { expect_matches_kissfft(Device::cpu); }

// The same frames (f32 samples times the f32 window, as both implementations form them)
// through a double-precision DFT, filter bank, log and clamp: how far each f32 mel is from
// exact arithmetic.
Tensor double_reference(const std::vector<float>& x, int n_mels) {
  const int64_t n = int64_t(x.size()), n_frames = n / kHopLength;
  const Tensor filters = mel_filters(n_mels);
  std::vector<double> cos_t(kNFft), sin_t(kNFft);
  for (int i = 0; i < kNFft; ++i) {
    cos_t[size_t(i)] = std::cos(2.0 * std::numbers::pi * i / kNFft);
    sin_t[size_t(i)] = std::sin(2.0 * std::numbers::pi * i / kNFft);
  }
  std::vector<double> out(size_t(n_mels * n_frames));
  std::vector<float> frame(kNFft);
  std::vector<double> power(kNFreqs);
  for (int64_t t = 0; t < n_frames; ++t) {
    for (int64_t j = 0; j < kNFft; ++j) {
      int64_t i = t * kHopLength - kNFft / 2 + j;
      i = i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i);
      const float w = float(0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * double(j) / kNFft));
      frame[size_t(j)] = x[size_t(i)] * w;
    }
    for (int k = 0; k < kNFreqs; ++k) {
      double re = 0, im = 0;
      for (int j = 0; j < kNFft; ++j) {
        re += double(frame[size_t(j)]) * cos_t[size_t((j * k) % kNFft)];
        im -= double(frame[size_t(j)]) * sin_t[size_t((j * k) % kNFft)];
      }
      power[size_t(k)] = re * re + im * im;
    }
    for (int m = 0; m < n_mels; ++m) {
      double acc = 0;
      for (int k = 0; k < kNFreqs; ++k)
        acc += double(filters.data<float>()[m * kNFreqs + k]) * power[size_t(k)];
      out[size_t(m * n_frames + t)] = std::log10(std::max(acc, 1e-10));
    }
  }
  const double top = *std::max_element(out.begin(), out.end());
  Tensor mel = Tensor::empty({n_mels, n_frames}, DType::f32);
  for (size_t i = 0; i < out.size(); ++i)
    mel.data<float>()[i] = float((std::max(out[i], top - 8.0) + 4.0) / 4.0);
  return mel;
}

TEST(DeviceMel, BothWithinRoundingOfADoubleReference) {
  const std::vector<float> audio = load_audio(kData + "/audio/jfk.wav");
  for (int n_mels : {80, 128}) {
    const Tensor exact = double_reference(audio, n_mels);
    const float gemm = max_diff(log_mel_spectrogram_on(Device::cpu, audio, n_mels), exact);
    const float kiss = max_diff(log_mel_spectrogram(audio, n_mels), exact);
    std::printf("  jfk.wav, %d mels: max |diff| vs double precision: GEMM DFT %.3g, kissfft %.3g\n",
                n_mels, double(gemm), double(kiss));
    EXPECT_LE(gemm, kTolerance / 2);
    EXPECT_LE(kiss, kTolerance / 2);
  }
}

TEST(DeviceMel, ChunksDoNotChangeTheResult) {
  // 13 frames a chunk: chunk edges everywhere, and the global max must still be global
  // (the loudest frame of jfk is not in the first chunk).
  const std::vector<float> audio = load_audio(kData + "/audio/jfk.wav");
  DeviceMelOptions small;
  small.chunk_frames = 13;
  const Tensor whole = log_mel_spectrogram_on(Device::cpu, audio, 80, kChunkSamples);
  const Tensor chunked = log_mel_spectrogram_on(Device::cpu, audio, 80, kChunkSamples, small);
  const float d = max_diff(whole, chunked);
  std::printf("  13-frame chunks vs one pass: max |diff| %.3g\n", double(d));
  // Not bit-equal: oneDNN picks another kernel for 13 rows than for 3000 (GEMM rounding,
  // see kTolerance); a chunk placed wrong or a per-chunk max would differ by > 0.1.
  EXPECT_LE(d, kTolerance);
}

TEST(DeviceMel, ForCpuIsTheParityPath) {
  const std::vector<float> audio = load_audio(kData + "/audio/jfk.wav");
  const Tensor a = log_mel_spectrogram_for(Device::cpu, audio, 80, kChunkSamples);
  const Tensor b = log_mel_spectrogram(audio, 80, kChunkSamples);
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_TRUE(std::equal(a.data<float>(), a.data<float>() + a.numel(), b.data<float>()));
}

TEST(DeviceMel, WarmPoolMakesNoSystemAllocations) {
  const std::vector<float> audio = noise(48000, 11);
  Pool pool(Device::cpu);
  DeviceMelOptions opt;
  opt.pool = &pool;
  // The first call fills the pool (and the per-device constants); later ones reuse it.
  const Tensor want =
      log_mel_spectrogram_on(Device::cpu, audio, 80, kChunkSamples, opt).to(Device::cpu);
  for (int i = 0; i < 3; ++i) {
    const int64_t before = alloc_stats().host_allocs;
    const Tensor mel = log_mel_spectrogram_on(Device::cpu, audio, 80, kChunkSamples, opt);
    EXPECT_EQ(alloc_stats().host_allocs, before) << "call " << i;
    EXPECT_EQ(max_diff(mel, want), 0.0f);
  }
}

TEST(DeviceMel, ShapesAndErrors) {
  const std::vector<float> x = noise(1000, 1);
  EXPECT_EQ(log_mel_spectrogram_on(Device::cpu, x, 80).shape(), Shape({80, 6}));
  EXPECT_EQ(log_mel_spectrogram_on(Device::cpu, {}, 80).shape(), Shape({80, 0}));
  EXPECT_EQ(log_mel_spectrogram_on(Device::cpu, std::span(x).first(100), 80, 300).shape(),
            Shape({80, 2}));
  EXPECT_THROW(log_mel_spectrogram_on(Device::cpu, std::span(x).first(180), 80), Error);
  EXPECT_THROW(log_mel_spectrogram_on(Device::cpu, x, 80, -1), Error);
  EXPECT_THROW(log_mel_spectrogram_on(Device::cpu, x, 0), Error);
  DeviceMelOptions zero_chunk;
  zero_chunk.chunk_frames = 0;
  EXPECT_THROW(log_mel_spectrogram_on(Device::cpu, x, 80, 0, zero_chunk), Error);
  Pool cuda_pool(Device::cuda);
  DeviceMelOptions wrong_pool;
  wrong_pool.pool = &cuda_pool;
  EXPECT_THROW(log_mel_spectrogram_on(Device::cpu, x, 80, 0, wrong_pool), Error);
}

// --- CUDA (skipped without a GPU) ------------------------------------------------------

TEST(DeviceMelCuda, MatchesKissfft) {
  REQUIRE_CUDA();
  expect_matches_kissfft(Device::cuda);
}

TEST(DeviceMelCuda, PadOrTrimOnTheDevice) {
  REQUIRE_CUDA();
  const std::vector<float> audio = load_audio(kData + "/audio/jfk.wav");
  const Tensor mel = log_mel_spectrogram_on(Device::cuda, audio, 80, kChunkSamples);
  const Tensor host = mel.to(Device::cpu);
  for (int64_t frames : {int64_t(7), kChunkFrames, mel.dim(1) + 5}) {
    const Tensor d = pad_or_trim_frames(mel, frames);
    ASSERT_TRUE(d.is_cuda());
    EXPECT_EQ(max_diff(d, pad_or_trim_frames(host, frames)), 0.0f) << frames;
  }
}

TEST(DeviceMelCuda, PooledAndTimed) {
  REQUIRE_CUDA();
  const std::vector<float> audio = load_audio(kData + "/audio/jfk.wav");
  Pool pool(Device::cuda);
  DeviceMelOptions opt;
  opt.pool = &pool;
  const Tensor want = log_mel_spectrogram(audio, 80, kChunkSamples);
  for (int i = 0; i < 3; ++i) log_mel_spectrogram_on(Device::cuda, audio, 80, kChunkSamples, opt);
  cuda::synchronize();
  constexpr int kRuns = 20;
  const auto t0 = std::chrono::steady_clock::now();
  Tensor mel;
  for (int i = 0; i < kRuns; ++i)
    mel = log_mel_spectrogram_on(Device::cuda, audio, 80, kChunkSamples, opt);
  cuda::synchronize();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
      kRuns;
  std::printf("  GPU log-mel of jfk.wav + 30 s (4100 frames), pooled: %.3f ms per call\n", ms);
  EXPECT_LE(max_diff(mel, want), kTolerance);
}

}  // namespace
}  // namespace parley
