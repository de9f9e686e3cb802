// The CPU's vectorized f32 math (engine/cpu/vec_math.h) against the C library: exp within
// 2 ulp, erf within 1 ulp, the special values, and the softmax / GELU / SiLU rows built on
// them, with lengths that leave every tail size.
#include "engine/cpu/vec_math.h"
#include "engine/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace parley::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Distance in representable floats between two finite floats of the same sign.
int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::llabs(int64_t(ia) - int64_t(ib));
}

std::vector<float> sweep(float lo, float hi, int n) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) x[size_t(i)] = lo + (hi - lo) * float(i) / float(n - 1);
  return x;
}

TEST(VecMath, ExpWithinTwoUlpOfTheCLibrary) {
  std::vector<float> x = sweep(-110.0f, 90.0f, 2'000'003);
  for (float v : {0.0f, -0.0f, 1.0f, -1.0f, 88.72f, 88.7228f, 88.7229f, -87.33f, -103.97f, -104.0f,
                  -104.1f, 1e-30f, -1e-30f})
    x.push_back(v);
  std::vector<float> y(x.size());
  exp_f32(x.data(), y.data(), int64_t(x.size()));
  int64_t worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float ref = std::exp(x[i]);
    if (ref == 0.0f || ref == kInf) {
      ASSERT_EQ(y[i], ref) << x[i];
    } else if (ref < std::numeric_limits<float>::min()) {  // denormal results
      ASSERT_LE(std::fabs(y[i] - ref), 2 * std::numeric_limits<float>::denorm_min()) << x[i];
    } else {
      worst = std::max(worst, ulps(y[i], ref));
      ASSERT_LE(ulps(y[i], ref), 2) << x[i] << " " << y[i] << " " << ref;
    }
  }
  EXPECT_LE(worst, 2);
  float one = 0.0f;
  exp_f32(&one, &one, 1);
  EXPECT_EQ(one, 1.0f);
}

TEST(VecMath, ExpSpecialValuesInEveryLane) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {-kInf, kInf, nan, 0.0f, 1000.0f, -1000.0f, 89.0f, -200.0f, nan, -kInf};
  std::vector<float> y(x.size());
  exp_f32(x.data(), y.data(), int64_t(x.size()));
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], kInf);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], 1.0f);
  EXPECT_EQ(y[4], kInf);
  EXPECT_EQ(y[5], 0.0f);
  EXPECT_EQ(y[6], kInf);
  EXPECT_EQ(y[7], 0.0f);
  EXPECT_TRUE(std::isnan(y[8]));  // the scalar tail
  EXPECT_EQ(y[9], 0.0f);
}

TEST(VecMath, ErfWithinOneUlpOfTheCLibrary) {
  std::vector<float> x = sweep(-7.0f, 7.0f, 1'400'001);
  for (float v : {0.0f, -0.0f, 0.5f, -0.5f, 0.49999997f, 1e-20f, -1e-20f, 30.0f, -30.0f, 1e30f,
                  -1e30f, kInf, -kInf})
    x.push_back(v);
  std::vector<float> y(x.size());
  erf_f32(x.data(), y.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float ref = std::erf(x[i]);
    ASSERT_EQ(std::signbit(y[i]), std::signbit(ref)) << x[i];
    ASSERT_LE(ulps(y[i], ref), 1) << x[i] << " " << y[i] << " " << ref;
    ASSERT_NEAR(y[i], std::erf(double(x[i])), 7e-8) << x[i];
  }
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> n8(8, nan);
  erf_f32(n8.data(), n8.data(), 8);
  EXPECT_TRUE(std::isnan(n8[3]));
}

