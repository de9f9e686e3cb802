// CPU scaled dot-product attention with f32 scores and softmax. Two paths, same numerics
// (f32 scores, max subtracted, f32 weighted sum of v):
//   rows: one (batch, head, query row) per task, dot products in plain loops; decode steps
//         and short queries.
//   gemm: per (batch, head) and block of query rows, S = scale * q k^T and O = P v as GEMMs
//         with the softmax between them; encoder self-attention and prefill, where the
//         plain loops are ~20x slower than the GEMM library.
#include "engine/ops/attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "engine/cpu/cpu_common.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/matmul.h"

namespace parley::cpu {

namespace {

// From this many query rows on, the GEMM path pays for its calls and scratch.
constexpr int64_t kGemmMinQueries = 32;
// f32 score elements per GEMM block: keeps S [block, Lk] within 4 MiB.
constexpr int64_t kScoreBudget = int64_t(1) << 20;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Geometry {
  int64_t batch, heads, lq, lk, d, dv;
  float scale;
  const int8_t* mask;  // [B, Lk] or null
  bool causal;

  Geometry(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opt)
      : batch(q.dim(0)),
        heads(q.dim(1)),
        lq(q.dim(2)),
        lk(k.dim(2)),
        d(q.dim(3)),
        dv(v.dim(3)),
        scale(opt.scale != 0.0f ? opt.scale : 1.0f / std::sqrt(float(q.dim(3)))),
        mask(opt.key_mask ? opt.key_mask->data<int8_t>() : nullptr),
        causal(opt.causal) {}

  // Keys [0, visible) are in range for query row i; causal aligns the last query with the
  // last key (a decode step over a cache of lk keys).
  int64_t visible(int64_t i) const {
    return causal ? std::clamp<int64_t>(i + (lk - lq) + 1, 0, lk) : lk;
  }
  const int8_t* mask_row(int64_t bh) const { return mask ? mask + (bh / heads) * lk : nullptr; }
};

// Scores s[0, visible) (scaled; -inf where masked) become probabilities; returns false,
// leaving s undefined, when no key is visible.
bool softmax_visible(float* s, int64_t visible, const int8_t* mrow) {
  float mx = kNegInf;
  for (int64_t j = 0; j < visible; ++j) {
    if (mrow && !mrow[j]) s[j] = kNegInf;
    mx = std::max(mx, s[j]);
  }
  if (mx == kNegInf) return false;
  float sum = 0.0f;
  for (int64_t j = 0; j < visible; ++j) {
    s[j] = std::exp(s[j] - mx);  // exp(-inf) = 0 for masked keys
    sum += s[j];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < visible; ++j) s[j] *= inv;
  return true;
}

// Eight partial sums so the compiler can keep them in vector lanes.
template <typename T>
float dot(const float* a, const T* b, int64_t n) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * to_f32(b[i + l]);
  float s = 0.0f;
  for (; i < n; ++i) s += a[i] * to_f32(b[i]);
  for (float x : acc) s += x;
  return s;
}

template <typename T>
void attention_rows(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                    const Geometry& g) {
  const T* pq = q.data<T>();
  const T* pk = k.data<T>();
  const T* pv = v.data<T>();
  T* po = out.data<T>();
  const int64_t rows = g.batch * g.heads * g.lq;
  cpu_threads().parallel_for(rows, row_grain(g.lk * (g.d + g.dv)), [&](int64_t begin, int64_t end) {
    std::vector<float> s(static_cast<size_t>(g.lk)), qrow(static_cast<size_t>(g.d)),
        acc(static_cast<size_t>(g.dv));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t bh = r / g.lq, visible = g.visible(r % g.lq);
      const T* kb = pk + bh * g.lk * g.d;
      const T* vb = pv + bh * g.lk * g.dv;
      load_f32(pq + r * g.d, qrow.data(), g.d);
      for (int64_t j = 0; j < visible; ++j)
        s[size_t(j)] = dot(qrow.data(), kb + j * g.d, g.d) * g.scale;
      std::fill(acc.begin(), acc.end(), 0.0f);
      if (softmax_visible(s.data(), visible, g.mask_row(bh))) {
        for (int64_t j = 0; j < visible; ++j) {
          const float p = s[size_t(j)];
          if (p == 0.0f) continue;
          const T* vrow = vb + j * g.dv;
          for (int64_t c = 0; c < g.dv; ++c) acc[size_t(c)] += p * to_f32(vrow[c]);
        }
      }
      T* orow = po + r * g.dv;  // zeros when no key is visible
      for (int64_t c = 0; c < g.dv; ++c) orow[c] = from_f32<T>(acc[size_t(c)]);
    }
  });
}

