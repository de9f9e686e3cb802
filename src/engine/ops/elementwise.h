// Element-wise ops over float tensors (f32, f16, bf16; compute in f32).
//   add/mul: out = a (+|*) b, where b has a's shape or the shape of a's trailing dims
//            (a bias [N] over [.., N]; [T, D] over [B, T, D]). out may alias a.
//   scale:   out = a * s
//   gelu:    out = 0.5 x (1 + erf(x / sqrt 2))   (exact, as PyTorch's default)
//   silu:    out = x / (1 + exp(-x))
//   convert: out = a with out's dtype (any float <-> float; i32 <-> i32, i8 <-> i8)
// All outputs have a's shape; in-place (out is a) is allowed.
#pragma once

#include "engine/tensor.h"

namespace parley {

void add(const Tensor& a, const Tensor& b, Tensor& out);
void mul(const Tensor& a, const Tensor& b, Tensor& out);
void scale(const Tensor& a, float s, Tensor& out);
void gelu(const Tensor& x, Tensor& out);
void silu(const Tensor& x, Tensor& out);
void convert(const Tensor& a, Tensor& out);

enum class BinaryOp { add, mul };
enum class UnaryOp { gelu, silu };

namespace cpu {
void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out);
void scale(const Tensor& a, float s, Tensor& out);
void unary(UnaryOp op, const Tensor& x, Tensor& out);
void convert(const Tensor& a, Tensor& out);
}  // namespace cpu
namespace cuda {
void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out);
void scale(const Tensor& a, float s, Tensor& out);
void unary(UnaryOp op, const Tensor& x, Tensor& out);
void convert(const Tensor& a, Tensor& out);
}  // namespace cuda

}  // namespace parley
