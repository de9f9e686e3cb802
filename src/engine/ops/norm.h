// Normalization over the last dimension D of x [.., D]; out has x's shape and dtype.
//   layer_norm: (x - mean) / sqrt(var + eps) * gamma + beta   (biased variance, as PyTorch)
//   rms_norm:   x / sqrt(mean(x^2) + eps) * gamma
// gamma, beta: [D], f32 or x's dtype. Statistics in f32.
#pragma once

#include "engine/tensor.h"

namespace parley {

void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& out);
void rms_norm(const Tensor& x, const Tensor& gamma, float eps, Tensor& out);

namespace cpu {
void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& out);
void rms_norm(const Tensor& x, const Tensor& gamma, float eps, Tensor& out);
}  // namespace cpu
namespace cuda {
void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& out);
void rms_norm(const Tensor& x, const Tensor& gamma, float eps, Tensor& out);
}  // namespace cuda

}  // namespace parley
