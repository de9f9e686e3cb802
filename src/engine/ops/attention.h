// Scaled dot-product attention, per batch b and head h:
//   out[b,h] = softmax(scale * q[b,h] @ k[b,h]^T + mask) @ v[b,h]
//   q [B, H, Lq, D], k [B, H, Lk, D], v [B, H, Lk, Dv], out [B, H, Lq, Dv]
//   causal: query i sees keys j <= i + (Lk - Lq) (a decoder step over a KV cache of Lk);
//   key_mask (optional): i8 [B, Lk], 0 = padding (never attended), nonzero = valid;
//   key_len (optional): i32 [B], batch b attends to keys [0, key_len[b]) only (values
//   clamped to [0, Lk]); the keys past it are never read (a batch of windows of different
//   lengths in caches of one capacity).
// A query row with no visible key gives zeros. dtypes: q, k, v, out the same float
// dtype; scores and softmax in f32.
#pragma once

#include "engine/tensor.h"

namespace parley {

struct AttentionOptions {
  float scale = 0.0f;  // 0 means 1 / sqrt(D)
  bool causal = false;
  const Tensor* key_mask = nullptr;  // i8 [B, Lk]
  const Tensor* key_len = nullptr;   // i32 [B]; attention() only
  // i32 [B]; attention() only: q's batch item b reads k's and v's item batch_index[b] (rows
  // of a batch over slots of a cache, in any order), so k and v may hold any number of
  // items. key_mask and key_len stay per item of q. Values must lie in [0, k.dim(0)),
  // which only the CPU checks.
  const Tensor* batch_index = nullptr;
  // The caller's promise that k and v (and their batch_index and key_len) are written by no kernel
  // queued since the last point at which stream work was complete, i.e. by none that can
  // still run while this call's kernels start (cross-attention over the audio K/V that
  // encode() wrote before the decoder step; never a KV cache the step itself appends to).
  // CUDA's split kernels then request K/V before waiting for their inputs (q; programmatic
  // dependent launch, engine/cuda/common.cuh). false is always correct; the CPU ignores it.
  // For attention() and attention_tokens(); never with attention_qkv (its k and v are the
  // caller's fresh projection, and its fallback passes opt on to attention()).
  bool kv_static = false;
  // The same promise for keys [0, static_keys) only (with their batch_index): a decoder
  // step's cached positions, written by earlier steps, where the step's own new key is not.
  // CUDA's 16-byte split kernel requests those before waiting. 0: none (kv_static: all).
  int64_t static_keys = 0;
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

// One operand of attention_tokens: `t` [B, L, W] holds H heads of D side by side in the
// columns [col, col + H * D) of every row, and W is the row stride (q of a fused q|k|v
// projection, or one layer's k or v in a buffer of every layer's). For k and v only,
// batch_index (i32 [B] on the same device) makes batch b read t's batch batch_index[b]
// (beam rows in slots of a cache); its values must lie in [0, t.dim(0)), which only the CPU
// checks.
struct TokenHeads {
  const Tensor& t;
  int64_t col = 0;
  const Tensor* batch_index = nullptr;
};

// Attention over token-major operands read in place, with no permutes into heads and back
// (a decoder step over its KV caches):
//   q [B, Lq, Wq]; k [B, Lc, Wk] and v [B, Lc, Wv], of which the first n_keys <= Lc positions
//   are the keys (a cache of capacity Lc); out [B, Lq, H * D] (what an output projection takes).
//   out[b, i, head h] = softmax_j(scale * q[b, i, h] . k[b, j, h]) @ v[b, j, h], j < n_keys
// causal: query i sees keys j <= i + (n_keys - Lq) (the queries are the last Lq positions).
// key_mask is not supported. Same numerics as attention(): f32 scores, softmax and sums;
// no visible key gives zeros. q, k, v, out the same float dtype.
void attention_tokens(TokenHeads q, TokenHeads k, TokenHeads v, int64_t n_keys, int n_head,
                      Tensor& out, const AttentionOptions& opt = {});

namespace cpu {
void attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
               const AttentionOptions& opt);
void attention_tokens(const TokenHeads& q, const TokenHeads& k, const TokenHeads& v, int64_t n_keys,
                      int n_head, Tensor& out, const AttentionOptions& opt);
}  // namespace cpu
namespace cuda {
void attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
               const AttentionOptions& opt);
void attention_tokens(const TokenHeads& q, const TokenHeads& k, const TokenHeads& v, int64_t n_keys,
                      int n_head, Tensor& out, const AttentionOptions& opt);
// Whether attention_qkv has a fused kernel for these arguments, and that kernel.
bool attention_qkv_fused(const Tensor& qkv, int n_head, const Tensor& out,
                         const AttentionOptions& opt);
void attention_qkv(const Tensor& qkv, int n_head, Tensor& out, const AttentionOptions& opt);
}  // namespace cuda

}  // namespace parley
