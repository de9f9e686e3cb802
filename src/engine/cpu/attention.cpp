// CPU scaled dot-product attention with f32 scores and softmax. Two paths, same numerics
// (f32 scores, max subtracted, f32 weighted sum of v):
//   rows: one (batch, head, query row) per task, dot products in plain loops; decode steps
//         and short queries.
//   gemm: per (batch, head) and block of query rows, S = scale * q k^T and O = P v as GEMMs
//         with the softmax between them; encoder self-attention and prefill, where the
//         plain loops are ~20x slower than the GEMM library.
#include "engine/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "engine/cpu/cpu_common.h"
#include "engine/cpu/vec_math.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/matmul.h"

namespace parley::cpu {

namespace {

// From this many query rows on, the GEMM path pays for its calls and scratch.
constexpr int64_t kGemmMinQueries = 32;
// f32 score elements per GEMM block: keeps S [block, Lk] within 4 MiB.
constexpr int64_t kScoreBudget = int64_t(1) << 20;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Where row `row` of head h in batch b starts: base + b * batch + h * head + row * row
// (elements). [B, H, L, D] has {H * L * D, L * D, D}; token-major [B, L, W] heads at a
// column have {L * W, D, W}.
struct Strides {
  int64_t batch, head, row;
  int64_t at(int64_t b, int64_t h, int64_t i) const { return b * batch + h * head + i * row; }
};

struct Geometry {
  int64_t batch, heads, lq, lk, d, dv;
  float scale;
  const int8_t* mask;      // [B, Lk] or null
  const int32_t* key_len;  // [B] or null: batch b's keys [0, key_len[b])
  bool causal;
  Strides sq, sk, sv, so;
  const int32_t* k_index;  // batch b reads k's batch k_index[b] (or b when null)
  const int32_t* v_index;

  Geometry(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opt)
      : batch(q.dim(0)),
        heads(q.dim(1)),
        lq(q.dim(2)),
        lk(k.dim(2)),
        d(q.dim(3)),
        dv(v.dim(3)),
        scale(opt.scale != 0.0f ? opt.scale : 1.0f / std::sqrt(float(q.dim(3)))),
        mask(opt.key_mask ? opt.key_mask->data<int8_t>() : nullptr),
        key_len(opt.key_len ? opt.key_len->data<int32_t>() : nullptr),
        causal(opt.causal),
        sq{heads * lq * d, lq * d, d},
        sk{heads * lk * d, lk * d, d},
        sv{heads * lk * dv, lk * dv, dv},
        so{heads * lq * dv, lq * dv, dv},
        k_index(opt.batch_index ? opt.batch_index->data<int32_t>() : nullptr),
        v_index(k_index) {}

  // attention_tokens: [B, L, W] operands, heads side by side.
  Geometry(const Tensor& q, const Tensor& k, const Tensor& v, int64_t n_keys, int64_t n_head,
           const Tensor& out, const AttentionOptions& opt)
      : batch(out.dim(0)),
        heads(n_head),
        lq(out.dim(1)),
        lk(n_keys),
        d(out.dim(2) / n_head),
        dv(d),
        scale(opt.scale != 0.0f ? opt.scale : 1.0f / std::sqrt(float(d))),
        mask(nullptr),
        key_len(nullptr),
        causal(opt.causal),
        sq{q.dim(1) * q.dim(2), d, q.dim(2)},
        sk{k.dim(1) * k.dim(2), d, k.dim(2)},
        sv{v.dim(1) * v.dim(2), d, v.dim(2)},
        so{out.dim(1) * out.dim(2), d, out.dim(2)},
        k_index(nullptr),
        v_index(nullptr) {}

