// Vectorized f32 math for the CPU ops (internal): exp, erf and the row loops built on them
// (softmax, GELU, SiLU), AVX2 + FMA where the CPU has them, the C library's functions
// elsewhere. Each row function gives the same result for a row whatever else is computed
// beside it (lanes follow the row's own positions), so results stay batch invariant.
//
// Accuracy (tests/ops/vec_math_test.cpp holds them): exp_f32 (and SiLU's exp) within 2 ulp
// of std::exp on normal results (denormal results within 2^-149 of it), exactly 0 below
// -104, +inf above 88.72, NaN for NaN: the Cephes expf scheme (n = round(x log2 e), a
// degree-6 polynomial on the remainder). Softmax's exponentials and erf are computed in
// double and rounded once (within 1 ulp): the parity path's logits need it (f32 versions
// within 2 ulp and 2e-7 moved a synthetic model's logits from 6.3e-3 to 1.0e-2 of float64's
// over 224 steps, where openai-whisper's own are 7.9e-3). erf is the Taylor series of
// erf(x) / x below |x| = 0.5 and 1 - erfc(x) above, erfc(x) = exp(-x^2) times a polynomial
// in 1 / (1 + 0.6 |x|) fitted for this file (vec_math.cpp says how).
#pragma once

#include <cstdint>

namespace parley::cpu {

// AVX2, FMA and F16C: what the vectorized paths here and in quant_matmul.cpp need.
bool cpu_has_avx2();

// exp of each x[i] (out may be x).
void exp_f32(const float* x, float* out, int64_t n);
// erf of each x[i] (out may be x).
void erf_f32(const float* x, float* out, int64_t n);

// s[0, n) becomes softmax(s): exp(s - max) / sum. A NaN anywhere makes the row NaN. A row
// of -inf only returns false and holds NaN (as PyTorch's softmax: -inf - -inf is NaN).
bool softmax_row(float* s, int64_t n);
// log_softmax of x[0, n) into out (out may be x): x - max - log(sum exp(x - max)).
void log_softmax_row(const float* x, float* out, int64_t n);

// GELU (the erf form, 0.5 x (1 + erf(x / sqrt 2))) and SiLU (x / (1 + exp(-x))) of each
// x[i] (out may be x).
void gelu_f32(const float* x, float* out, int64_t n);
void silu_f32(const float* x, float* out, int64_t n);
// out[i] = silu(g[i]) * u[i] (out may be g or u).
void silu_mul_f32(const float* g, const float* u, float* out, int64_t n);

// f16 (IEEE half, as bits) to f32, n values (F16C where the CPU has it).
void f16_to_f32_row(const uint16_t* x, float* out, int64_t n);

// Attention over one query row, keys and values in rows `stride` floats apart:
// s[j] = scale * (q . k[j]) for j in [0, n), q and each k of d floats.
void dot_rows_f32(const float* q, const float* k, int64_t stride, int64_t n, int64_t d, float scale,
                  float* s);
// acc[c] += sum over j in [0, n) of p[j] * v[j][c] for c in [0, d); p[j] == 0 adds nothing.
void weighted_rows_f32(const float* p, const float* v, int64_t stride, int64_t n, int64_t d,
                       float* acc);

}  // namespace parley::cpu