TEST(VecMath, GeluSiluAndGatedSiluMatchTheirFormulas) {
  std::vector<float> x = sweep(-12.0f, 12.0f, 200'001), u(x.size());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (float& v : u) v = dist(rng);
  std::vector<float> g(x.size()), s(x.size()), sm(x.size());
  gelu_f32(x.data(), g.data(), int64_t(x.size()));
  silu_f32(x.data(), s.data(), int64_t(x.size()));
  silu_mul_f32(x.data(), u.data(), sm.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double gelu = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    const double silu = v / (1.0 + std::exp(-v));
    // erf's ulp near 1 (6e-8) scaled by 0.5 |x|, plus the result's roundings.
    ASSERT_NEAR(g[i], gelu, 1e-7 * std::fabs(v) + 2.5e-7 * std::fabs(gelu) + 1e-30) << v;
    ASSERT_NEAR(s[i], silu, 4e-7 * std::fabs(silu) + 1e-30) << v;
    ASSERT_NEAR(sm[i], silu * u[i], 5e-7 * std::fabs(silu * u[i]) + 1e-30) << v;
  }
}

// Element-wise ops split their range over threads by its length, so an element's value must
// not depend on where a chunk starts or ends (a batch's size would change its rows' values:
// speculative decoding's verify rows must equal plain decode steps bit for bit).
TEST(VecMath, ElementWiseValuesDoNotDependOnTheChunking) {
  std::vector<float> x = sweep(-9.0f, 9.0f, 4099), u(x.size());
  for (size_t i = 0; i < u.size(); ++i) u[i] = float(std::sin(double(i)));
  const int64_t n = int64_t(x.size());
  std::vector<float> whole[4], part[4];
  for (auto& v : whole) v.resize(x.size());
  for (auto& v : part) v.resize(x.size());
  gelu_f32(x.data(), whole[0].data(), n);
  silu_f32(x.data(), whole[1].data(), n);
  silu_mul_f32(x.data(), u.data(), whole[2].data(), n);
  exp_f32(x.data(), whole[3].data(), n);
  for (int64_t chunk : {1, 3, 5, 7, 13, 100}) {
    for (int64_t b = 0; b < n; b += chunk) {
      const int64_t m = std::min(chunk, n - b);
      gelu_f32(x.data() + b, part[0].data() + b, m);
      silu_f32(x.data() + b, part[1].data() + b, m);
      silu_mul_f32(x.data() + b, u.data() + b, part[2].data() + b, m);
      exp_f32(x.data() + b, part[3].data() + b, m);
    }
    for (int f = 0; f < 4; ++f)
      ASSERT_EQ(std::memcmp(whole[f].data(), part[f].data(), x.size() * sizeof(float)), 0)
          << "op " << f << " in chunks of " << chunk;
  }
}

TEST(VecMath, SoftmaxRowsOfEveryTailLength) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (int n = 1; n <= 40; ++n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = dist(rng);
    if (n > 3) x[2] = -kInf;  // a masked entry
    std::vector<float> p = x, lp(static_cast<size_t>(n)), lp_in = x;
    ASSERT_TRUE(softmax_row(p.data(), n));
    log_softmax_row(x.data(), lp.data(), n);
    log_softmax_row(lp_in.data(), lp_in.data(), n);  // in place
    double mx = -1e300, sum = 0;
    for (float v : x) mx = std::max(mx, double(v));
    for (float v : x) sum += std::exp(double(v) - mx);
    double total = 0;
    for (int i = 0; i < n; ++i) {
      const double ref = std::exp(double(x[size_t(i)]) - mx) / sum;
      // x - max rounds to f32 first: a relative error of |x - max| ulp in the result.
      const double gap = ref > 0 ? mx - double(x[size_t(i)]) : 0.0;
      EXPECT_NEAR(p[size_t(i)], ref, 1e-6 * ref * (1 + gap) + 1e-30) << n << " " << i;
      total += p[size_t(i)];
      if (x[size_t(i)] == -kInf) {
        EXPECT_EQ(p[size_t(i)], 0.0f);
        EXPECT_EQ(lp[size_t(i)], -kInf);
      } else {
        EXPECT_NEAR(lp[size_t(i)], double(x[size_t(i)]) - mx - std::log(sum), 2e-6) << n;
      }
      EXPECT_EQ(lp[size_t(i)], lp_in[size_t(i)]);
    }
    EXPECT_NEAR(total, 1.0, 2e-6);
  }
}

TEST(VecMath, SoftmaxRowOfMinusInfinityOrWithANaNIsNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int n : {1, 8, 13}) {
    std::vector<float> all_masked(static_cast<size_t>(n), -kInf);
    EXPECT_FALSE(softmax_row(all_masked.data(), n));
    for (float v : all_masked) EXPECT_TRUE(std::isnan(v));
    for (int at = 0; at < n; ++at) {
      std::vector<float> x(static_cast<size_t>(n), 1.0f);
      x[size_t(at)] = nan;
      std::vector<float> lp(static_cast<size_t>(n));
      log_softmax_row(x.data(), lp.data(), n);
      EXPECT_TRUE(softmax_row(x.data(), n));
      for (int i = 0; i < n; ++i) {
        EXPECT_TRUE(std::isnan(x[size_t(i)])) << n << " " << at;
        EXPECT_TRUE(std::isnan(lp[size_t(i)])) << n << " " << at;
      }
    }
  }
}

TEST(VecMath, HalfToFloatRowEqualsTheScalarConversionOnEveryBitPattern) {
  std::vector<uint16_t> x(65536 + 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = uint16_t(i);
  std::vector<float> y(x.size());
  f16_to_f32_row(x.data(), y.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float ref = f16_to_f32(x[i]);
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(y[i])) << i;
    } else {
      ASSERT_EQ(std::memcmp(&y[i], &ref, 4), 0) << i << " " << y[i] << " " << ref;
    }
  }
}

TEST(VecMath, AttentionRowHelpersMatchDoublePrecision) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t d : {8, 16, 24, 64, 128, 5}) {
    for (int64_t n : {0, 1, 7, 8, 9, 17, 40}) {
      const int64_t stride = d + 3;
      std::vector<float> q(static_cast<size_t>(d)), kv(static_cast<size_t>(n * stride + 1));
      for (float& v : q) v = dist(rng);
      for (float& v : kv) v = dist(rng);
      std::vector<float> s(static_cast<size_t>(n) + 1, -1.0f);
      dot_rows_f32(q.data(), kv.data(), stride, n, d, 0.125f, s.data());
      std::vector<float> p(static_cast<size_t>(n)), acc(static_cast<size_t>(d), 0.5f);
      for (int64_t j = 0; j < n; ++j) p[size_t(j)] = j % 3 == 1 ? 0.0f : std::fabs(dist(rng));
      weighted_rows_f32(p.data(), kv.data(), stride, n, d, acc.data());
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0;
        for (int64_t c = 0; c < d; ++c) ref += double(q[size_t(c)]) * kv[size_t(j * stride + c)];
        EXPECT_NEAR(s[size_t(j)], 0.125 * ref, 1e-5) << d << " " << n << " " << j;
      }
      EXPECT_EQ(s[size_t(n)], -1.0f);  // nothing past n written
      for (int64_t c = 0; c < d; ++c) {
        double ref = 0.5;
        for (int64_t j = 0; j < n; ++j) ref += double(p[size_t(j)]) * kv[size_t(j * stride + c)];
        EXPECT_NEAR(acc[size_t(c)], ref, 1e-5) << d << " " << n << " " << c;
      }
    }
  }
}

}  // namespace
}  // namespace parley::cpu
