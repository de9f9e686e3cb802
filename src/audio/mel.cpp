// Whisper's log-mel spectrogram (see mel.h). Reference: openai/whisper whisper/audio.py
// (log_mel_spectrogram, mel_filters) and librosa.filters.mel (Slaney scale and norm), which
// made the reference's mel_filters.npz.
#include "audio/mel.h"

#include <kiss_fftr.h>  // kissfft::kissfft-float puts include/kissfft on the path

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "audio/mel_device.h"
#include "engine/error.h"
#include "engine/ops/spectral.h"
#include "engine/threadpool.h"

namespace parley {
namespace {

// Slaney mel scale (librosa hz_to_mel / mel_to_hz with htk=False): linear below 1 kHz at
// 200/3 Hz per mel, logarithmic above with 27 mels per factor 6.4.
constexpr double kFSp = 200.0 / 3.0;
constexpr double kMinLogHz = 1000.0;
constexpr double kMinLogMel = kMinLogHz / kFSp;  // 15
const double kLogStep = std::log(6.4) / 27.0;

double hz_to_mel(double hz) {
  return hz >= kMinLogHz ? kMinLogMel + std::log(hz / kMinLogHz) / kLogStep : hz / kFSp;
}
double mel_to_hz(double mel) {
  return mel >= kMinLogMel ? kMinLogHz * std::exp(kLogStep * (mel - kMinLogMel)) : kFSp * mel;
}

// Reflect padding index (torch/numpy "reflect": the edge sample is not repeated) for a
// position `i` of a signal of length n >= 2; folds repeatedly for very short signals.
int64_t reflect(int64_t i, int64_t n) {
  const int64_t period = 2 * (n - 1);
  i = i % period;
  if (i < 0) i += period;
  return i < n ? i : period - i;
}

struct FftrDeleter {
  void operator()(kiss_fftr_cfg cfg) const { kiss_fftr_free(cfg); }
};
using FftrPtr = std::unique_ptr<std::remove_pointer_t<kiss_fftr_cfg>, FftrDeleter>;

// The non-zero band [begin, end) of each mel filter's row: the filters are triangles, so
// the mel product touches ~2-30 of the 201 bins per row.
struct Band {
  int begin = 0;
  int end = 0;
};

}  // namespace

Tensor mel_filters(int n_mels) {
  check_arg(n_mels >= 1, "[mel] n_mels must be positive, got " + std::to_string(n_mels));
  // librosa.filters.mel(sr=16000, n_fft=400, n_mels, fmin=0, fmax=8000, htk=False,
  // norm='slaney', dtype=float32): float64 arithmetic, each row stored as float32 and
  // then scaled in place by the float64 Slaney norm 2 / (f[i+2] - f[i]).
  const int n_pts = n_mels + 2;
  const double max_mel = hz_to_mel(kWhisperSampleRate / 2.0);
  std::vector<double> mel_f(static_cast<size_t>(n_pts));
  for (int i = 0; i < n_pts; ++i) {
    // np.linspace(0, max_mel, n_pts)
    const double mel = i == n_pts - 1 ? max_mel : max_mel * double(i) / double(n_pts - 1);
    mel_f[size_t(i)] = mel_to_hz(mel);
  }
  Tensor out = Tensor::empty({n_mels, kNFreqs}, DType::f32);
  float* w = out.data<float>();
  for (int m = 0; m < n_mels; ++m) {
    const double fdiff_lo = mel_f[size_t(m) + 1] - mel_f[size_t(m)];
    const double fdiff_hi = mel_f[size_t(m) + 2] - mel_f[size_t(m) + 1];
    const double enorm = 2.0 / (mel_f[size_t(m) + 2] - mel_f[size_t(m)]);
    for (int k = 0; k < kNFreqs; ++k) {
      const double freq = double(k) * kWhisperSampleRate / kNFft;  // np.fft.rfftfreq
      const double lower = -(mel_f[size_t(m)] - freq) / fdiff_lo;
      const double upper = (mel_f[size_t(m) + 2] - freq) / fdiff_hi;
      const float tri = float(std::max(0.0, std::min(lower, upper)));
      w[size_t(m) * kNFreqs + size_t(k)] = float(double(tri) * enorm);
    }
  }
  return out;
}

Tensor log_mel_spectrogram(std::span<const float> samples, int n_mels, int64_t padding_samples) {
  check_arg(padding_samples >= 0, "[mel] padding must be non-negative");
  const int64_t n_audio = int64_t(samples.size());
  const int64_t len = n_audio + padding_samples;  // the reference appends zeros first
  // torch.stft(center=True) gives 1 + len/160 frames; the reference drops the last.
  const int64_t n_frames = len / kHopLength;
  Tensor out = Tensor::empty({n_mels, n_frames}, DType::f32);
  if (n_frames == 0) return out;
  check_arg(len > kNFft / 2,
            "[mel] need more than " + std::to_string(kNFft / 2) + " samples for reflect padding");

  const Tensor filters = mel_filters(n_mels);
  const float* fw = filters.data<float>();
  std::vector<Band> bands(static_cast<size_t>(n_mels));
  for (int m = 0; m < n_mels; ++m) {
    const float* row = fw + size_t(m) * kNFreqs;
    int b = 0, e = kNFreqs;
    while (b < e && row[b] == 0.0f) ++b;
    while (e > b && row[e - 1] == 0.0f) --e;
    bands[size_t(m)] = {b, e};
  }
  // torch.hann_window(400) (periodic): 0.5 - 0.5 cos(2 pi n / 400).
  std::array<float, kNFft> window;
  for (int n = 0; n < kNFft; ++n)
    window[size_t(n)] = float(0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * n / kNFft));

