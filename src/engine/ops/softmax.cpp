// Public softmax / log_softmax: argument checks, then the CPU or CUDA implementation.
#include "engine/ops/softmax.h"

#include "engine/ops/op_checks.h"

namespace parley {

namespace {

void softmax_any(std::string_view op, const Tensor& x, Tensor& out, bool log) {
  const Device dev = detail::check_args(op, {{"x", &x}, {"out", &out}});
  detail::check_float(op, "x", x);
  detail::require(x.ndim() >= 1, op,
                  [&] { return detail::arg_str("x", x) + ": needs at least one dimension"; });
  detail::require(out.shape() == x.shape() && out.dtype() == x.dtype(), op, [&] {
    return detail::arg_str("out", out) + " must match " + detail::arg_str("x", x);
  });
  if (dev == Device::cuda)
    cuda::softmax(x, out, log);
  else
    cpu::softmax(x, out, log);
}

}  // namespace

void softmax(const Tensor& x, Tensor& out) { softmax_any("softmax", x, out, false); }

void log_softmax(const Tensor& x, Tensor& out) { softmax_any("log_softmax", x, out, true); }

}  // namespace parley
