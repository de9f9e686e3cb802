// Matrix multiply: c = alpha * a @ op(b) (+ bias) + beta * c.
//   a: [M, K] or [B, M, K]                    (row-major, contiguous)
//   b: [K, N], or [N, K] when trans_b          (a PyTorch Linear weight is [N, K]: trans_b)
//      or batched [B, K, N] / [B, N, K]; a 2-D b is shared by every batch of a 3-D a
//   c: [M, N] or [B, M, N]
//   bias (optional): [N], added to every row before beta * c.
//   gelu: c = gelu(alpha * a @ op(b) + bias) (exact GELU, as ops/elementwise.h), only with
//         beta == 0; CUDA's few-row GEMM fuses it into its epilogue (one rounding instead
//         of two), elsewhere it is the gelu op after the GEMM.
// dtypes: a and b the same float dtype; c f32 or the same dtype as a; bias f32 or a's.
// Accumulation is f32. CPU: oneDNN (f32, bf16) with primitives cached per shape, or
// OpenBLAS where oneDNN is absent; f16 on the CPU goes through f32. CUDA: cuBLAS.
#pragma once

#include "engine/tensor.h"

namespace parley {

struct MatmulOptions {
  bool trans_b = false;
  float alpha = 1.0f;
  float beta = 0.0f;             // beta != 0 accumulates into c
  const Tensor* bias = nullptr;  // [N]
  bool gelu = false;             // gelu(...) of the result; needs beta == 0
};

void matmul(const Tensor& a, const Tensor& b, Tensor& c, const MatmulOptions& opt = {});

namespace cpu {
void matmul(const Tensor& a, const Tensor& b, Tensor& c, const MatmulOptions& opt);
// Which CPU GEMM library this build uses: "onednn" or "openblas".
const char* gemm_provider();
}  // namespace cpu
namespace cuda {
void matmul(const Tensor& a, const Tensor& b, Tensor& c, const MatmulOptions& opt);
}

}  // namespace parley