  // Keys [0, visible) are in range for query row i of batch b; causal aligns the last query
  // with the last key (a decode step over a cache of lk keys); key_len cuts b's keys short.
  int64_t visible(int64_t b, int64_t i) const {
    const int64_t end = causal ? std::clamp<int64_t>(i + (lk - lq) + 1, 0, lk) : lk;
    return key_len ? std::clamp<int64_t>(key_len[b], 0, end) : end;
  }
  const int8_t* mask_row(int64_t bh) const { return mask ? mask + (bh / heads) * lk : nullptr; }
};

// Scores s[0, visible) (scaled; -inf where masked) become probabilities; returns false,
// leaving s undefined, when no key is visible.
bool softmax_visible(float* s, int64_t visible, const int8_t* mrow) {
  if (mrow) {
    for (int64_t j = 0; j < visible; ++j)
      if (!mrow[j]) s[j] = kNegInf;
  }
  return visible > 0 && softmax_row(s, visible);
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

// Element pointers of q, k, v, out (at their first head's column), laid out as g says.
template <typename T>
void attention_rows(const T* pq, const T* pk, const T* pv, T* po, const Geometry& g) {
  const int64_t rows = g.batch * g.heads * g.lq;
  cpu_threads().parallel_for(rows, row_grain(g.lk * (g.d + g.dv)), [&](int64_t begin, int64_t end) {
    std::vector<float> s(static_cast<size_t>(g.lk)), qrow(static_cast<size_t>(g.d)),
        acc(static_cast<size_t>(g.dv));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t bh = r / g.lq, i = r % g.lq, b = bh / g.heads, h = bh % g.heads;
      const int64_t visible = g.visible(b, i);
      const T* kb = pk + g.sk.at(g.k_index ? g.k_index[b] : b, h, 0);
      const T* vb = pv + g.sv.at(g.v_index ? g.v_index[b] : b, h, 0);
      load_f32(pq + g.sq.at(b, h, i), qrow.data(), g.d);
      if constexpr (std::is_same_v<T, float>) {
        dot_rows_f32(qrow.data(), kb, g.sk.row, visible, g.d, g.scale, s.data());
      } else {
        for (int64_t j = 0; j < visible; ++j)
          s[size_t(j)] = dot(qrow.data(), kb + j * g.sk.row, g.d) * g.scale;
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      if (softmax_visible(s.data(), visible, g.mask_row(bh))) {
        if constexpr (std::is_same_v<T, float>) {
          weighted_rows_f32(s.data(), vb, g.sv.row, visible, g.dv, acc.data());
        } else {
          for (int64_t j = 0; j < visible; ++j) {
            const float p = s[size_t(j)];
            if (p == 0.0f) continue;
            const T* vrow = vb + j * g.sv.row;
            for (int64_t c = 0; c < g.dv; ++c) acc[size_t(c)] += p * to_f32(vrow[c]);
          }
        }
      }
      T* orow = po + g.so.at(b, h, i);  // zeros when no key is visible
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
  const Tensor k3 = k.reshape({k.dim(0) * g.heads, g.lk, g.d});
  const Tensor v3 = v.reshape({v.dim(0) * g.heads, g.lk, g.dv});
  Tensor o2 = out.reshape({bhs * g.lq, g.dv});
  Tensor scores = Tensor::empty({block, g.lk}, DType::f32);
  Tensor v32 = wide ? Tensor() : Tensor::empty({g.lk, g.dv}, DType::f32);
  Tensor o32 = wide ? Tensor() : Tensor::empty({block, g.dv}, DType::f32);
  MatmulOptions qk;
  qk.trans_b = true;
  qk.alpha = g.scale;
  for (int64_t bh = 0; bh < bhs; ++bh) {
    const int64_t b = bh / g.heads, h = bh % g.heads;
    const int64_t kbh = (g.k_index ? g.k_index[b] : b) * g.heads + h;
    const int64_t vbh = (g.v_index ? g.v_index[b] : b) * g.heads + h;
    const Tensor kb = k3.slice0(kbh, kbh + 1).reshape({g.lk, g.d});
    Tensor vb = v3.slice0(vbh, vbh + 1).reshape({g.lk, g.dv});
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
          const int64_t visible = g.visible(bh / g.heads, i0 + r);
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
  dispatch_float(q.dtype(), "attention", [&](auto tag) {
    using T = decltype(tag);
    attention_rows<T>(q.data<T>(), k.data<T>(), v.data<T>(), out.data<T>(), g);
  });
}

void attention_tokens(const TokenHeads& q, const TokenHeads& k, const TokenHeads& v, int64_t n_keys,
                      int n_head, Tensor& out, const AttentionOptions& opt) {
  Geometry g(q.t, k.t, v.t, n_keys, n_head, out, opt);
  g.k_index = k.batch_index ? k.batch_index->data<int32_t>() : nullptr;
  g.v_index = v.batch_index ? v.batch_index->data<int32_t>() : nullptr;
  dispatch_float(out.dtype(), "attention_tokens", [&](auto tag) {
    using T = decltype(tag);
    const T* pq = q.t.data<T>() + q.col;
    const T* pk = k.t.data<T>() + k.col;
    const T* pv = v.t.data<T>() + v.col;
    if (g.lq < kGemmMinQueries || g.lk == 0) {
      attention_rows<T>(pq, pk, pv, out.data<T>(), g);
      return;
    }
    // Prefill: the GEMM path on [B, H, L, D] copies (a decoder prompt of a few hundred
    // tokens runs ~20x slower in the plain loops).
    const auto heads = [&](const T* src, const Strides& st, int64_t len, const int32_t* index) {
      Tensor t = Tensor::empty({g.batch, g.heads, len, g.d}, out.dtype());
      T* dst = t.data<T>();
      for (int64_t b = 0; b < g.batch; ++b)
        for (int64_t h = 0; h < g.heads; ++h)
          for (int64_t i = 0; i < len; ++i, dst += g.d)
            std::copy_n(src + st.at(index ? index[b] : b, h, i), g.d, dst);
      return t;
    };
    const Tensor q4 = heads(pq, g.sq, g.lq, nullptr), k4 = heads(pk, g.sk, g.lk, g.k_index),
                 v4 = heads(pv, g.sv, g.lk, g.v_index);
    Tensor o4 = Tensor::empty(q4.shape(), out.dtype());
    attention_gemm(q4, k4, v4, o4, Geometry(q4, k4, v4, opt));
    const T* src = o4.data<T>();
    T* po = out.data<T>();
    for (int64_t b = 0; b < g.batch; ++b)
      for (int64_t h = 0; h < g.heads; ++h)
        for (int64_t i = 0; i < g.lq; ++i, src += g.d) std::copy_n(src, g.d, po + g.so.at(b, h, i));
  });
}

}  // namespace parley::cpu
