// Scaled dot-product attention, per batch b and head h:
//   out[b,h] = softmax(scale * q[b,h] @ k[b,h]^T + mask) @ v[b,h]
//   q [B, H, Lq, D], k [B, H, Lk, D], v [B, H, Lk, Dv], out [B, H, Lq, Dv]
//   causal: query i sees keys j <= i + (Lk - Lq) (a decoder step over a KV cache of Lk);
//   key_mask (optional): i8 [B, Lk], 0 = padding (never attended), nonzero = valid.
// A query row with no visible key gives zeros. dtypes: q, k, v, out the same float
// dtype; scores and softmax in f32.
#pragma once

#include "engine/tensor.h"

namespace parley {

struct AttentionOptions {
  float scale = 0.0f;  // 0 means 1 / sqrt(D)
  bool causal = false;
  const Tensor* key_mask = nullptr;  // i8 [B, Lk]
};

void attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
               const AttentionOptions& opt = {});

namespace cpu {
void attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
               const AttentionOptions& opt);
}
namespace cuda {
void attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
               const AttentionOptions& opt);
}

}  // namespace parley
