// CPU gated activations, element-wise in f32.
#include <cmath>

#include "engine/cpu/cpu_common.h"
#include "engine/cpu/vec_math.h"
#include "engine/ops/glu.h"

namespace parley::cpu {

void glu(const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out) {
  const float* g = gate.data<float>();
  const float* u = up.data<float>();
  float* o = out.data<float>();
  const int64_t n = gate.numel();
  cpu_threads().parallel_for(n, kElementGrain, [&](int64_t b, int64_t e) {
    if (act == GluActivation::silu) {
      silu_mul_f32(g + b, u + b, o + b, e - b);
    } else {
      constexpr float k = 0.7978845608028654f;  // sqrt(2 / pi)
      for (int64_t i = b; i < e; ++i) {
        const float x = g[i];
        o[i] = 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x))) * u[i];
      }
    }
  });
}

}  // namespace parley::cpu
