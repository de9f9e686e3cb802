// AVX2 helpers shared by the CPU kernels that dispatch at run time (internal): the target
// attribute their functions carry (the build itself targets baseline x86-64) and small
// reductions. Call such functions only where cpu_has_avx2() (vec_math.h) is true.
#pragma once

#include <immintrin.h>

#define PARLEY_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace parley::cpu {

// The sum of v's eight lanes.
PARLEY_AVX2 inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace parley::cpu
