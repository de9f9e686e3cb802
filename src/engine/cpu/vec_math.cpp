// Vectorized f32 math (vec_math.h): AVX2 + FMA kernels chosen at run time, the C library's
// functions on other CPUs. Element-wise maps run their tails of fewer than 8 elements
// through the lanes too (batch invariance); row reductions finish theirs one at a time.
#include "engine/cpu/vec_math.h"

#include <cpuid.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/cpu/avx2.h"
#include "engine/dtype.h"

namespace parley::cpu {

// F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports has no "f16c".
static bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}

bool cpu_has_avx2() {
  static const bool has =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
  return has;
}

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float gelu1(float v) { return 0.5f * v * (1.0f + std::erf(v * kInvSqrt2)); }
float silu1(float v) { return v / (1.0f + std::exp(-v)); }

// exp on 8 lanes. x is clamped to [-104, 88.75] so n = round(x log2 e) lies in [-150, 128];
// 2^n is applied as 2^(n >> 1) * 2^(n - (n >> 1)), both factors normal, so results down to
// the denormals come out right; lanes past the clamp are set to 0 or +inf after, NaN lanes
// to x. The remainder r = x - n ln 2 (ln 2 in two parts, the first exact in n * C1) lies in
// [-ln2/2, ln2/2], where 1 + r + r^2 p(r) is Cephes's expf polynomial.
PARLEY_AVX2 inline __m256 exp8(__m256 x) {
  const __m256 xc =
      _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(88.75f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  __m256 out = _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
  out = _mm256_blendv_ps(out, _mm256_setzero_ps(),
                         _mm256_cmp_ps(x, _mm256_set1_ps(-104.0f), _CMP_LT_OQ));
  out = _mm256_blendv_ps(out, _mm256_set1_ps(std::numeric_limits<float>::infinity()),
                         _mm256_cmp_ps(x, _mm256_set1_ps(88.72283935546875f), _CMP_GT_OQ));
  return _mm256_blendv_ps(out, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// exp on 4 double lanes for x in [-700, 0] (erf's exp(-x^2)): n = round(x log2 e),
// r = x - n ln 2 (fdlibm's two-part ln 2) in [-0.347, 0.347], exp(r) by its Taylor series to
// r^12 / 12! (the rest below 1e-16 of the value), times 2^n built in the exponent bits.
PARLEY_AVX2 inline __m256d exp4d(__m256d x) {
  const __m256d n = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(6.93147180369123816490e-01), x);
  r = _mm256_fnmadd_pd(n, _mm256_set1_pd(1.90821492927058770002e-10), r);
  double inv_fact = 1.0 / 479001600.0;  // 1 / 12!
  __m256d p = _mm256_set1_pd(inv_fact);
  for (int k = 12; k >= 1; --k) {
    inv_fact *= k;  // 1 / (k - 1)!
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(inv_fact));
  }
  const __m256i e = _mm256_slli_epi64(
      _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(n)), _mm256_set1_epi64x(1023)), 52);
  return _mm256_mul_pd(p, _mm256_castsi256_pd(e));
}

