#include "engine/ops/op_checks.h"

namespace parley::detail {

std::string tensor_str(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + t.shape().str();
}

std::string arg_str(const char* name, const Tensor& t) {
  return std::string(name) + " " + tensor_str(t);
}

void fail(std::string_view op, const std::string& message, ErrorKind kind) {
  throw Error(kind, "[" + std::string(op) + "] " + message);
}

Device check_args(std::string_view op, std::initializer_list<Arg> args) {
  const Arg* first = nullptr;
  for (const Arg& a : args) {
    if (!a.t) continue;
    require(a.t->defined(), op,
            [&] { return std::string(a.name) + " " + tensor_str(*a.t) + " has no memory"; });
    if (!first) {
      first = &a;
    } else if (a.t->device() != first->t->device()) {
      fail(op, arg_str(first->name, *first->t) + " is on " +
                   std::string(device_name(first->t->device())) + " but " + arg_str(a.name, *a.t) +
                   " is on " + std::string(device_name(a.t->device())));
    }
  }
  return first ? first->t->device() : Device::cpu;
}

void check_float(std::string_view op, const char* name, const Tensor& t) {
  if (!is_float(t.dtype()))
    fail(op, arg_str(name, t) + ": expected a float dtype (f32, f16, bf16)",
         ErrorKind::unsupported);
}

void check_dtype(std::string_view op, const char* name, const Tensor& t, DType want) {
  require(t.dtype() == want, op,
          [&] { return arg_str(name, t) + ": expected dtype " + std::string(dtype_name(want)); });
}

void check_shape(std::string_view op, const char* name, const Tensor& t, const Shape& want) {
  require(t.shape() == want, op,
          [&] { return arg_str(name, t) + ": expected shape " + want.str(); });
}

void check_param(std::string_view op, const char* name, const Tensor& t, int64_t n, DType like) {
  require(t.dtype() == DType::f32 || t.dtype() == like, op, [&] {
    return arg_str(name, t) + ": expected dtype f32 or " + std::string(dtype_name(like));
  });
  require(t.ndim() == 1 && t.dim(0) == n, op,
          [&] { return arg_str(name, t) + ": expected shape [" + std::to_string(n) + "]"; });
}

bool overlap(const Tensor& a, const Tensor& b) {
  if (a.nbytes() == 0 || b.nbytes() == 0) return false;
  const auto* pa = static_cast<const char*>(a.raw());
  const auto* pb = static_cast<const char*>(b.raw());
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

}  // namespace parley::detail
