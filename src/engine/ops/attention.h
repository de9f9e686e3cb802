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

// Self-attention straight from a fused QKV projection, token-major, no permutes around it:
//   qkv [B, L, 3 * H * D]: per position q, k, v side by side, each H heads of D
//       (what a Linear with a [3 * H * D, d] weight produces);
//   out [B, L, H * D]: the heads side by side (what the output projection takes).
// The same function as attention() on the split heads (scale, causal and key_mask too).
// CUDA runs f16/bf16 with D = 64 and neither causal nor key_mask as one flash-style kernel
// (tensor cores, online softmax, no score matrix in memory); everything else, and the
// CPU, splits the heads and calls attention().
void attention_qkv(const Tensor& qkv, int n_head, Tensor& out, const AttentionOptions& opt = {});

namespace cpu {
void attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
               const AttentionOptions& opt);
}
namespace cuda {
void attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
               const AttentionOptions& opt);
// Whether attention_qkv has a fused kernel for these arguments, and that kernel.
bool attention_qkv_fused(const Tensor& qkv, int n_head, const Tensor& out,
                         const AttentionOptions& opt);
void attention_qkv(const Tensor& qkv, int n_head, Tensor& out, const AttentionOptions& opt);
}  // namespace cuda

}  // namespace parley