// erf on 4 double lanes of f32 inputs: below |x| = 0.5 the Taylor series x (2 / sqrt pi)
// sum_k (-x^2)^k / (k! (2k + 1)) to k = 8 (the next term below 1e-12 of the value); above it
// 1 - t q(t) exp(-x^2) with t = 1 / (1 + 0.6 |x|) and x's sign, where t q(t), q of degree 5,
// is a fit of erfc(x) exp(x^2) on [0.5, 6] (weighted least squares on erf's absolute error,
// made for this file: within 8e-10 in exact arithmetic; |x| is taken at most 6, where erf
// is 1 in f32). In double, so the f32 result is erf rounded once (plus the fit's 8e-10).
PARLEY_AVX2 inline __m256d erf4d(__m256d x) {
  const __m256d sign = _mm256_and_pd(x, _mm256_set1_pd(-0.0));
  const __m256d ax = _mm256_min_pd(_mm256_andnot_pd(_mm256_set1_pd(-0.0), x), _mm256_set1_pd(6.0));
  const __m256d x2 = _mm256_mul_pd(ax, ax);
  // Small |x|: the coefficients (-1)^k / (k! (2k + 1)).
  __m256d s = _mm256_set1_pd(1.0 / 688128.0);
  s = _mm256_fmadd_pd(s, x2, _mm256_set1_pd(-1.0 / 75600.0));
  s = _mm256_fmadd_pd(s, x2, _mm256_set1_pd(1.0 / 9360.0));
  s = _mm256_fmadd_pd(s, x2, _mm256_set1_pd(-1.0 / 1320.0));
  s = _mm256_fmadd_pd(s, x2, _mm256_set1_pd(1.0 / 216.0));
  s = _mm256_fmadd_pd(s, x2, _mm256_set1_pd(-1.0 / 42.0));
  s = _mm256_fmadd_pd(s, x2, _mm256_set1_pd(1.0 / 10.0));
  s = _mm256_fmadd_pd(s, x2, _mm256_set1_pd(-1.0 / 3.0));
  s = _mm256_fmadd_pd(s, x2, _mm256_set1_pd(1.0));
  const __m256d small = _mm256_mul_pd(_mm256_mul_pd(s, ax), _mm256_set1_pd(1.1283791670955126));
  // Large |x|.
  const __m256d one = _mm256_set1_pd(1.0);
  const __m256d t = _mm256_div_pd(one, _mm256_fmadd_pd(ax, _mm256_set1_pd(0.6), one));
  __m256d q = _mm256_set1_pd(0.13890499859167948);
  q = _mm256_fmadd_pd(q, t, _mm256_set1_pd(-0.5360178066194279));
  q = _mm256_fmadd_pd(q, t, _mm256_set1_pd(0.5827462765844271));
  q = _mm256_fmadd_pd(q, t, _mm256_set1_pd(0.10389039709512293));
  q = _mm256_fmadd_pd(q, t, _mm256_set1_pd(0.37522325252472255));
  q = _mm256_fmadd_pd(q, t, _mm256_set1_pd(0.33530777790498023));
  q = _mm256_mul_pd(q, t);
  const __m256d large = _mm256_fnmadd_pd(q, exp4d(_mm256_sub_pd(_mm256_setzero_pd(), x2)), one);
  const __m256d r =
      _mm256_blendv_pd(large, small, _mm256_cmp_pd(ax, _mm256_set1_pd(0.5), _CMP_LT_OQ));
  return _mm256_or_pd(r, sign);
}

// exp of 8 lanes x <= 0 (softmax's x - max) through two halves in double: within half an
// ulp, plus the double's error; below -700 (and -inf) 0, NaN lanes NaN.
PARLEY_AVX2 inline __m256 exp8_nonpositive(__m256 x) {
  const __m256d floor = _mm256_set1_pd(-700.0);
  const __m256d lo = _mm256_max_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x)), floor);
  const __m256d hi = _mm256_max_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)), floor);
  const __m256 r = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(exp4d(lo))),
                                        _mm256_cvtpd_ps(exp4d(hi)), 1);
  return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// erf on 8 lanes, through two halves in double; NaN lanes stay NaN.
PARLEY_AVX2 inline __m256 erf8(__m256 x) {
  const __m128 lo = _mm256_cvtpd_ps(erf4d(_mm256_cvtps_pd(_mm256_castps256_ps128(x))));
  const __m128 hi = _mm256_cvtpd_ps(erf4d(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1))));
  const __m256 r = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
  return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

PARLEY_AVX2 inline __m256 gelu8(__m256 x) {
  const __m256 e = erf8(_mm256_mul_ps(x, _mm256_set1_ps(kInvSqrt2)));
  return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x),
                       _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

PARLEY_AVX2 inline __m256 silu8(__m256 x) {
  const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

PARLEY_AVX2 inline float hmax8(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The last n < 8 floats of x as the first lanes of a vector (the rest 0), and back.
PARLEY_AVX2 inline __m256 load_tail(const float* x, int64_t n) {
  alignas(32) float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::copy_n(x, n, buf);
  return _mm256_load_ps(buf);
}
PARLEY_AVX2 inline void store_tail(__m256 v, float* out, int64_t n) {
  alignas(32) float buf[8];
  _mm256_store_ps(buf, v);
  std::copy_n(buf, n, out);
}

// out[i] = f(x[i]): F has a lane-wise and a one-float operator(). A tail of fewer than 8
// elements goes through the lanes too, so an element's value never depends on where the
// caller's chunks begin (element-wise ops split their range over threads by its length:
// with a scalar tail, a batch's size would change its rows' values).
template <typename F>
PARLEY_AVX2 void map8(const float* x, float* out, int64_t n) {
  const F f;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, f(_mm256_loadu_ps(x + i)));
  if (i < n) store_tail(f(load_tail(x + i, n - i)), out + i, n - i);
}

// The row's max, or NaN when it holds a NaN.
PARLEY_AVX2 float row_max_avx2(const float* s, int64_t n) {
  __m256 mx = _mm256_set1_ps(kNegInf), nan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(s + i);
    mx = _mm256_max_ps(mx, v);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  float m = hmax8(mx);
  bool has_nan = _mm256_movemask_ps(nan) != 0;
  for (; i < n; ++i) {
    has_nan = has_nan || std::isnan(s[i]);
    m = std::max(m, s[i]);
  }
  return has_nan ? std::numeric_limits<float>::quiet_NaN() : m;
}

// The sum of exp(x[i] - shift) (eight lanes, then the tail), each term also stored to out[i]
// when out is not null.
PARLEY_AVX2 float exp_shift_sum_avx2(const float* x, float shift, float* out, int64_t n) {
  const __m256 sh = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp8_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + i), sh));
    if (out) _mm256_storeu_ps(out + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = hsum8(acc);
  for (; i < n; ++i) {
    const float e = std::exp(x[i] - shift);
    if (out) out[i] = e;
    sum += e;
  }
  return sum;
}

