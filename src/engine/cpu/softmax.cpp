// CPU softmax / log_softmax over the last dimension, one row per task, f32 math with the
// row max subtracted. A row of all -inf has max -inf, and -inf - -inf = NaN gives the
// NaN row PyTorch returns.
#include "engine/ops/softmax.h"

#include <cmath>
#include <limits>
#include <vector>

#include "engine/cpu/cpu_common.h"

namespace parley::cpu {

void softmax(const Tensor& x, Tensor& out, bool log) {
  const int64_t n = x.dim(-1);
  const int64_t rows = n ? x.numel() / n : 0;
  dispatch_float(x.dtype(), log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    cpu_threads().parallel_for(rows, row_grain(8 * n), [&](int64_t begin, int64_t end) {
      std::vector<float> buf(static_cast<size_t>(n));  // the row in f32 (softmax: its exponentials)
      for (int64_t r = begin; r < end; ++r) {
        const T* src = px + r * n;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < n; ++i) {
          const float v = to_f32(src[i]);
          buf[size_t(i)] = v;
          if (v > mx || std::isnan(v)) mx = std::isnan(mx) ? mx : v;  // a NaN max propagates
        }
        T* dst = po + r * n;
        float sum = 0.0f;
        if (log) {
          for (int64_t i = 0; i < n; ++i) sum += std::exp(buf[size_t(i)] - mx);
          const float shift = mx + std::log(sum);
          for (int64_t i = 0; i < n; ++i) dst[i] = from_f32<T>(buf[size_t(i)] - shift);
        } else {
          for (int64_t i = 0; i < n; ++i) {
            buf[size_t(i)] = std::exp(buf[size_t(i)] - mx);
            sum += buf[size_t(i)];
          }
          const float inv = 1.0f / sum;
          for (int64_t i = 0; i < n; ++i) dst[i] = from_f32<T>(buf[size_t(i)] * inv);
        }
      }
    });
  });
}

}  // namespace parley::cpu
