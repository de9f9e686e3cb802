// Public element-wise ops: argument checks, then the CPU or CUDA implementation.
#include "engine/ops/elementwise.h"

#include "engine/ops/op_checks.h"

namespace parley {

using detail::arg_str;
using detail::require;

namespace {

// out must have x's shape and dtype (it may be x itself).
Device check_unary(std::string_view op, const Tensor& x, const Tensor& out) {
  const Device dev = detail::check_args(op, {{"x", &x}, {"out", &out}});
  detail::check_float(op, "x", x);
  require(out.shape() == x.shape() && out.dtype() == x.dtype(), op,
          [&] { return arg_str("out", out) + " must match " + arg_str("x", x); });
  return dev;
}

// b is a's shape or a's trailing dims; a, b and out share one float dtype.
void binary(std::string_view op, BinaryOp kind, const Tensor& a, const Tensor& b, Tensor& out) {
  const Device dev = detail::check_args(op, {{"a", &a}, {"b", &b}, {"out", &out}});
  detail::check_float(op, "a", a);
  require(b.dtype() == a.dtype(), op,
          [&] { return arg_str("a", a) + " and " + arg_str("b", b) + ": dtypes differ"; });
  bool trailing = b.ndim() <= a.ndim();
  for (int i = 1; trailing && i <= b.ndim(); ++i) trailing = b.dim(-i) == a.dim(-i);
  require(trailing, op, [&] {
    return arg_str("a", a) + " and " + arg_str("b", b) +
           ": b must have a's shape or the shape of a's trailing dimensions";
  });
  require(out.shape() == a.shape() && out.dtype() == a.dtype(), op,
          [&] { return arg_str("out", out) + " must match " + arg_str("a", a); });
  if (dev == Device::cuda)
    cuda::binary(kind, a, b, out);
  else
    cpu::binary(kind, a, b, out);
}

}  // namespace

void add(const Tensor& a, const Tensor& b, Tensor& out) { binary("add", BinaryOp::add, a, b, out); }

void mul(const Tensor& a, const Tensor& b, Tensor& out) { binary("mul", BinaryOp::mul, a, b, out); }

void scale(const Tensor& a, float s, Tensor& out) {
  if (check_unary("scale", a, out) == Device::cuda)
    cuda::scale(a, s, out);
  else
    cpu::scale(a, s, out);
}

void gelu(const Tensor& x, Tensor& out) {
  if (check_unary("gelu", x, out) == Device::cuda)
    cuda::unary(UnaryOp::gelu, x, out);
  else
    cpu::unary(UnaryOp::gelu, x, out);
}

void silu(const Tensor& x, Tensor& out) {
  if (check_unary("silu", x, out) == Device::cuda)
    cuda::unary(UnaryOp::silu, x, out);
  else
    cpu::unary(UnaryOp::silu, x, out);
}

void convert(const Tensor& a, Tensor& out) {
  constexpr std::string_view op = "convert";
  const Device dev = detail::check_args(op, {{"a", &a}, {"out", &out}});
  require(out.shape() == a.shape(), op,
          [&] { return arg_str("a", a) + " and " + arg_str("out", out) + ": shapes differ"; });
  require(a.dtype() == out.dtype() || (is_float(a.dtype()) && is_float(out.dtype())), op, [&] {
    return arg_str("a", a) + " to " + arg_str("out", out) +
           ": only float <-> float or same-dtype conversions exist";
  });
  if (dev == Device::cuda)
    cuda::convert(a, out);
  else
    cpu::convert(a, out);
}

}  // namespace parley
