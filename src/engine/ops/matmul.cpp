// Public matmul: shape, dtype and device checks, then the CPU or CUDA GEMM.
#include "engine/ops/matmul.h"

#include "engine/ops/elementwise.h"
#include "engine/ops/op_checks.h"

namespace parley {

void matmul(const Tensor& a, const Tensor& b, Tensor& c, const MatmulOptions& opt) {
  constexpr std::string_view op = "matmul";
  using detail::arg_str;
  using detail::require;
  const Device dev = detail::check_args(op, {{"a", &a}, {"b", &b}, {"c", &c}, {"bias", opt.bias}});
  detail::check_float(op, "a", a);
  const std::string ab = arg_str("a", a) + " and " + arg_str("b", b);
  require(b.dtype() == a.dtype(), op, [&] { return ab + ": dtypes differ"; });
  require(a.ndim() == 2 || a.ndim() == 3, op,
          [&] { return arg_str("a", a) + ": expected [M, K] or [B, M, K]"; });
  require(b.ndim() == 2 || (b.ndim() == 3 && a.ndim() == 3), op,
          [&] { return ab + ": b must be 2-D, or 3-D [B, K, N] with a 3-D a"; });
  const bool batched_b = b.ndim() == 3;
  require(!batched_b || b.dim(0) == a.dim(0), op, [&] {
    return ab + ": batch sizes " + std::to_string(a.dim(0)) + " and " + std::to_string(b.dim(0)) +
           " differ";
  });
  const int64_t k = a.dim(-1);
  const int64_t kb = opt.trans_b ? b.dim(-1) : b.dim(-2);
  const int64_t n = opt.trans_b ? b.dim(-2) : b.dim(-1);
  require(k == kb, op, [&] {
    return ab + ": inner dimensions " + std::to_string(k) + " and " + std::to_string(kb) +
           " differ" + (opt.trans_b ? " (b is [N, K] with trans_b)" : "");
  });
  Shape want = a.shape();
  want[-1] = n;
  require(c.shape() == want, op, [&] {
    return arg_str("c", c) + ": expected shape " + want.str() + " for " + ab +
           (opt.trans_b ? " with trans_b" : "");
  });
  require(c.dtype() == DType::f32 || c.dtype() == a.dtype(), op, [&] {
    return arg_str("c", c) + ": expected dtype f32 or " + std::string(dtype_name(a.dtype()));
  });
  if (opt.bias) detail::check_param(op, "bias", *opt.bias, n, a.dtype());
  require(c.numel() == 0 || (c.raw() != a.raw() && c.raw() != b.raw()), op,
          [&] { return "c must not share memory with a or b"; });
  require(!opt.gelu || opt.beta == 0.0f, op, [&] {
    return std::string("gelu needs beta == 0, got beta = ") + std::to_string(opt.beta);
  });
  if (dev == Device::cuda) {
    cuda::matmul(a, b, c, opt);
  } else {
    cpu::matmul(a, b, c, opt);
    if (opt.gelu) cpu::unary(UnaryOp::gelu, c, c);
  }
}

}  // namespace parley
