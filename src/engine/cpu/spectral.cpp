// CPU spectral ops (ops/spectral.h): plain loops over rows, split over cpu_threads().
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/cpu/cpu_common.h"
#include "engine/ops/spectral.h"

namespace parley::cpu {

namespace {

// Index into a signal of n >= 2 samples, reflected at both ends as often as needed.
inline int64_t reflect(int64_t i, int64_t n) {
  const int64_t period = 2 * (n - 1);
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - i;
}

// Max that propagates NaN (as the CUDA MaxOp).
inline float max_nan(float a, float b) { return (a > b || a != a) ? a : b; }

}  // namespace

void stft_frames(const Tensor& signal, const Tensor& window, Tensor& frames,
                 const StftFramesOptions& opt) {
  const int64_t n_signal = signal.dim(0), n_fft = window.dim(0), n_frames = frames.dim(0);
  const int64_t len = opt.length;
  dispatch_float(signal.dtype(), "stft_frames", [&](auto tag) {
    using T = decltype(tag);
    const T* x = signal.data<T>();
    const T* w = window.data<T>();
    T* out = frames.data<T>();
    cpu_threads().parallel_for(n_frames, row_grain(n_fft), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t start = (opt.first_frame + t) * opt.hop - n_fft / 2;
        T* row = out + t * n_fft;
        for (int64_t n = 0; n < n_fft; ++n) {
          int64_t i = start + n;
          if (i < 0 || i >= len) i = reflect(i, len);
          const float s = i < n_signal ? to_f32(x[i]) : 0.0f;
          row[n] = from_f32<T>(s * to_f32(w[n]));
        }
      }
    });
  });
}

void power_spectrum(const Tensor& spec, Tensor& power) {
  const int64_t rows = power.dim(0), f = power.dim(1);
  dispatch_float(spec.dtype(), "power_spectrum", [&](auto tag) {
    using T = decltype(tag);
    const T* s = spec.data<T>();
    T* p = power.data<T>();
    cpu_threads().parallel_for(rows, row_grain(2 * f), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* re = s + r * 2 * f;
        const T* im = re + f;
        for (int64_t k = 0; k < f; ++k) {
          const float a = to_f32(re[k]), b = to_f32(im[k]);
          p[r * f + k] = from_f32<T>(a * a + b * b);
        }
      }
    });
  });
}

void log_mel_columns(const Tensor& mel, Tensor& out, int64_t offset) {
  const int64_t n_frames = mel.dim(0), n_mels = mel.dim(1), n_out = out.dim(1);
  dispatch_float(mel.dtype(), "log_mel_columns", [&](auto tag) {
    using T = decltype(tag);
    const T* x = mel.data<T>();
    T* o = out.data<T>();
    cpu_threads().parallel_for(n_mels, row_grain(n_frames), [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) {
        T* row = o + m * n_out + offset;
        for (int64_t t = 0; t < n_frames; ++t)
          row[t] = from_f32<T>(std::log10(std::max(to_f32(x[t * n_mels + m]), kLogMelFloor)));
      }
    });
  });
}

void log_mel_normalize(Tensor& x) {
  const int64_t n = x.numel();
  dispatch_float(x.dtype(), "log_mel_normalize", [&](auto tag) {
    using T = decltype(tag);
    T* p = x.data<T>();
    float top = to_f32(p[0]);
    for (int64_t i = 1; i < n; ++i) top = max_nan(top, to_f32(p[i]));
    const float floor = top - kLogMelRange;
    cpu_threads().parallel_for(n, kElementGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        p[i] = from_f32<T>((std::max(to_f32(p[i]), floor) + kLogMelOffset) / kLogMelScale);
    });
  });
}

void copy_columns(const Tensor& x, int64_t begin, int64_t count, Tensor& out) {
  const int64_t rows = x.dim(0), cols = x.dim(1), width = out.dim(1);
  const size_t es = dtype_size(x.dtype());
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(out.raw());
  cpu_threads().parallel_for(rows, row_grain(width), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      char* d = dst + size_t(r * width) * es;
      if (count) std::memcpy(d, src + size_t(r * cols + begin) * es, size_t(count) * es);
      std::memset(d + size_t(count) * es, 0, size_t(width - count) * es);
    }
  });
}

}  // namespace parley::cpu
