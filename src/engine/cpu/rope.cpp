// CPU RoPE: one token per task; the angle in f32 (position * inv_freq), as mlx-lm and
// Hugging Face compute it, so long positions round the same way.
#include <cmath>

#include "engine/cpu/cpu_common.h"
#include "engine/ops/rope.h"

namespace parley::cpu {

void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq) {
  const int64_t n_tok = x.dim(0), n_head = x.dim(1), d = x.dim(2), half = d / 2;
  float* px = x.data<float>();
  const int32_t* pos = positions.data<int32_t>();
  const float* f = inv_freq.data<float>();
  cpu_threads().parallel_for(n_tok, row_grain(4 * n_head * d), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const float p = float(pos[t]);
      for (int64_t i = 0; i < half; ++i) {
        const float a = p * f[i];
        const float c = std::cos(a), s = std::sin(a);
        for (int64_t h = 0; h < n_head; ++h) {
          float* row = px + (t * n_head + h) * d;
          const float x0 = row[i], x1 = row[i + half];
          row[i] = x0 * c - x1 * s;
          row[i + half] = x1 * c + x0 * s;
        }
      }
    }
  });
}

}  // namespace parley::cpu