  float* o = out.data<float>();
  auto sample = [&](int64_t i) -> float {  // the zero-padded signal, reflected at both ends
    const int64_t j = (i < 0 || i >= len) ? reflect(i, len) : i;
    return j < n_audio ? samples[size_t(j)] : 0.0f;
  };
  cpu_threads().parallel_for(n_frames, 32, [&](int64_t t0, int64_t t1) {
    FftrPtr cfg(kiss_fftr_alloc(kNFft, 0, nullptr, nullptr));
    check(cfg != nullptr, ErrorKind::resource_exhausted, "[mel] cannot allocate the FFT");
    std::array<float, kNFft> frame;
    std::array<kiss_fft_cpx, kNFreqs> spec;
    std::array<float, kNFreqs> power;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t start = t * kHopLength - kNFft / 2;  // centered: pad 200 each side
      for (int n = 0; n < kNFft; ++n) frame[size_t(n)] = sample(start + n) * window[size_t(n)];
      kiss_fftr(cfg.get(), frame.data(), spec.data());
      for (int k = 0; k < kNFreqs; ++k)
        power[size_t(k)] =
            spec[size_t(k)].r * spec[size_t(k)].r + spec[size_t(k)].i * spec[size_t(k)].i;
      for (int m = 0; m < n_mels; ++m) {
        const float* row = fw + size_t(m) * kNFreqs;
        double acc = 0.0;
        for (int k = bands[size_t(m)].begin; k < bands[size_t(m)].end; ++k)
          acc += double(row[k]) * double(power[size_t(k)]);
        const float mel = std::max(float(acc), 1e-10f);
        o[size_t(m) * size_t(n_frames) + size_t(t)] = std::log10(mel);
      }
    }
  });
  const size_t total = size_t(n_mels) * size_t(n_frames);
  const float floor = *std::max_element(o, o + total) - 8.0f;
  for (size_t i = 0; i < total; ++i) o[i] = (std::max(o[i], floor) + 4.0f) / 4.0f;
  return out;
}

Tensor pad_or_trim_frames(const Tensor& mel, int64_t frames) {
  check_arg(
      mel.ndim() == 2 && mel.dtype() == DType::f32,
      "[mel] pad_or_trim_frames expects an f32 [n_mels, n_frames] tensor, got " + mel.describe());
  check_arg(frames >= 0, "[mel] frames must be non-negative");
  return mel_columns(mel, 0, std::min(mel.dim(1), frames), frames);
}

Tensor mel_columns(const Tensor& mel, int64_t begin, int64_t count, int64_t frames) {
  Tensor out = mel.device() == Device::cpu
                   ? Tensor::empty({mel.dim(0), frames}, DType::f32)
                   : mel_pool(mel.device()).alloc({mel.dim(0), frames}, DType::f32);
  copy_columns(mel, begin, count, out);
  return out;
}

}  // namespace parley
