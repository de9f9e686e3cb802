// The chat-model engine ops against plain references: paged attention (blocks in shuffled
// order, GQA, sliding window, ragged rows) and RoPE (llama3 / linear frequency scaling
// against the published formula, the rotation against a direct computation).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <random>
#include <vector>

#include "engine/error.h"
#include "engine/ops/glu.h"
#include "engine/ops/paged_attention.h"
#include "engine/ops/rope.h"

namespace parley {
namespace {

Tensor random_tensor(const Shape& s, std::mt19937& rng) {
  Tensor t = Tensor::empty(s, DType::f32);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(rng);
  return t;
}

// Plain attention of one query over contiguous keys [first, last] (double accumulation).
void reference_attention(const float* q, const std::vector<const float*>& keys,
                         const std::vector<const float*>& values, int64_t d, float scale,
                         float* out) {
  std::vector<double> s(keys.size());
  double m = -1e300;
  for (size_t j = 0; j < keys.size(); ++j) {
    double dot = 0;
    for (int64_t i = 0; i < d; ++i) dot += double(q[i]) * keys[j][i];
    s[j] = dot * scale;
    m = std::max(m, s[j]);
  }
  double l = 0;
  for (double& x : s) l += (x = std::exp(x - m));
  for (int64_t i = 0; i < d; ++i) {
    double acc = 0;
    for (size_t j = 0; j < keys.size(); ++j) acc += s[j] * values[j][i];
    out[i] = float(acc / l);
  }
}

class PagedAttentionTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(PagedAttentionTest, MatchesPlainAttentionWithShuffledBlocks) {
  const int64_t window = GetParam();
  std::mt19937 rng(7);
  constexpr int64_t bs = 16, hq = 4, hkv = 2, d = 32, n_blocks = 24;
  // Three rows: a prefill from 0, a chunk from 37, a decode step at 50.
  const std::vector<int64_t> start = {0, 37, 50}, count = {29, 20, 1};
  std::vector<int32_t> ids(n_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<std::vector<int32_t>> tables;
  size_t next = 0;
  for (size_t r = 0; r < start.size(); ++r) {
    const int64_t need = (start[r] + count[r] + bs - 1) / bs;
    tables.emplace_back(ids.begin() + long(next), ids.begin() + long(next + size_t(need)));
    next += size_t(need);
  }
  Tensor kc = random_tensor({n_blocks, bs, hkv, d}, rng);
  Tensor vc = random_tensor({n_blocks, bs, hkv, d}, rng);
  const int64_t n_tok = std::accumulate(count.begin(), count.end(), int64_t(0));
  Tensor q = random_tensor({n_tok, hq, d}, rng);
  Tensor out = Tensor::empty({n_tok, hq, d}, DType::f32);
  std::vector<PagedRow> rows;
  int64_t t0 = 0;
  for (size_t r = 0; r < start.size(); ++r) {
    rows.push_back({t0, count[r], start[r], tables[r]});
    t0 += count[r];
  }
  PagedAttentionOptions opt;
  opt.scale = 0.3f;
  opt.sliding_window = window;
  paged_attention(q, kc, vc, rows, out, opt);
  double worst = 0;
  std::vector<float> ref(d);
  for (const PagedRow& r : rows) {
    for (int64_t j = 0; j < r.n_tokens; ++j) {
      const int64_t t = r.q_begin + j, pos = r.start_pos + j;
      const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
      for (int64_t h = 0; h < hq; ++h) {
        std::vector<const float*> ks, vs;
        for (int64_t p = first; p <= pos; ++p) {
          const int64_t off =
              ((int64_t(r.block_table[size_t(p / bs)]) * bs + p % bs) * hkv + h / (hq / hkv)) * d;
          ks.push_back(kc.data<float>() + off);
          vs.push_back(vc.data<float>() + off);
        }
        reference_attention(q.data<float>() + (t * hq + h) * d, ks, vs, d, opt.scale, ref.data());
        for (int64_t i = 0; i < d; ++i)
          worst =
              std::max(worst, double(std::abs(out.data<float>()[(t * hq + h) * d + i] - ref[i])));
      }
    }
  }
  EXPECT_LT(worst, 2e-6);
}

INSTANTIATE_TEST_SUITE_P(Windows, PagedAttentionTest, ::testing::Values(0, 8, 17));

TEST(PagedAttention, RejectsShortBlockTable) {
  Tensor kc = Tensor::zeros({4, 16, 1, 8}, DType::f32), vc = kc.to(Device::cpu);
  Tensor q = Tensor::zeros({20, 1, 8}, DType::f32), out = q.to(Device::cpu);
  const std::vector<int32_t> table = {0};  // 20 positions need 2 blocks
  const std::vector<PagedRow> rows = {{0, 20, 0, table}};
  EXPECT_THROW(paged_attention(q, kc, vc, rows, out), Error);
  const std::vector<int32_t> bad = {0, 9};
  const std::vector<PagedRow> rows2 = {{0, 20, 0, bad}};
  EXPECT_THROW(paged_attention(q, kc, vc, rows2, out), Error);
}

TEST(PagedKvWrite, WritesSlots) {
  Tensor kc = Tensor::zeros({3, 16, 2, 4}, DType::f32),
         vc = Tensor::zeros({3, 16, 2, 4}, DType::f32);
  std::mt19937 rng(1);
  Tensor k = random_tensor({2, 2, 4}, rng), v = random_tensor({2, 2, 4}, rng);
  Tensor slots = Tensor::empty({2}, DType::i32);
  slots.data<int32_t>()[0] = 35;
  slots.data<int32_t>()[1] = 2;
  paged_kv_write(k, v, slots, kc, vc);
  EXPECT_EQ(kc.data<float>()[35 * 8 + 5], k.data<float>()[5]);
  EXPECT_EQ(vc.data<float>()[2 * 8 + 7], v.data<float>()[8 + 7]);
  slots.data<int32_t>()[1] = 48;
  EXPECT_THROW(paged_kv_write(k, v, slots, kc, vc), Error);
}

TEST(Rope, Llama3FrequenciesMatchFormula) {
  RopeScaling s;
  s.type = "llama3";
  s.factor = 32;
  s.low_freq_factor = 1;
  s.high_freq_factor = 4;
  s.original_max_position_embeddings = 8192;
  const int d = 64;
  const double theta = 500000;
  const std::vector<float> f = rope_inv_freq(d, theta, s);
  ASSERT_EQ(f.size(), 32u);
  int low = 0, mid = 0, high = 0;
  for (int i = 0; i < 32; ++i) {
    const double base = std::pow(theta, -2.0 * i / d);
    const double wavelen = 2 * std::numbers::pi / base;
    double want;
    if (wavelen < 8192.0 / 4) {
      want = base, ++high;
    } else if (wavelen > 8192.0 / 1) {
      want = base / 32, ++low;
    } else {
      const double smooth = (8192.0 / wavelen - 1) / (4 - 1);
      want = (1 - smooth) * base / 32 + smooth * base, ++mid;
    }
    EXPECT_NEAR(f[size_t(i)], want, 1e-6 * want) << i;
  }
  EXPECT_GT(low, 0);  // all three bands are exercised
  EXPECT_GT(mid, 0);
  EXPECT_GT(high, 0);
  s.type = "linear";
  s.factor = 8;
  EXPECT_NEAR(rope_inv_freq(d, theta, s)[3], std::pow(theta, -6.0 / d) / 8, 1e-7);
  s.type = "yarn";
  EXPECT_THROW(rope_inv_freq(d, theta, s), Error);
}

TEST(Rope, RotatesHalvesByPosition) {
  std::mt19937 rng(3);
  constexpr int64_t t = 5, h = 3, d = 16;
  Tensor x = random_tensor({t, h, d}, rng);
  const Tensor x0 = x.to(Device::cpu);
  Tensor pos = Tensor::empty({t}, DType::i32);
  const int32_t p[t] = {0, 7, 3, 1000, 12};
  std::copy(p, p + t, pos.data<int32_t>());
  const std::vector<float> f = rope_inv_freq(d, 10000.0, {});
  Tensor ft = Tensor::empty({d / 2}, DType::f32);
  std::copy(f.begin(), f.end(), ft.data<float>());
  rope(x, pos, ft);
  for (int64_t a = 0; a < t; ++a)
    for (int64_t b = 0; b < h; ++b)
      for (int64_t i = 0; i < d / 2; ++i) {
        const double ang = double(p[a]) * double(f[size_t(i)]);
        const float* r = x0.data<float>() + (a * h + b) * d;
        const float* o = x.data<float>() + (a * h + b) * d;
        EXPECT_NEAR(o[i], r[i] * std::cos(ang) - r[i + d / 2] * std::sin(ang), 2e-4);
        EXPECT_NEAR(o[i + d / 2], r[i + d / 2] * std::cos(ang) + r[i] * std::sin(ang), 2e-4);
      }
}

TEST(Glu, SiluAndGeluTanh) {
  Tensor g = Tensor::empty({3}, DType::f32), u = Tensor::empty({3}, DType::f32);
  const float gv[3] = {-1.5f, 0.0f, 2.0f}, uv[3] = {2.0f, 3.0f, -0.5f};
  std::copy(gv, gv + 3, g.data<float>());
  std::copy(uv, uv + 3, u.data<float>());
  Tensor o = Tensor::empty({3}, DType::f32);
  glu(g, u, GluActivation::silu, o);
  for (int i = 0; i < 3; ++i)
    EXPECT_NEAR(o.data<float>()[i], gv[i] / (1 + std::exp(-gv[i])) * uv[i], 1e-6);
  glu(g, u, GluActivation::gelu_tanh, o);
  for (int i = 0; i < 3; ++i) {
    const double x = gv[i];
    const double want =
        0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(o.data<float>()[i], want * uv[i], 1e-6);
  }
}

}  // namespace
}  // namespace parley
