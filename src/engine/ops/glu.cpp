// glu: argument checks, then the CPU or CUDA implementation.
#include "engine/ops/glu.h"

#include "engine/ops/op_checks.h"

namespace parley {

void glu(const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out) {
  constexpr std::string_view op = "glu";
  const Device dev = detail::check_args(op, {{"gate", &gate}, {"up", &up}, {"out", &out}});
  detail::check_dtype(op, "gate", gate, DType::f32);
  detail::check_dtype(op, "up", up, DType::f32);
  detail::check_dtype(op, "out", out, DType::f32);
  detail::check_shape(op, "up", up, gate.shape());
  detail::check_shape(op, "out", out, gate.shape());
  if (dev == Device::cuda)
    cuda::glu(gate, up, act, out);
  else
    cpu::glu(gate, up, act, out);
}

}  // namespace parley
