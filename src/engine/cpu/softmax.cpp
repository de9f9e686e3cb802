// CPU softmax / log_softmax over the last dimension, one row per task, f32 math with the
// row max subtracted (vec_math.h's rows). A row of all -inf gives the NaN row PyTorch
// returns.
#include "engine/ops/softmax.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "engine/cpu/cpu_common.h"
#include "engine/cpu/vec_math.h"

namespace parley::cpu {

void softmax(const Tensor& x, Tensor& out, bool log) {
  const int64_t n = x.dim(-1);
  const int64_t rows = n ? x.numel() / n : 0;
  dispatch_float(x.dtype(), log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    // A row's softmax, computed in f32 at `row` (the output row itself for f32).
    const auto one = [&](const float* src, float* row) {
      if (log) {
        log_softmax_row(src, row, n);
      } else {
        if (row != src) std::copy_n(src, n, row);
        softmax_row(row, n);
      }
    };
    cpu_threads().parallel_for(rows, row_grain(8 * n), [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>) {
        for (int64_t r = begin; r < end; ++r) one(px + r * n, po + r * n);
      } else {  // 16-bit storage: through one f32 row
        std::vector<float> buf(static_cast<size_t>(n));
        for (int64_t r = begin; r < end; ++r) {
          load_f32(px + r * n, buf.data(), n);
          one(buf.data(), buf.data());
          T* dst = po + r * n;
          for (int64_t i = 0; i < n; ++i) dst[i] = from_f32<T>(buf[size_t(i)]);
        }
      }
    });
  });
}

}  // namespace parley::cpu