PARLEY_AVX2 void scale_avx2(float* s, float k, int64_t n) {
  const __m256 kv = _mm256_set1_ps(k);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(s + i, _mm256_mul_ps(_mm256_loadu_ps(s + i), kv));
  for (; i < n; ++i) s[i] *= k;
}

PARLEY_AVX2 void shift_avx2(const float* x, float k, float* out, int64_t n) {
  const __m256 kv = _mm256_set1_ps(k);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_sub_ps(_mm256_loadu_ps(x + i), kv));
  for (; i < n; ++i) out[i] = x[i] - k;
}

struct Exp8 {
  PARLEY_AVX2 __m256 operator()(__m256 v) const { return exp8(v); }
  float operator()(float v) const { return std::exp(v); }
};
struct Erf8 {
  PARLEY_AVX2 __m256 operator()(__m256 v) const { return erf8(v); }
  float operator()(float v) const { return std::erf(v); }
};
struct Gelu8 {
  PARLEY_AVX2 __m256 operator()(__m256 v) const { return gelu8(v); }
  float operator()(float v) const { return gelu1(v); }
};
struct Silu8 {
  PARLEY_AVX2 __m256 operator()(__m256 v) const { return silu8(v); }
  float operator()(float v) const { return silu1(v); }
};

PARLEY_AVX2 void silu_mul_avx2(const float* g, const float* u, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu8(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
  if (i < n)  // through the lanes, as map8's tail
    store_tail(_mm256_mul_ps(silu8(load_tail(g + i, n - i)), load_tail(u + i, n - i)), out + i,
               n - i);
}

// Eight keys at a time, one accumulator each (eight independent FMA chains), reduced to the
// eight scores by a transpose-and-add; the rest one at a time.
PARLEY_AVX2 void dot_rows_avx2(const float* q, const float* k, int64_t stride, int64_t n, int64_t d,
                               float scale, float* s) {
  const __m256 sc = _mm256_set1_ps(scale);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 a[8];
    for (int t = 0; t < 8; ++t) a[t] = _mm256_setzero_ps();
    for (int64_t c = 0; c < d; c += 8) {
      const __m256 qv = _mm256_loadu_ps(q + c);
      for (int t = 0; t < 8; ++t)
        a[t] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + (j + t) * stride + c), a[t]);
    }
    // Lane t of the result is the sum of a[t]'s lanes.
    const __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
    const __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
    const __m256 h0123 = _mm256_hadd_ps(h01, h23), h4567 = _mm256_hadd_ps(h45, h67);
    const __m256 lo = _mm256_permute2f128_ps(h0123, h4567, 0x20);
    const __m256 hi = _mm256_permute2f128_ps(h0123, h4567, 0x31);
    _mm256_storeu_ps(s + j, _mm256_mul_ps(_mm256_add_ps(lo, hi), sc));
  }
  for (; j < n; ++j) {
    __m256 a = _mm256_setzero_ps();
    for (int64_t c = 0; c < d; c += 8)
      a = _mm256_fmadd_ps(_mm256_loadu_ps(q + c), _mm256_loadu_ps(k + j * stride + c), a);
    s[j] = hsum8(a) * scale;
  }
}

// The d accumulators live in registers (up to 64 floats: d / 8 independent chains).
template <int kVecs>
PARLEY_AVX2 void weighted_rows_avx2(const float* p, const float* v, int64_t stride, int64_t n,
                                    float* acc) {
  __m256 a[kVecs];
  for (int t = 0; t < kVecs; ++t) a[t] = _mm256_loadu_ps(acc + 8 * t);
  for (int64_t j = 0; j < n; ++j) {
    if (p[j] == 0.0f) continue;
    const __m256 pj = _mm256_set1_ps(p[j]);
    const float* vr = v + j * stride;
    for (int t = 0; t < kVecs; ++t) a[t] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vr + 8 * t), a[t]);
  }
  for (int t = 0; t < kVecs; ++t) _mm256_storeu_ps(acc + 8 * t, a[t]);
}

PARLEY_AVX2 void f16_to_f32_avx2(const uint16_t* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  for (; i < n; ++i) out[i] = f16_to_f32(x[i]);
}

