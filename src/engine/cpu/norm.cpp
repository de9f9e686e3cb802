// CPU layer_norm and rms_norm: one row of D per task, statistics in f32 (two passes for
// the variance, as the mean is subtracted before squaring).
#include "engine/ops/norm.h"

#include <cmath>
#include <type_traits>
#include <vector>

#include "engine/cpu/cpu_common.h"

namespace parley::cpu {

namespace {

// Calls fn with the storage type of a parameter tensor that is f32 or x's type T.
template <typename T, typename Fn>
void with_param_type(DType dtype, Fn&& fn) {
  if (dtype == DType::f32)
    fn(float{});
  else
    fn(T{});
}

// Runs row_fn(row (f32, D values), out_row) for each row of x [rows, D]; 16-bit rows are
// widened into a per-chunk buffer first.
template <typename T, typename RowFn>
void for_each_row(const Tensor& x, Tensor& out, RowFn row_fn) {
  const int64_t d = x.dim(-1);
  const int64_t rows = d ? x.numel() / d : 0;
  const T* px = x.data<T>();
  T* po = out.data<T>();
  cpu_threads().parallel_for(rows, row_grain(4 * d), [&](int64_t begin, int64_t end) {
    std::vector<float> buf(std::is_same_v<T, float> ? 0 : size_t(d));
    for (int64_t r = begin; r < end; ++r) {
      const float* row;
      if constexpr (std::is_same_v<T, float>) {
        row = px + r * d;
      } else {
        load_f32(px + r * d, buf.data(), d);
        row = buf.data();
      }
      row_fn(row, po + r * d);
    }
  });
}

}  // namespace

void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& out) {
  const int64_t d = x.dim(-1);
  dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    with_param_type<T>(gamma.dtype(), [&](auto gtag) {
      with_param_type<T>(beta.dtype(), [&](auto btag) {
        const auto* g = gamma.data<decltype(gtag)>();
        const auto* b = beta.data<decltype(btag)>();
        for_each_row<T>(x, out, [&](const float* row, T* dst) {
          float sum = 0.0f;
          for (int64_t i = 0; i < d; ++i) sum += row[i];
          const float mean = sum / float(d);
          float sq = 0.0f;
          for (int64_t i = 0; i < d; ++i) sq += (row[i] - mean) * (row[i] - mean);
          const float rstd = 1.0f / std::sqrt(sq / float(d) + eps);
          for (int64_t i = 0; i < d; ++i)
            dst[i] = from_f32<T>((row[i] - mean) * rstd * to_f32(g[i]) + to_f32(b[i]));
        });
      });
    });
  });
}

void rms_norm(const Tensor& x, const Tensor& gamma, float eps, Tensor& out) {
  const int64_t d = x.dim(-1);
  dispatch_float(x.dtype(), "rms_norm", [&](auto tag) {
    using T = decltype(tag);
    with_param_type<T>(gamma.dtype(), [&](auto gtag) {
      const auto* g = gamma.data<decltype(gtag)>();
      for_each_row<T>(x, out, [&](const float* row, T* dst) {
        float sq = 0.0f;
        for (int64_t i = 0; i < d; ++i) sq += row[i] * row[i];
        const float rms_inv = 1.0f / std::sqrt(sq / float(d) + eps);
        for (int64_t i = 0; i < d; ++i) dst[i] = from_f32<T>(row[i] * rms_inv * to_f32(g[i]));
      });
    });
  });
}

}  // namespace parley::cpu
