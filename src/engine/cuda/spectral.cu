// Spectral ops on CUDA (ops/spectral.h): grid-stride element loops, math in f32; the clamps
// are written as std::max(v, floor) on the CPU (v unless v < floor: NaN stays NaN).
// log_mel_normalize is two launches: per-block maxima into scratch, then every block
// reduces those (at most kMaxBlocks of them) and clamps its share of x.
#include <algorithm>

#include "engine/cuda/common.cuh"
#include "engine/ops/spectral.h"

namespace parley::cuda {

namespace {

constexpr int kMaxBlocks = 256;  // blocks of the max pass; the clamp pass reads all partials

__device__ __forceinline__ int64_t reflect(int64_t i, int64_t n) {
  const int64_t period = 2 * (n - 1);
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - i;
}

template <typename T>
__global__ void stft_frames_kernel(const T* x, int64_t n_signal, const T* w, T* out, int64_t n_fft,
                                   int64_t total, int64_t first, int64_t hop, int64_t len) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e / n_fft, n = e - t * n_fft;
    int64_t i = (first + t) * hop - n_fft / 2 + n;
    if (i < 0 || i >= len) i = reflect(i, len);
    const float s = i < n_signal ? dev_to_f32(x[i]) : 0.0f;
    out[e] = dev_from_f32<T>(s * dev_to_f32(w[n]));
  }
}

template <typename T>
__global__ void power_kernel(const T* spec, T* power, int64_t f, int64_t total) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = e / f, k = e - r * f;
    const float a = dev_to_f32(spec[r * 2 * f + k]), b = dev_to_f32(spec[r * 2 * f + f + k]);
    power[e] = dev_from_f32<T>(a * a + b * b);
  }
}

// One element of out per iteration (coalesced writes; mel [T, M] is read with stride M).
template <typename T>
__global__ void log_mel_columns_kernel(const T* mel, T* out, int64_t n_frames, int64_t n_mels,
                                       int64_t n_out, int64_t offset) {
  const int64_t total = n_frames * n_mels;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t m = e / n_frames, t = e - m * n_frames;
    const float v = dev_to_f32(mel[t * n_mels + m]);
    out[m * n_out + offset + t] = dev_from_f32<T>(log10f(v < kLogMelFloor ? kLogMelFloor : v));
  }
}

template <typename T>
__global__ void block_max_kernel(const T* x, int64_t n, float* partial) {
  float m = -INFINITY;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x)
    m = MaxOp{}(m, dev_to_f32(x[e]));
  m = block_reduce(m, MaxOp{});
  if (threadIdx.x == 0) partial[blockIdx.x] = m;
}

template <typename T>
__global__ void clamp_kernel(T* x, int64_t n, const float* partial, int n_partial) {
  float m = -INFINITY;
  for (int i = int(threadIdx.x); i < n_partial; i += int(blockDim.x)) m = MaxOp{}(m, partial[i]);
  const float floor = block_reduce(m, MaxOp{}) - kLogMelRange;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const float v = dev_to_f32(x[e]);
    x[e] = dev_from_f32<T>(((v < floor ? floor : v) + kLogMelOffset) / kLogMelScale);
  }
}

template <typename T>
__global__ void copy_columns_kernel(const T* x, T* out, int64_t cols, int64_t begin, int64_t count,
                                    int64_t width, int64_t total) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = e / width, j = e - r * width;
    out[e] = j < count ? x[r * cols + begin + j] : dev_from_f32<T>(0.0f);
  }
}

}  // namespace

void stft_frames(const Tensor& signal, const Tensor& window, Tensor& frames,
                 const StftFramesOptions& opt) {
  const int64_t total = frames.numel();
  if (total == 0) return;
  dispatch_device_float(signal.dtype(), "stft_frames", [&](auto tag) {
    using T = decltype(tag);
    stft_frames_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>(
        signal.data<T>(), signal.dim(0), window.data<T>(), frames.data<T>(), window.dim(0), total,
        opt.first_frame, opt.hop, opt.length);
  });
  check_launch("stft_frames");
}

void power_spectrum(const Tensor& spec, Tensor& power) {
  const int64_t total = power.numel();
  if (total == 0) return;
  dispatch_device_float(spec.dtype(), "power_spectrum", [&](auto tag) {
    using T = decltype(tag);
    power_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>(spec.data<T>(), power.data<T>(),
                                                                power.dim(1), total);
  });
  check_launch("power_spectrum");
}

void log_mel_columns(const Tensor& mel, Tensor& out, int64_t offset) {
  const int64_t total = mel.numel();
  if (total == 0) return;
  dispatch_device_float(mel.dtype(), "log_mel_columns", [&](auto tag) {
    using T = decltype(tag);
    log_mel_columns_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>(
        mel.data<T>(), out.data<T>(), mel.dim(0), mel.dim(1), out.dim(1), offset);
  });
  check_launch("log_mel_columns");
}

void log_mel_normalize(Tensor& x) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const unsigned blocks = std::min(grid_for(n), unsigned(kMaxBlocks));
  Scratch scratch(kMaxBlocks * sizeof(float));
  float* partial = static_cast<float*>(scratch.data());
  dispatch_device_float(x.dtype(), "log_mel_normalize", [&](auto tag) {
    using T = decltype(tag);
    block_max_kernel<T><<<blocks, kThreads, 0, stream()>>>(x.data<T>(), n, partial);
    check_launch("log_mel_normalize");
    clamp_kernel<T><<<grid_for(n), kThreads, 0, stream()>>>(x.data<T>(), n, partial, int(blocks));
  });
  check_launch("log_mel_normalize");
}

void copy_columns(const Tensor& x, int64_t begin, int64_t count, Tensor& out) {
  const int64_t total = out.numel();
  if (total == 0) return;
  dispatch_device_float(x.dtype(), "copy_columns", [&](auto tag) {
    using T = decltype(tag);
    copy_columns_kernel<T><<<grid_for(total), kThreads, 0, stream()>>>(
        x.data<T>(), out.data<T>(), x.dim(1), begin, count, out.dim(1), total);
  });
  check_launch("copy_columns");
}

}  // namespace parley::cuda