// The plain versions.
float row_max_scalar(const float* s, int64_t n) {
  float m = kNegInf;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(s[i])) return s[i];
    m = std::max(m, s[i]);
  }
  return m;
}

float exp_shift_sum_scalar(const float* x, float shift, float* out, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float e = std::exp(x[i] - shift);
    if (out) out[i] = e;
    sum += e;
  }
  return sum;
}

}  // namespace

// map8 where the CPU has AVX2, else F's one-float operator() over every element.
template <typename F>
void map(const float* x, float* out, int64_t n) {
  if (cpu_has_avx2()) return map8<F>(x, out, n);
  const F f;
  for (int64_t i = 0; i < n; ++i) out[i] = f(x[i]);
}

void exp_f32(const float* x, float* out, int64_t n) { map<Exp8>(x, out, n); }
void erf_f32(const float* x, float* out, int64_t n) { map<Erf8>(x, out, n); }
void gelu_f32(const float* x, float* out, int64_t n) { map<Gelu8>(x, out, n); }
void silu_f32(const float* x, float* out, int64_t n) { map<Silu8>(x, out, n); }

void silu_mul_f32(const float* g, const float* u, float* out, int64_t n) {
  if (cpu_has_avx2()) return silu_mul_avx2(g, u, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = silu1(g[i]) * u[i];
}

void dot_rows_f32(const float* q, const float* k, int64_t stride, int64_t n, int64_t d, float scale,
                  float* s) {
  if (cpu_has_avx2() && d % 8 == 0) return dot_rows_avx2(q, k, stride, n, d, scale, s);
  for (int64_t j = 0; j < n; ++j) {
    float dot = 0.0f;
    for (int64_t c = 0; c < d; ++c) dot += q[c] * k[j * stride + c];
    s[j] = dot * scale;
  }
}

void weighted_rows_f32(const float* p, const float* v, int64_t stride, int64_t n, int64_t d,
                       float* acc) {
  if (cpu_has_avx2() && d % 8 == 0) {
    // Up to 64 columns at a time, their accumulators in registers: one instantiation per
    // width in vectors.
    for (int64_t c = 0; c < d; c += 64) {
      const float* vc = v + c;
      float* ac = acc + c;
      switch (std::min<int64_t>(d - c, 64) / 8) {
        case 1: weighted_rows_avx2<1>(p, vc, stride, n, ac); break;
        case 2: weighted_rows_avx2<2>(p, vc, stride, n, ac); break;
        case 3: weighted_rows_avx2<3>(p, vc, stride, n, ac); break;
        case 4: weighted_rows_avx2<4>(p, vc, stride, n, ac); break;
        case 5: weighted_rows_avx2<5>(p, vc, stride, n, ac); break;
        case 6: weighted_rows_avx2<6>(p, vc, stride, n, ac); break;
        case 7: weighted_rows_avx2<7>(p, vc, stride, n, ac); break;
        default: weighted_rows_avx2<8>(p, vc, stride, n, ac); break;
      }
    }
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    if (p[j] == 0.0f) continue;
    for (int64_t c = 0; c < d; ++c) acc[c] += p[j] * v[j * stride + c];
  }
}

void f16_to_f32_row(const uint16_t* x, float* out, int64_t n) {
  if (cpu_has_avx2()) return f16_to_f32_avx2(x, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(x[i]);
}

bool softmax_row(float* s, int64_t n) {
  if (n == 0) return true;
  const bool avx2 = cpu_has_avx2();
  const float mx = avx2 ? row_max_avx2(s, n) : row_max_scalar(s, n);
  if (std::isnan(mx) || mx == kNegInf) {
    for (int64_t i = 0; i < n; ++i) s[i] = std::numeric_limits<float>::quiet_NaN();
    return !(mx == kNegInf);
  }
  const float sum = avx2 ? exp_shift_sum_avx2(s, mx, s, n) : exp_shift_sum_scalar(s, mx, s, n);
  const float inv = 1.0f / sum;
  if (avx2) {
    scale_avx2(s, inv, n);
  } else {
    for (int64_t i = 0; i < n; ++i) s[i] *= inv;
  }
  return true;
}

void log_softmax_row(const float* x, float* out, int64_t n) {
  if (n == 0) return;
  const bool avx2 = cpu_has_avx2();
  const float mx = avx2 ? row_max_avx2(x, n) : row_max_scalar(x, n);
  if (std::isnan(mx) || mx == kNegInf) {
    for (int64_t i = 0; i < n; ++i) out[i] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  const float sum =
      avx2 ? exp_shift_sum_avx2(x, mx, nullptr, n) : exp_shift_sum_scalar(x, mx, nullptr, n);
  const float shift = mx + std::log(sum);
  if (avx2) {
    shift_avx2(x, shift, out, n);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] - shift;
  }
}

}  // namespace parley::cpu
