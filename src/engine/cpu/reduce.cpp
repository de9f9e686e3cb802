// CPU argmax and topk over the last dimension of x [N, V], one row per task. Order: NaN
// above every number, then larger values, then (on ties) the lower index.
#include "engine/ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>
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

namespace {

// log(sum(exp(row))) in f64 around the f32 maximum (-inf for an empty or all -inf row), as
// Whisper's host filters compute it (whisper/sampling.h).
double logsumexp(const float* row, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, row[i]);
  if (std::isinf(m)) return double(m);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(row[i]) - double(m));
  return double(m) + std::log(sum);
}

}  // namespace

void masked_topk(const Tensor& x, const Tensor* mask, const Tensor& rules, int k, Tensor& logprobs,
                 Tensor& indices) {
  const int64_t rows = x.dim(0), v = x.dim(1), width = rules.dim(1);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const float* px = x.data<float>();
  const int8_t* pm = mask ? mask->data<int8_t>() : nullptr;
  const int32_t* pr = rules.data<int32_t>();
  float* plp = logprobs.data<float>();
  int32_t* pi = indices.data<int32_t>();
  cpu_threads().parallel_for(rows, row_grain(4 * v), [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(v));
    std::vector<int32_t> order(static_cast<size_t>(v));
    for (int64_t r = begin; r < end; ++r) {
      std::copy(px + r * v, px + (r + 1) * v, row.begin());
      if (pm)
        for (int64_t i = 0; i < v; ++i)
          if (pm[i]) row[size_t(i)] = kNegInf;
      const int32_t* rule = pr + r * width;
      for (int64_t j = 1; j + 1 < width; j += 2) {
        const int64_t b = std::clamp<int64_t>(rule[j], 0, v);
        const int64_t e = std::clamp<int64_t>(rule[j + 1], b, v);
        std::fill(row.begin() + b, row.begin() + e, kNegInf);
      }
      const int64_t split = std::clamp<int64_t>(rule[0], 0, v);
      if (split > 0) {
        const double tail = logsumexp(row.data() + split, v - split);
        const float head = *std::max_element(row.begin(), row.begin() + split);
        if (tail > double(head)) std::fill(row.begin(), row.begin() + split, kNegInf);
      }
      const double lse = logsumexp(row.data(), v);
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
        return ranks_before(row[size_t(a)], a, row[size_t(b)], b);
      });
      for (int j = 0; j < k; ++j) {
        const int32_t i = order[size_t(j)];
        pi[r * k + j] = i;
        plp[r * k + j] = float(double(row[size_t(i)]) - lse);
      }
    }
  });
}

}  // namespace parley::cpu
