// glu: argument checks, then the CPU or CUDA implementation.
#include "engine/ops/glu.h"

#include "engine/ops/op_checks.h"

namespace parley {

void glu(const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out) {
  constexpr std::string_view op = "glu";
  const Device dev = detail::check_args(op, {{"gate", &gate}, {"up", &up}, {"out", &out}});
  if (dev == Device::cpu)
    detail::check_dtype(op, "gate", gate, DType::f32);
  else
    detail::require(is_float(gate.dtype()), op,
                    [&] { return detail::arg_str("gate", gate) + ": must be a float type"; });
  detail::check_dtype(op, "up", up, gate.dtype());
  detail::check_dtype(op, "out", out, gate.dtype());
  detail::check_shape(op, "up", up, gate.shape());
  detail::check_shape(op, "out", out, gate.shape());
  if (dev == Device::cuda)
    cuda::glu(gate, up, act, out);
  else
    cpu::glu(gate, up, act, out);
}

}  // namespace parley
