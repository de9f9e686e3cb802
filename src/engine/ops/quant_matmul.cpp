// Public matmul_quant: shape, dtype and device checks, then the CPU or CUDA kernel.
#include "engine/ops/quant_matmul.h"

#include "engine/ops/op_checks.h"

namespace parley {

namespace {

constexpr std::string_view kOp = "matmul_quant";

void check_quant_matrix(const QuantMatrix& w) {
  using detail::require;
  if (int(w.type) >= kQuantTypeCount)
    detail::fail(kOp, "weight type " + std::to_string(int(w.type)) + " is not a quantized type",
                 ErrorKind::unsupported);
  const QuantFormat& f = quant_format(w.type);
  require(w.rows >= 0 && w.cols >= 0 && w.cols % f.block_size == 0, kOp, [&] {
    return "w " + w.describe() + ": cols must be a multiple of the block size " +
           std::to_string(f.block_size);
  });
  require(w.data != nullptr || w.nbytes() == 0, kOp,
          [&] { return "w " + w.describe() + " has no data"; });
  require(!w.packed ||
              (w.device == Device::cpu && w.type == QuantType::q4_k && w.rows % kQ4kX8Rows == 0),
          kOp, [&] { return "w " + w.describe() + ": only CPU q4_K is packed, 8 rows a group"; });
}

}  // namespace

void matmul_quant(const Tensor& a, const QuantMatrix& w, Tensor& c, const MatmulQuantOptions& opt) {
  using detail::arg_str;
  using detail::require;
  check_quant_matrix(w);
  const Device dev = detail::check_args(kOp, {{"a", &a}, {"c", &c}, {"bias", opt.bias}});
  require(w.device == dev, kOp, [&] {
    return "w " + w.describe() + " and " + arg_str("a", a) + " are on different devices";
  });
  detail::check_dtype(kOp, "a", a, DType::f32);
  detail::check_dtype(kOp, "c", c, DType::f32);
  require(a.ndim() == 2, kOp, [&] { return arg_str("a", a) + ": expected [M, K]"; });
  require(a.dim(1) == w.cols, kOp, [&] {
    return arg_str("a", a) + " and w " + w.describe() + ": inner dimensions " +
           std::to_string(a.dim(1)) + " and " + std::to_string(w.cols) + " differ";
  });
  detail::check_shape(kOp, "c", c, {a.dim(0), w.rows});
  if (opt.bias) {
    detail::check_dtype(kOp, "bias", *opt.bias, DType::f32);
    detail::check_shape(kOp, "bias", *opt.bias, {w.rows});
  }
  require(!detail::overlap(a, c), kOp,
          [] { return std::string("c must not share memory with a"); });
  if (c.numel() == 0) return;
  if (dev == Device::cuda)
    cuda::matmul_quant(a, w, c, opt);
  else
    cpu::matmul_quant(a, w, c, opt);
}

bool quant_fast_path(QuantType t) { return cpu::quant_fast_path(t); }

QuantMatrix matmul_quant_layout(const QuantMatrix& w) {
  return w.device == Device::cpu ? cpu::matmul_quant_layout(w) : w;
}

}  // namespace parley