// Per (batch, head) and block of query rows:
//   S [rows, Lk] (f32) = scale * q_blk [rows, D] @ k_bh [Lk, D]^T
//   P = softmax over each row's visible keys (invisible keys get 0)
//   O [rows, Dv] = P @ v_bh [Lk, Dv]   (v widened to f32 first for 16-bit dtypes)
void attention_gemm(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                    const Geometry& g) {
  const DType dt = q.dtype();
  const bool wide = dt == DType::f32;
  const int64_t bhs = g.batch * g.heads;
  const int64_t block = std::clamp<int64_t>(kScoreBudget / std::max<int64_t>(g.lk, 1), 1, g.lq);
  const Tensor q2 = q.reshape({bhs * g.lq, g.d});
  const Tensor k3 = k.reshape({bhs, g.lk, g.d});
  const Tensor v3 = v.reshape({bhs, g.lk, g.dv});
  Tensor o2 = out.reshape({bhs * g.lq, g.dv});
  Tensor scores = Tensor::empty({block, g.lk}, DType::f32);
  Tensor v32 = wide ? Tensor() : Tensor::empty({g.lk, g.dv}, DType::f32);
  Tensor o32 = wide ? Tensor() : Tensor::empty({block, g.dv}, DType::f32);
  MatmulOptions qk;
  qk.trans_b = true;
  qk.alpha = g.scale;
  for (int64_t bh = 0; bh < bhs; ++bh) {
    const Tensor kb = k3.slice0(bh, bh + 1).reshape({g.lk, g.d});
    Tensor vb = v3.slice0(bh, bh + 1).reshape({g.lk, g.dv});
    if (!wide) cpu::convert(vb, v32);
    const int8_t* mrow = g.mask_row(bh);
    for (int64_t i0 = 0; i0 < g.lq; i0 += block) {
      const int64_t rows = std::min(block, g.lq - i0);
      Tensor s = scores.slice0(0, rows);
      cpu::matmul(q2.slice0(bh * g.lq + i0, bh * g.lq + i0 + rows), kb, s, qk);
      float* ps = s.data<float>();
      cpu_threads().parallel_for(rows, row_grain(4 * g.lk), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          float* row = ps + r * g.lk;
          const int64_t visible = g.visible(i0 + r);
          if (!softmax_visible(row, visible, mrow)) std::fill_n(row, g.lk, 0.0f);
          std::fill(row + visible, row + g.lk, 0.0f);
        }
      });
      Tensor ob = o2.slice0(bh * g.lq + i0, bh * g.lq + i0 + rows);
      if (wide) {
        cpu::matmul(s, vb, ob, {});
      } else {
        Tensor ow = o32.slice0(0, rows);
        cpu::matmul(s, v32, ow, {});
        cpu::convert(ow, ob);
      }
    }
  }
}

}  // namespace

void attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
               const AttentionOptions& opt) {
  const Geometry g(q, k, v, opt);
  if (g.lq >= kGemmMinQueries && g.lk > 0 && g.d > 0) {
    attention_gemm(q, k, v, out, g);
    return;
  }
  dispatch_float(q.dtype(), "attention",
                 [&](auto tag) { attention_rows<decltype(tag)>(q, k, v, out, g); });
}

}  // namespace parley::cpu
