// Matrix multiply: c = alpha * a @ op(b) (+ bias) + beta * c.
//   a: [M, K] or [B, M, K]                    (row-major, contiguous)
//   b: [K, N], or [N, K] when trans_b          (a PyTorch Linear weight is [N, K]: trans_b)
//      or batched [B, K, N] / [B, N, K]; a 2-D b is shared by every batch of a 3-D a
//   c: [M, N] or [B, M, N]
//   bias (optional): [N], added to every row before beta * c.
//   gelu: c = gelu(alpha * a @ op(b) + bias) (exact GELU, as ops/elementwise.h), only with
//         beta == 0; CUDA's few-row GEMM fuses it into its epilogue (one rounding instead
//         of two), elsewhere it is the gelu op after the GEMM.
//   norm (optional, NormInput below): a's rows are LayerNormed first, c = alpha *
//         layer_norm(a) @ op(b) + bias + beta * c; b 2-D and trans_b.
// dtypes: a and b the same float dtype; c f32 or the same dtype as a; bias f32 or a's.
// Accumulation is f32. CPU: oneDNN (f32, bf16) with primitives cached per shape, or
// OpenBLAS where oneDNN is absent; f16 on the CPU goes through f32. CUDA: cuBLAS.
#pragma once

#include <string_view>

#include "engine/tensor.h"

namespace parley {

// The LayerNorm a GEMM's input goes through (MatmulOptions::norm): a's rows [M, K] normalized
// over K with gamma and shift (the norm's beta) [K] (f32 or a's dtype) and eps, as
// layer_norm (ops/norm.h). CUDA's few-row FMA kernel (1-3 rows, f16/bf16; a greedy decoder
// step) folds the norm into the product, so no LayerNorm launch precedes it: with
// w_gamma = b @ gamma and w_shift = b @ shift (f32 [N], computed once per weight,
// fold_layer_norm below), row m's output j is
//   rstd_m (sum_k a_mk gamma_k b_jk - mean_m w_gamma_j) + w_shift_j
// with a's mean and variance accumulated in the same pass over a that the product makes
// (var = E[a^2] - mean^2, in f32). Elsewhere the norm is written to `scratch` ([M, K] of a's
// dtype, same device) and the GEMM reads that; the two differ by the rounding of the
// normalized rows to a's dtype, which the folded form skips.
struct NormInput {
  const Tensor* gamma = nullptr;  // [K]
  const Tensor* shift = nullptr;  // [K]
  float eps = 1e-5f;
  const Tensor* w_gamma = nullptr;  // f32 [N]
  const Tensor* w_shift = nullptr;  // f32 [N]
  Tensor* scratch = nullptr;        // [M, K]
};

// w_gamma = w @ gamma and w_shift = w @ shift (f32 [N]) of a [N, K] weight (trans_b) and the
// LayerNorm before it: NormInput's folded vectors, on w's device.
void fold_layer_norm(const Tensor& w, const Tensor& gamma, const Tensor& shift, Tensor& w_gamma,
                     Tensor& w_shift);

struct MatmulOptions {
  bool trans_b = false;
  float alpha = 1.0f;
  float beta = 0.0f;                // beta != 0 accumulates into c
  const Tensor* bias = nullptr;     // [N]
  bool gelu = false;                // gelu(...) of the result; needs beta == 0
  const NormInput* norm = nullptr;  // LayerNorm a first (NormInput)
  // Each row of c must not depend on the other rows of a (a chat model's batch: a request's
  // answer is the same whatever runs beside it). On the CPU, f32 a, b [N, K] with trans_b
  // and an f32 c take parley's own dot-product kernel, whose every output sums K in one fixed
  // order: the GEMM library picks other kernels and splits for other row counts (oneDNN's
  // AVX2 sgemm does; its AVX-512 kernels happened not to). Elsewhere it changes nothing.
  bool batch_invariant = false;
};

void matmul(const Tensor& a, const Tensor& b, Tensor& c, const MatmulOptions& opt = {});

namespace detail {
// matmul's argument checks (opt.norm's included), errors under `op`; returns the device.
Device check_matmul(std::string_view op, const Tensor& a, const Tensor& b, const Tensor& c,
                    const MatmulOptions& opt);
}  // namespace detail

namespace cpu {
void matmul(const Tensor& a, const Tensor& b, Tensor& c, const MatmulOptions& opt);
// Which CPU GEMM library this build uses: "onednn" or "openblas".
const char* gemm_provider();
}  // namespace cpu
namespace cuda {
void matmul(const Tensor& a, const Tensor& b, Tensor& c, const MatmulOptions& opt);
// matmul with opt.norm folded into the few-row kernel; false (nothing launched) where that
// kernel does not take the shape, and the caller normalizes into the scratch instead.
bool matmul_norm_folded(const Tensor& a, const Tensor& b, Tensor& c, const MatmulOptions& opt);
}  // namespace cuda

}  // namespace parley
