// 1-D convolution, as torch.nn.functional.conv1d with groups = 1, dilation = 1:
//   x [B, C_in, L], w [C_out, C_in, K], bias [C_out] (optional)
//   out [B, C_out, L_out], L_out = (L + 2 * padding - K) / stride + 1 (zero padding)
// dtypes: x, w, out the same float dtype; bias f32 or the same. f32 accumulation.
// Options:
//   tokens_in:  x is [B, L, C_in] instead (each position's channels contiguous, as a
//               transformer's rows);
//   tokens_out: out is [B, L_out, C_out] instead;
//   gelu:       out = gelu(conv + bias) (ops/elementwise.h's exact GELU; where CUDA's GEMM
//               takes it in cuBLASLt's epilogue, 16-bit token-major outputs, that is the
//               tanh form, as matmul's gelu).
// CUDA computes a token-major output as one GEMM per batch chunk whose rows are the output
// positions (their input windows gathered into scratch), with the bias and the GELU in the
// GEMM's epilogue; the CPU convolves channel-major and permutes.
#pragma once

#include "engine/tensor.h"

namespace parley {

struct Conv1dOptions {
  int stride = 1;
  int padding = 0;
  const Tensor* bias = nullptr;
  bool tokens_in = false;
  bool tokens_out = false;
  bool gelu = false;
};

int64_t conv1d_out_length(int64_t length, int64_t kernel, const Conv1dOptions& opt);
void conv1d(const Tensor& x, const Tensor& w, Tensor& out, const Conv1dOptions& opt = {});

namespace cpu {
void conv1d(const Tensor& x, const Tensor& w, Tensor& out, const Conv1dOptions& opt);
}
namespace cuda {
void conv1d(const Tensor& x, const Tensor& w, Tensor& out, const Conv1dOptions& opt);
}

}  // namespace parley
