// Public matmul: shape, dtype and device checks, then the CPU or CUDA GEMM.
#include "engine/ops/matmul.h"

#include "engine/ops/elementwise.h"
#include "engine/ops/norm.h"
#include "engine/ops/op_checks.h"

namespace parley {

namespace {

// opt.norm's tensors against a [M, K], b [N, K] (trans_b) and c.
void check_norm(std::string_view op, const Tensor& a, const Tensor& b, const Tensor& c,
                const MatmulOptions& opt) {
  using detail::arg_str;
  using detail::require;
  const NormInput& nm = *opt.norm;
  require(nm.gamma && nm.shift && nm.w_gamma && nm.w_shift && nm.scratch, op,
          [] { return std::string("norm needs gamma, shift, w_gamma, w_shift and scratch"); });
  require(b.ndim() == 2 && opt.trans_b, op,
          [&] { return arg_str("b", b) + ": norm needs a 2-D b [N, K] with trans_b"; });
  detail::check_args(op, {{"a", &a},
                          {"gamma", nm.gamma},
                          {"shift", nm.shift},
                          {"w_gamma", nm.w_gamma},
                          {"w_shift", nm.w_shift},
                          {"scratch", nm.scratch}});
  const int64_t k = a.dim(-1), n = b.dim(0);
  detail::check_param(op, "gamma", *nm.gamma, k, a.dtype());
  detail::check_param(op, "shift", *nm.shift, k, a.dtype());
  const auto check_folded = [&](const char* name, const Tensor& t) {
    require(t.dtype() == DType::f32 && t.shape() == Shape{n}, op,
            [&] { return arg_str(name, t) + ": expected f32 [" + std::to_string(n) + "]"; });
  };
  check_folded("w_gamma", *nm.w_gamma);
  check_folded("w_shift", *nm.w_shift);
  require(nm.scratch->shape() == a.shape() && nm.scratch->dtype() == a.dtype(), op, [&] {
    return arg_str("scratch", *nm.scratch) + ": expected a's shape and dtype, " + arg_str("a", a);
  });
  require(!detail::overlap(*nm.scratch, a) && !detail::overlap(*nm.scratch, c), op,
          [] { return std::string("scratch must not share memory with a or c"); });
}

}  // namespace

void fold_layer_norm(const Tensor& w, const Tensor& gamma, const Tensor& shift, Tensor& w_gamma,
                     Tensor& w_shift) {
  const int64_t n = w.dim(0), k = w.dim(-1);
  MatmulOptions opt;
  opt.trans_b = true;
  Tensor wg = w_gamma.reshape({1, n}), ws = w_shift.reshape({1, n});
  // gamma and shift as one-row a of w's dtype (a parameter may be f32).
  matmul(gamma.reshape({1, k}).cast(w.dtype()), w, wg, opt);
  matmul(shift.reshape({1, k}).cast(w.dtype()), w, ws, opt);
}

namespace detail {

Device check_matmul(std::string_view op, const Tensor& a, const Tensor& b, const Tensor& c,
                    const MatmulOptions& opt) {
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
  if (opt.norm) check_norm(op, a, b, c, opt);
  return dev;
}

}  // namespace detail

void matmul(const Tensor& a, const Tensor& b, Tensor& c, const MatmulOptions& opt) {
  const Device dev = detail::check_matmul("matmul", a, b, c, opt);
  if (opt.norm) {
    if (dev == Device::cuda && cuda::matmul_norm_folded(a, b, c, opt)) return;
    layer_norm(a, *opt.norm->gamma, *opt.norm->shift, opt.norm->eps, *opt.norm->scratch);
    MatmulOptions plain = opt;
    plain.norm = nullptr;
    matmul(*opt.norm->scratch, b, c, plain);
    return;
  }
  if (dev == Device::cuda) {
    cuda::matmul(a, b, c, opt);
  } else {
    cpu::matmul(a, b, c, opt);
    if (opt.gelu) cpu::unary(UnaryOp::gelu, c, c);
  }
}

}  // namespace parley
