// CPU argmax and topk over the last dimension of x [N, V], one row per task. Order: NaN
// above every number, then larger values, then (on ties) the lower index.
#include "engine/ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/cpu/cpu_common.h"

namespace parley::cpu {

namespace {

// True when (a, ia) ranks before (b, ib).
inline bool ranks_before(float a, int32_t ia, float b, int32_t ib) {
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na || nb) return na && (!nb || ia < ib);
  if (a != b) return a > b;
  return ia < ib;
}

}  // namespace

void argmax(const Tensor& x, Tensor& out) {
  const int64_t rows = x.dim(0), v = x.dim(1);
  int32_t* po = out.data<int32_t>();
  dispatch_float(x.dtype(), "argmax", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    cpu_threads().parallel_for(rows, row_grain(v), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* row = px + r * v;
        int32_t best = 0;
        float best_v = to_f32(row[0]);
        for (int64_t i = 1; i < v && !std::isnan(best_v); ++i) {
          const float c = to_f32(row[i]);
          if (c > best_v || std::isnan(c)) {
            best_v = c;
            best = int32_t(i);
          }
        }
        po[r] = best;
      }
    });
  });
}

void topk(const Tensor& x, int k, Tensor& values, Tensor& indices) {
  const int64_t rows = x.dim(0), v = x.dim(1);
  int32_t* pi = indices.data<int32_t>();
  dispatch_float(x.dtype(), "topk", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* pv = values.data<T>();
    cpu_threads().parallel_for(rows, row_grain(4 * v), [&](int64_t begin, int64_t end) {
      std::vector<float> row(static_cast<size_t>(v));
      std::vector<int32_t> order(static_cast<size_t>(v));
      for (int64_t r = begin; r < end; ++r) {
        load_f32(px + r * v, row.data(), v);
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
          return ranks_before(row[size_t(a)], a, row[size_t(b)], b);
        });
        for (int j = 0; j < k; ++j) {
          pi[r * k + j] = order[size_t(j)];
          pv[r * k + j] = px[r * v + order[size_t(j)]];
        }
      }
    });
  });
}

}  // namespace parley::cpu
