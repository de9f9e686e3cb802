// Op harness for the spectral ops (ops/spectral.h) on every built device and float dtype,
// against double-precision loops written here; then their argument checks (host tensors).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine/ops/spectral.h"
#include "op_test_util.h"

namespace parley::test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// numpy "reflect" of index i into n >= 2 samples, written independently of the op: walk
// back and forth until inside.
int64_t reflect_ref(int64_t i, int64_t n) {
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
  return i;
}

class Spectral : public OpTest {};

struct FramesCase {
  int64_t n_signal, length, n_fft, n_frames, first_frame;
  int hop;
};

TEST_P(Spectral, StftFrames) {
  const FramesCase cases[] = {
      {1000, 1000, 400, 7, 0, 160},    // reflect at both ends, no padding
      {1000, 5000, 400, 12, 20, 160},  // a later chunk over the zero padding
      {300, 300, 400, 2, 0, 160},      // a frame wider than the signal
      {5, 9, 16, 5, 0, 3},             // offsets beyond one length: the reflection folds
      {0, 480, 400, 3, 0, 160},        // no samples, only padding
      {4100, 4100, 400, 26, 0, 160}};  // 26 * 400 elements: several CUDA blocks
  for (const FramesCase& c : cases) {
    SCOPED_TRACE("signal " + std::to_string(c.n_signal) + " length " + std::to_string(c.length) +
                 " first " + std::to_string(c.first_frame));
    const HostTensor x = random({c.n_signal}), w = random({c.n_fft}, 0.0f, 1.0f);
    std::vector<double> want(size_t(c.n_frames * c.n_fft));
    for (int64_t t = 0; t < c.n_frames; ++t)
      for (int64_t n = 0; n < c.n_fft; ++n) {
        const int64_t i = reflect_ref((c.first_frame + t) * c.hop - c.n_fft / 2 + n, c.length);
        const double s = i < c.n_signal ? double(x.v[size_t(i)]) : 0.0;
        want[size_t(t * c.n_fft + n)] = s * double(w.v[size_t(n)]);
      }
    Tensor frames = out({c.n_frames, c.n_fft});
    StftFramesOptions opt;
    opt.length = c.length;
    opt.first_frame = c.first_frame;
    opt.hop = c.hop;
    stft_frames(dev(x.t), dev(w.t), frames, opt);
    expect_close(read_floats(frames), want, tol(), "stft_frames");
  }
}

TEST_P(Spectral, PowerSpectrum) {
  for (const Shape& shape : {Shape{7, 26}, Shape{33, 402}}) {
    SCOPED_TRACE(shape.str());
    const HostTensor spec = random(shape, -3.0f, 3.0f);
    const int64_t rows = shape[0], f = shape[1] / 2;
    std::vector<double> want(size_t(rows * f));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < f; ++k) {
        const double a = spec.v[size_t(r * 2 * f + k)], b = spec.v[size_t(r * 2 * f + f + k)];
        want[size_t(r * f + k)] = a * a + b * b;
      }
    Tensor power = out({rows, f});
    power_spectrum(dev(spec.t), power);
    expect_close(read_floats(power), want, tol(), "power_spectrum");
  }
}

TEST_P(Spectral, LogMelColumns) {
  const int64_t n_frames = 9, n_mels = 5, n_out = 20, offset = 6;
  std::vector<float> v(size_t(n_frames * n_mels));
  for (float& x : v) x = std::pow(10.0f, uniform(-4.0f, 3.0f));
  v[0] = 0.0f;    // below the floor: log10(1e-10) = -10
  v[7] = 1e-12f;  // the same (0 in f16, still below the floor)
  v[13] = 1.0f;   // 0
  const HostTensor mel = host_tensor(v, {n_frames, n_mels}, dtype());
  // Columns outside [offset, offset + n_frames) keep out()'s NaN fill.
  std::vector<double> want(size_t(n_mels * n_out), kNaN);
  for (int64_t t = 0; t < n_frames; ++t)
    for (int64_t m = 0; m < n_mels; ++m)
      want[size_t(m * n_out + offset + t)] =
          std::log10(std::max(double(mel.v[size_t(t * n_mels + m)]), double(kLogMelFloor)));
  Tensor o = out({n_mels, n_out});
  log_mel_columns(dev(mel.t), o, offset);
  expect_close(read_floats(o), want, tol(), "log_mel_columns");
}

TEST_P(Spectral, LogMelNormalize) {
  // The small case fits one CUDA block; [80, 4100] spreads the max over many blocks, with
  // the maximum at a random place and a third of the values more than 8 below it.
  for (const Shape& shape : {Shape{3, 50}, Shape{80, 4100}}) {
    SCOPED_TRACE(shape.str());
    const int64_t n = shape.numel();
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = uniform(-10.0f, 1.0f);
    v[size_t(uniform_int(0, n - 1))] = 2.5f;
    const HostTensor x = host_tensor(v, shape, dtype());
    const double top = *std::max_element(x.v.begin(), x.v.end());
    std::vector<double> want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      want[size_t(i)] = (std::max(double(x.v[size_t(i)]), top - 8.0) + 4.0) / 4.0;
    Tensor d = dev(x.t);
    log_mel_normalize(d);
    expect_close(read_floats(d), want, tol(), "log_mel_normalize");
  }
}

