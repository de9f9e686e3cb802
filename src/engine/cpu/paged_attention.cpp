// CPU paged attention: one (token, head) pair per task, an online softmax over the row's
// visible keys in position order (running max, rescaled f32 accumulator), reading each key
// and value straight from its block. No scratch: the accumulator lives on the stack. Each
// score is an 8-lane dot product (dot() below), so the compiler keeps it in AVX2 registers.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/cpu/cpu_common.h"
#include "engine/error.h"
#include "engine/ops/paged_attention.h"

namespace parley::cpu {

namespace {
constexpr int64_t kMaxHeadDim = 512;

// q . k over d values in 8 interleaved partial sums (vectorizable: one AVX2 register) added
// pairwise at the end; the order depends only on d, never on the batch.
float dot(const float* q, const float* k, int64_t d) {
  float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= d; i += 8)
    for (int j = 0; j < 8; ++j) part[j] += q[i + j] * k[i + j];
  for (int j = 0; i < d; ++i, ++j) part[j] += q[i] * k[i];
  return ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
}
}  // namespace

void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     std::span<const PagedRow> rows, Tensor& out,
                     const PagedAttentionOptions& opt) {
  const int64_t n_tok = q.dim(0), hq = q.dim(1), d = q.dim(2);
  const int64_t bs = k_cache.dim(1), hkv = k_cache.dim(2), group = hq / hkv;
  check(
      d <= kMaxHeadDim, ErrorKind::unsupported,
      "[paged_attention] head_dim " + std::to_string(d) + " above " + std::to_string(kMaxHeadDim));
  const float scale = opt.scale > 0 ? opt.scale : 1.0f / std::sqrt(float(d));
  const float* pq = q.data<float>();
  const float* pk = k_cache.data<float>();
  const float* pv = v_cache.data<float>();
  float* po = out.data<float>();
  const int64_t block_stride = bs * hkv * d, slot_stride = hkv * d;
  // The row of token t: rows are in q order, so a binary search over their first tokens.
  auto row_of = [&](int64_t t) {
    const auto it = std::upper_bound(rows.begin(), rows.end(), t,
                                     [](int64_t v, const PagedRow& r) { return v < r.q_begin; });
    return size_t(it - rows.begin()) - 1;
  };
  cpu_threads().parallel_for(n_tok * hq, 1, [&](int64_t begin, int64_t end) {
    float acc[kMaxHeadDim];
    for (int64_t task = begin; task < end; ++task) {
      const int64_t t = task / hq, h = task % hq, kvh = h / group;
      const PagedRow& row = rows[row_of(t)];
      const int64_t pos = row.start_pos + (t - row.q_begin);
      const int64_t first =
          opt.sliding_window > 0 ? std::max<int64_t>(0, pos - opt.sliding_window + 1) : 0;
      const float* qv = pq + (t * hq + h) * d;
      std::fill(acc, acc + d, 0.0f);
      float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
      for (int64_t p = first; p <= pos; ++p) {
        const int64_t base = int64_t(row.block_table[size_t(p / bs)]) * block_stride +
                             (p % bs) * slot_stride + kvh * d;
        float s = dot(qv, pk + base, d) * scale;
        if (opt.softcap > 0) s = opt.softcap * std::tanh(s / opt.softcap);
        const float* vv = pv + base;
        if (s > m) {
          const float c = std::exp(m - s);  // 0 on the first key (m = -inf)
          l = l * c + 1.0f;
          for (int64_t i = 0; i < d; ++i) acc[i] = acc[i] * c + vv[i];
          m = s;
        } else {
          const float w = std::exp(s - m);
          l += w;
          for (int64_t i = 0; i < d; ++i) acc[i] += w * vv[i];
        }
      }
      float* o = po + (t * hq + h) * d;
      const float inv = l > 0 ? 1.0f / l : 0.0f;
      for (int64_t i = 0; i < d; ++i) o[i] = acc[i] * inv;
    }
  });
}

void paged_kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_cache,
                    Tensor& v_cache) {
  const int64_t n_tok = k.dim(0), row = k.dim(1) * k.dim(2);
  const int32_t* s = slots.data<int32_t>();
  for (int64_t t = 0; t < n_tok; ++t) {
    std::memcpy(k_cache.data<float>() + int64_t(s[t]) * row, k.data<float>() + t * row,
                size_t(row) * sizeof(float));
    std::memcpy(v_cache.data<float>() + int64_t(s[t]) * row, v.data<float>() + t * row,
                size_t(row) * sizeof(float));
  }
}

}  // namespace parley::cpu
