// AVX2 helpers shared by the CPU kernels that dispatch at run time (internal): the target
// attribute their functions carry (the build itself targets baseline x86-64) and small
// reductions. Call such functions only where cpu_has_avx2() (vec_math.h) is true.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#define PARLEY_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace parley::cpu {

// The sum of v's eight lanes.
PARLEY_AVX2 inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// max |x[i]| over i in [0, n): eight lanes at a time, the rest one by one.
PARLEY_AVX2 inline float max_abs(const float* x, int64_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  float r = _mm_cvtss_f32(h);
  for (; i < n; ++i) r = std::max(r, std::fabs(x[i]));
  return r;
}

}  // namespace parley::cpu
