// 1-D convolution, as torch.nn.functional.conv1d with groups = 1, dilation = 1:
//   x [B, C_in, L], w [C_out, C_in, K], bias [C_out] (optional)
//   out [B, C_out, L_out], L_out = (L + 2 * padding - K) / stride + 1 (zero padding)
// dtypes: x, w, out the same float dtype; bias f32 or the same. f32 accumulation.
#pragma once

#include "engine/tensor.h"

namespace parley {

struct Conv1dOptions {
  int stride = 1;
  int padding = 0;
  const Tensor* bias = nullptr;
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
