// Public conv1d: output length, argument checks, then the CPU or CUDA implementation.
#include "engine/ops/conv.h"

#include "engine/ops/op_checks.h"

namespace parley {

int64_t conv1d_out_length(int64_t length, int64_t kernel, const Conv1dOptions& opt) {
  constexpr std::string_view op = "conv1d";
  detail::require(opt.stride >= 1 && opt.padding >= 0, op, [&] {
    return "stride " + std::to_string(opt.stride) + " and padding " + std::to_string(opt.padding) +
           ": need stride >= 1 and padding >= 0";
  });
  detail::require(kernel >= 1 && length + 2 * opt.padding >= kernel, op, [&] {
    return "input length " + std::to_string(length) + " with padding " +
           std::to_string(opt.padding) + " is shorter than kernel " + std::to_string(kernel);
  });
  return (length + 2 * opt.padding - kernel) / opt.stride + 1;
}

void conv1d(const Tensor& x, const Tensor& w, Tensor& out, const Conv1dOptions& opt) {
  constexpr std::string_view op = "conv1d";
  const Device dev =
      detail::check_args(op, {{"x", &x}, {"w", &w}, {"out", &out}, {"bias", opt.bias}});
  detail::check_float(op, "x", x);
  detail::require(x.ndim() == 3, op, [&] {
    return detail::arg_str("x", x) + ": expected " +
           (opt.tokens_in ? "[B, L, C_in] (tokens_in)" : "[B, C_in, L]");
  });
  detail::require(w.ndim() == 3, op,
                  [&] { return detail::arg_str("w", w) + ": expected [C_out, C_in, K]"; });
  detail::require(w.dtype() == x.dtype(), op, [&] {
    return detail::arg_str("x", x) + " and " + detail::arg_str("w", w) + ": dtypes differ";
  });
  const int64_t c_in = x.dim(opt.tokens_in ? 2 : 1), len = x.dim(opt.tokens_in ? 1 : 2);
  detail::require(w.dim(1) == c_in, op, [&] {
    return detail::arg_str("x", x) + " and " + detail::arg_str("w", w) + ": input channels " +
           std::to_string(c_in) + " and " + std::to_string(w.dim(1)) + " differ";
  });
  if (opt.bias) detail::check_param(op, "bias", *opt.bias, w.dim(0), x.dtype());
  const int64_t l_out = conv1d_out_length(len, w.dim(2), opt);
  const Shape want =
      opt.tokens_out ? Shape{x.dim(0), l_out, w.dim(0)} : Shape{x.dim(0), w.dim(0), l_out};
  detail::require(out.dtype() == x.dtype() && out.shape() == want, op, [&] {
    return detail::arg_str("out", out) + " must be " + std::string(dtype_name(x.dtype())) +
           want.str() + " for " + detail::arg_str("x", x) + " and " + detail::arg_str("w", w);
  });
  if (dev == Device::cuda)
    cuda::conv1d(x, w, out, opt);
  else
    cpu::conv1d(x, w, out, opt);
}

}  // namespace parley
