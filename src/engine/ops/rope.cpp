// RoPE: frequency tables from the scaling scheme, argument checks, then CPU or CUDA.
#include "engine/ops/rope.h"

#include <cmath>
#include <numbers>

#include "engine/error.h"
#include "engine/ops/op_checks.h"

namespace parley {

std::vector<float> rope_inv_freq(int head_dim, double theta, const RopeScaling& s) {
  check_arg(head_dim > 0 && head_dim % 2 == 0,
            "[rope] head_dim " + std::to_string(head_dim) + " must be positive and even");
  std::vector<float> f(size_t(head_dim / 2));
  for (size_t i = 0; i < f.size(); ++i)
    f[i] = float(1.0 / std::pow(theta, double(2 * i) / double(head_dim)));
  if (s.type == "default") return f;
  check_arg(s.factor > 0, "[rope] rope_scaling factor must be positive");
  if (s.type == "linear") {
    for (float& x : f) x = x / s.factor;
    return f;
  }
  if (s.type == "llama3") {
    check_arg(s.high_freq_factor > s.low_freq_factor,
              "[rope] llama3 rope_scaling needs high_freq_factor > low_freq_factor");
    const double low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
    const double high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
    for (float& x : f) {
      const double wavelen = 2.0 * std::numbers::pi / double(x);
      if (wavelen > low_wavelen) {
        x = float(double(x) / s.factor);
      } else if (wavelen > high_wavelen) {
        const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        x = float((1.0 - smooth) * double(x) / s.factor + smooth * double(x));
      }
    }
    return f;
  }
  throw Error(ErrorKind::unsupported, "[rope] rope_scaling type '" + s.type +
                                          "' is not supported (default, linear, llama3)");
}

void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq) {
  constexpr std::string_view op = "rope";
  const Device dev =
      detail::check_args(op, {{"x", &x}, {"positions", &positions}, {"inv_freq", &inv_freq}});
  if (dev == Device::cpu)
    detail::check_dtype(op, "x", x, DType::f32);
  else
    detail::require(is_float(x.dtype()), op,
                    [&] { return detail::arg_str("x", x) + ": must be a float type"; });
  detail::check_dtype(op, "positions", positions, DType::i32);
  detail::check_dtype(op, "inv_freq", inv_freq, DType::f32);
  detail::require(x.ndim() == 3 && x.dim(2) % 2 == 0, op,
                  [&] { return detail::arg_str("x", x) + ": must be [T, H, D] with D even"; });
  detail::check_shape(op, "positions", positions, Shape{x.dim(0)});
  detail::check_shape(op, "inv_freq", inv_freq, Shape{x.dim(2) / 2});
  if (dev == Device::cuda)
    cuda::rope(x, positions, inv_freq);
  else
    cpu::rope(x, positions, inv_freq);
}

}  // namespace parley
