// Public spectral ops (ops/spectral.h): argument checks, then the CPU or CUDA implementation.
#include "engine/ops/spectral.h"

#include <string>

#include "engine/ops/op_checks.h"

namespace parley {

using detail::arg_str;
using detail::require;

namespace {

// Every tensor float and of `first`'s dtype.
void check_same_float(std::string_view op, std::initializer_list<detail::Arg> args) {
  const detail::Arg& first = *args.begin();
  detail::check_float(op, first.name, *first.t);
  for (const detail::Arg& a : args)
    require(a.t->dtype() == first.t->dtype(), op, [&] {
      return arg_str(first.name, *first.t) + " and " + arg_str(a.name, *a.t) + ": dtypes differ";
    });
}

}  // namespace

void stft_frames(const Tensor& signal, const Tensor& window, Tensor& frames,
                 const StftFramesOptions& opt) {
  constexpr std::string_view op = "stft_frames";
  const Device dev =
      detail::check_args(op, {{"signal", &signal}, {"window", &window}, {"frames", &frames}});
  check_same_float(op, {{"signal", &signal}, {"window", &window}, {"frames", &frames}});
  require(signal.ndim() == 1 && window.ndim() == 1 && window.dim(0) >= 1, op, [&] {
    return arg_str("signal", signal) + " and " + arg_str("window", window) +
           ": expected [S] and [n_fft] with n_fft >= 1";
  });
  const int64_t n_fft = window.dim(0);
  require(frames.ndim() == 2 && frames.dim(1) == n_fft, op, [&] {
    return arg_str("frames", frames) + ": expected [T, " + std::to_string(n_fft) + "]";
  });
  require(opt.hop >= 1 && opt.first_frame >= 0, op, [&] {
    return "hop " + std::to_string(opt.hop) + " and first_frame " +
           std::to_string(opt.first_frame) + ": expected hop >= 1, first_frame >= 0";
  });
  require(opt.length >= signal.dim(0) && opt.length > n_fft / 2 && opt.length >= 2, op, [&] {
    return "length " + std::to_string(opt.length) + " for " + arg_str("signal", signal) +
           ": reflect padding of " + std::to_string(n_fft / 2) +
           " needs length >= S, > n_fft / 2 and >= 2";
  });
  if (dev == Device::cuda)
    cuda::stft_frames(signal, window, frames, opt);
  else
    cpu::stft_frames(signal, window, frames, opt);
}

void power_spectrum(const Tensor& spec, Tensor& power) {
  constexpr std::string_view op = "power_spectrum";
  const Device dev = detail::check_args(op, {{"spec", &spec}, {"power", &power}});
  check_same_float(op, {{"spec", &spec}, {"power", &power}});
  require(spec.ndim() == 2 && spec.dim(1) % 2 == 0, op,
          [&] { return arg_str("spec", spec) + ": expected [T, 2F]"; });
  detail::check_shape(op, "power", power, Shape{spec.dim(0), spec.dim(1) / 2});
  if (dev == Device::cuda)
    cuda::power_spectrum(spec, power);
  else
    cpu::power_spectrum(spec, power);
}

void log_mel_columns(const Tensor& mel, Tensor& out, int64_t offset) {
  constexpr std::string_view op = "log_mel_columns";
  const Device dev = detail::check_args(op, {{"mel", &mel}, {"out", &out}});
  check_same_float(op, {{"mel", &mel}, {"out", &out}});
  require(mel.ndim() == 2 && out.ndim() == 2 && out.dim(0) == mel.dim(1), op, [&] {
    return arg_str("mel", mel) + " and " + arg_str("out", out) + ": expected [T, M] and [M, N]";
  });
  require(offset >= 0 && offset + mel.dim(0) <= out.dim(1), op, [&] {
    return "offset " + std::to_string(offset) + " + " + std::to_string(mel.dim(0)) + " frames of " +
           arg_str("mel", mel) + " exceed " + arg_str("out", out);
  });
  if (dev == Device::cuda)
    cuda::log_mel_columns(mel, out, offset);
  else
    cpu::log_mel_columns(mel, out, offset);
}

void log_mel_normalize(Tensor& x) {
  constexpr std::string_view op = "log_mel_normalize";
  const Device dev = detail::check_args(op, {{"x", &x}});
  detail::check_float(op, "x", x);
  if (x.numel() == 0) return;
  if (dev == Device::cuda)
    cuda::log_mel_normalize(x);
  else
    cpu::log_mel_normalize(x);
}

void copy_columns(const Tensor& x, int64_t begin, int64_t count, Tensor& out) {
  constexpr std::string_view op = "copy_columns";
  const Device dev = detail::check_args(op, {{"x", &x}, {"out", &out}});
  check_same_float(op, {{"x", &x}, {"out", &out}});
  require(x.ndim() == 2 && out.ndim() == 2 && out.dim(0) == x.dim(0), op, [&] {
    return arg_str("x", x) + " and " + arg_str("out", out) + ": expected [R, C] and [R, W]";
  });
  require(begin >= 0 && count >= 0 && count <= out.dim(1) && begin + count <= x.dim(1), op, [&] {
    return "columns [" + std::to_string(begin) + ", " + std::to_string(begin) + " + " +
           std::to_string(count) + ") of " + arg_str("x", x) + " into " + arg_str("out", out) +
           ": out of range";
  });
  if (dev == Device::cuda)
    cuda::copy_columns(x, begin, count, out);
  else
    cpu::copy_columns(x, begin, count, out);
}

}  // namespace parley
