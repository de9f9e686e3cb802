// Selection over the last dimension of x [N, V] (float dtypes):
//   argmax: out i32 [N], the first index of the maximum (ties: lowest index, as PyTorch).
//   topk:   values [N, k] (x's dtype) and indices i32 [N, k], sorted by value descending,
//           ties broken by the lower index. 1 <= k <= V.
// NaN is treated as larger than every number (PyTorch's argmax convention).
#pragma once

#include "engine/tensor.h"

namespace parley {

void argmax(const Tensor& x, Tensor& out);
void topk(const Tensor& x, int k, Tensor& values, Tensor& indices);

namespace cpu {
void argmax(const Tensor& x, Tensor& out);
void topk(const Tensor& x, int k, Tensor& values, Tensor& indices);
}  // namespace cpu
namespace cuda {
void argmax(const Tensor& x, Tensor& out);
void topk(const Tensor& x, int k, Tensor& values, Tensor& indices);
}  // namespace cuda

}  // namespace parley
