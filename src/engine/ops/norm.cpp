// Public normalization ops: argument checks, then the CPU or CUDA implementation.
#include "engine/ops/norm.h"

#include "engine/ops/op_checks.h"

namespace parley {

namespace {

Device check_norm(std::string_view op, const Tensor& x, const Tensor& gamma, const Tensor* beta,
                  const Tensor& out) {
  const Device dev =
      detail::check_args(op, {{"x", &x}, {"gamma", &gamma}, {"beta", beta}, {"out", &out}});
  detail::check_float(op, "x", x);
  detail::require(x.ndim() >= 1, op,
                  [&] { return detail::arg_str("x", x) + ": needs at least one dimension"; });
  const int64_t d = x.dim(-1);
  detail::check_param(op, "gamma", gamma, d, x.dtype());
  if (beta) detail::check_param(op, "beta", *beta, d, x.dtype());
  detail::require(out.shape() == x.shape() && out.dtype() == x.dtype(), op, [&] {
    return detail::arg_str("out", out) + " must match " + detail::arg_str("x", x);
  });
  return dev;
}

}  // namespace

void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& out) {
  if (check_norm("layer_norm", x, gamma, &beta, out) == Device::cuda)
    cuda::layer_norm(x, gamma, beta, eps, out);
  else
    cpu::layer_norm(x, gamma, beta, eps, out);
}

void rms_norm(const Tensor& x, const Tensor& gamma, float eps, Tensor& out) {
  if (check_norm("rms_norm", x, gamma, nullptr, out) == Device::cuda)
    cuda::rms_norm(x, gamma, eps, out);
  else
    cpu::rms_norm(x, gamma, eps, out);
}

}  // namespace parley
