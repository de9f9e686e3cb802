// Public matmul_i8 and quantize_row_int8: shape, dtype and device checks, then the CPU code.
#include "engine/ops/int8_matmul.h"

#include "engine/ops/op_checks.h"

namespace parley {

namespace {
constexpr std::string_view kOp = "matmul_i8";
}  // namespace

RowInt8 quantize_row_int8(const Tensor& w) {
  using detail::require;
  const Device dev = detail::check_args("quantize_row_int8", {{"w", &w}});
  if (dev != Device::cpu)
    detail::fail("quantize_row_int8", "runs on the CPU only", ErrorKind::unsupported);
  detail::check_dtype("quantize_row_int8", "w", w, DType::f32);
  require(w.ndim() == 2, "quantize_row_int8", "w " + w.describe() + ": expected [N, K]");
  return cpu::quantize_row_int8(w);
}

void matmul_i8(const Tensor& a, const RowInt8& w, Tensor& c, const MatmulI8Options& opt) {
  using detail::arg_str;
  using detail::require;
  require(w.defined(), kOp, "w is empty");
  const Device dev = detail::check_args(kOp, {{"a", &a},
                                              {"c", &c},
                                              {"bias", opt.bias},
                                              {"w.q", &w.q},
                                              {"w.scale", &w.scale},
                                              {"w.colsum", &w.colsum}});
  if (dev != Device::cpu) detail::fail(kOp, "runs on the CPU only", ErrorKind::unsupported);
  detail::check_dtype(kOp, "a", a, DType::f32);
  detail::check_dtype(kOp, "c", c, DType::f32);
  detail::check_dtype(kOp, "w.q", w.q, DType::i8);
  require(w.q.ndim() == 2, kOp, [&] { return arg_str("w.q", w.q) + ": expected [N, K]"; });
  const int64_t n = w.q.dim(0), k = w.q.dim(1);
  detail::check_dtype(kOp, "w.scale", w.scale, DType::f32);
  detail::check_shape(kOp, "w.scale", w.scale, {n});
  detail::check_dtype(kOp, "w.colsum", w.colsum, DType::i32);
  detail::check_shape(kOp, "w.colsum", w.colsum, {n});
  require(a.ndim() == 2 && a.dim(1) == k, kOp, [&] {
    return arg_str("a", a) + " and " + arg_str("w.q", w.q) + ": expected a [M, " +
           std::to_string(k) + "]";
  });
  detail::check_shape(kOp, "c", c, {a.dim(0), n});
  if (opt.bias) {
    detail::check_dtype(kOp, "bias", *opt.bias, DType::f32);
    detail::check_shape(kOp, "bias", *opt.bias, {n});
  }
  require(!detail::overlap(a, c), kOp,
          [] { return std::string("c must not share memory with a"); });
  if (c.numel() == 0) return;
  cpu::matmul_i8(a, w, c, opt);
}

bool matmul_i8_native() { return cpu::matmul_i8_native(); }

}  // namespace parley
