// matmul_i8: c = a @ dequant(w)^T (+ bias) + beta * c, then GELU where asked, with w in
// 8-bit integers and one scale per row (RowInt8) and a's rows quantized per call: the
// integer GEMM of the CPU int8 configuration's Whisper encoder (`--int8-encoder`; per-channel
// weights and per-row dynamic activations, as CTranslate2's int8, with the ranges below).
//   a: [M, K] f32, contiguous;  w: RowInt8 [N, K];  c: [M, N] f32;  bias: f32 [N].
// CPU only. Row n of the weight is q[n, k] = round(w[n, k] / s_n) in [-127, 127] with
// s_n = max_k |w[n, k]| / 127; row m of a becomes u[m, k] = round(a[m, k] / t_m) + 64 in
// [1, 127] with t_m = max_k |a[m, k]| / 63. The integer sums acc = sum_k u q are exact, and
//   c[m, n] = t_m * s_n * (acc[m, n] - 64 * sum_k q[n, k]) + bias[n]
// (|acc - 64 sum q| <= 8001 K, exact in f32 below K = 2097).
// Why 7-bit activations: AVX2 without VNNI multiplies u8 by s8 in vpmaddubsw, whose pairwise
// int16 sums saturate above 32767; 127 * 127 * 2 = 32258 never does. With both operands at
// 8 bits oneDNN's AVX2 GEMM returned 48960 for a sum of 6193536 (tests/ops/int8_matmul_test.cpp
// keeps the extreme case). Of the two 7+8-bit splits, 8-bit weights kept tiny.en's
// transcripts closer to the f32 path's on the shared clips (bench/RESULTS.md, 2026-12-07).
// oneDNN's u8 x s8 GEMM (PARLEY_GEMM_ONEDNN) runs the sums, about twice its f32 GEMM's rate
// on AVX2; MatmulI8Options::reference (and an OpenBLAS build) sums them in plain loops, to
// the same integers, so both give the same c bit for bit.
#pragma once

#include "engine/tensor.h"

namespace parley {

// A weight [N, K] in per-row 8-bit integers (the layout matmul_i8 reads).
struct RowInt8 {
  Tensor q;       // i8 [N, K], |q| <= 127
  Tensor scale;   // f32 [N]: w[n, k] ~ scale[n] * q[n, k]
  Tensor colsum;  // i32 [N]: sum_k q[n, k] (the correction for the activations' +64)
  bool defined() const { return q.defined(); }
};

// w f32 [N, K] on the CPU -> its RowInt8 (a row of zeros gets scale 0).
RowInt8 quantize_row_int8(const Tensor& w);

struct MatmulI8Options {
  const Tensor* bias = nullptr;  // f32 [N], added to every row
  float beta = 0.0f;             // beta != 0 accumulates: c = ... + beta * c (after the GELU)
  bool gelu = false;             // GELU (the erf form) of a @ w^T + bias
  bool reference = false;        // the integer sums in plain loops instead of oneDNN
};

void matmul_i8(const Tensor& a, const RowInt8& w, Tensor& c, const MatmulI8Options& opt = {});

// Whether a GEMM library runs the integer sums (oneDNN builds); the plain loops otherwise,
// which are correct but much slower than the f32 GEMM (callers then keep f32 weights).
bool matmul_i8_native();

namespace cpu {
bool matmul_i8_native();
RowInt8 quantize_row_int8(const Tensor& w);
void matmul_i8(const Tensor& a, const RowInt8& w, Tensor& c, const MatmulI8Options& opt);
}  // namespace cpu

}  // namespace parley