TEST_P(Spectral, CopyColumns) {
  struct Case {
    int64_t rows, cols, begin, count, width;
  };
  for (const Case& c : {Case{5, 50, 7, 20, 30}, Case{4, 10, 0, 10, 10}, Case{3, 12, 4, 0, 5},
                        Case{80, 4100, 1100, 3000, 3000}}) {
    SCOPED_TRACE("begin " + std::to_string(c.begin) + " count " + std::to_string(c.count));
    const HostTensor x = random({c.rows, c.cols});
    std::vector<double> want(size_t(c.rows * c.width), 0.0);
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t j = 0; j < c.count; ++j)
        want[size_t(r * c.width + j)] = x.v[size_t(r * c.cols + c.begin + j)];
    Tensor o = out({c.rows, c.width});
    copy_columns(dev(x.t), c.begin, c.count, o);
    expect_close(read_floats(o), want, {0.0, 0.0}, "copy_columns");
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, Spectral, ::testing::ValuesIn(op_params()), op_param_name);

// ---------------------------------------------------------------------------- errors

Tensor f32(const Shape& s) { return Tensor::zeros(s, DType::f32); }

TEST(SpectralErrors, StftFrames) {
  Tensor x = f32({1000}), w = f32({400}), frames = f32({3, 400});
  StftFramesOptions opt;
  opt.length = 1000;
  stft_frames(x, w, frames, opt);  // valid
  Tensor bad_frames = f32({3, 401});
  expect_error([&] { stft_frames(x, w, bad_frames, opt); }, {"[stft_frames]", "[T, 400]"});
  Tensor w16 = Tensor::zeros({400}, DType::f16);
  expect_error([&] { stft_frames(x, w16, frames, opt); }, {"[stft_frames]", "dtypes differ"});
  StftFramesOptions short_len = opt;
  short_len.length = 999;  // fewer than the signal's samples
  expect_error([&] { stft_frames(x, w, frames, short_len); }, {"[stft_frames]", "length 999"});
  Tensor tiny = f32({100});
  StftFramesOptions tiny_len = opt;
  tiny_len.length = 200;  // reflect padding of 200 needs more
  expect_error([&] { stft_frames(tiny, w, frames, tiny_len); }, {"reflect padding of 200"});
  StftFramesOptions zero_hop = opt;
  zero_hop.hop = 0;
  expect_error([&] { stft_frames(x, w, frames, zero_hop); }, {"[stft_frames]", "hop 0"});
  Tensor ints = Tensor::zeros({1000}, DType::i32);
  expect_error([&] { stft_frames(ints, w, frames, opt); }, {"[stft_frames]", "float dtype"},
               ErrorKind::unsupported);
}

TEST(SpectralErrors, PowerAndLogMel) {
  Tensor odd = f32({3, 7}), p = f32({3, 3});
  expect_error([&] { power_spectrum(odd, p); }, {"[power_spectrum]", "[T, 2F]"});
  Tensor spec = f32({3, 8}), p_bad = f32({3, 5});
  expect_error([&] { power_spectrum(spec, p_bad); }, {"[power_spectrum]", "[3, 4]"});
  Tensor mel = f32({10, 80}), o = f32({80, 100}), o_bad = f32({81, 100});
  log_mel_columns(mel, o, 90);  // the last 10 columns: valid
  expect_error([&] { log_mel_columns(mel, o, 91); }, {"[log_mel_columns]", "offset 91"});
  expect_error([&] { log_mel_columns(mel, o, -1); }, {"[log_mel_columns]", "offset -1"});
  expect_error([&] { log_mel_columns(mel, o_bad, 0); }, {"[log_mel_columns]", "[M, N]"});
  Tensor ints = Tensor::zeros({4}, DType::i32);
  expect_error([&] { log_mel_normalize(ints); }, {"[log_mel_normalize]"}, ErrorKind::unsupported);
}

TEST(SpectralErrors, CopyColumns) {
  Tensor x = f32({4, 10}), o = f32({4, 6});
  copy_columns(x, 4, 6, o);  // valid
  expect_error([&] { copy_columns(x, 5, 6, o); }, {"[copy_columns]", "out of range"});
  expect_error([&] { copy_columns(x, 0, 7, o); }, {"[copy_columns]", "out of range"});
  expect_error([&] { copy_columns(x, -1, 2, o); }, {"[copy_columns]", "out of range"});
  Tensor rows = f32({5, 6});
  expect_error([&] { copy_columns(x, 0, 2, rows); }, {"[copy_columns]", "[R, W]"});
}

}  // namespace
}  // namespace parley::test
