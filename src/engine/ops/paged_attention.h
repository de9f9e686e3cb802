// Attention over a paged KV cache (vLLM's PagedAttention layout, DESIGN.md section 8): the
// keys and values of every sequence live in fixed-size blocks of a shared cache, and each
// batch row names its blocks in a block table; attention reads the blocks in place (no
// gather into a contiguous copy).
//   k_cache, v_cache [n_blocks, block_size, Hkv, D] f32 (one layer)
//   q   [T, Hq, D] f32: the new tokens of all rows, row after row
//   out [T, Hq, D] f32
// Row r's token j sits at position start_pos + j and sees the row's own positions
// [0, start_pos + j] (causal), or only the last `sliding_window` of them (Gemma's local
// layers). Query head h reads KV head h / (Hq / Hkv) (GQA). Scores, softmax and the
// weighted sum accumulate in f32 in one fixed order per (token, head), so a row's output
// does not depend on the other rows of the batch (batch invariance).
//
// paged_kv_write stores the new tokens' keys and values: token t goes to the cache slot
// slots[t] = block * block_size + offset.
#pragma once

#include <cstdint>
#include <span>

#include "engine/tensor.h"

namespace parley {

struct PagedRow {
  int64_t q_begin = 0;    // first token of the row in q / out
  int64_t n_tokens = 0;   // new tokens of the row
  int64_t start_pos = 0;  // position of its first new token (tokens before it are cached)
  std::span<const int32_t> block_table;  // covers positions [0, start_pos + n_tokens)
};

struct PagedAttentionOptions {
  float scale = 0.0f;          // 0 means 1 / sqrt(D)
  int64_t sliding_window = 0;  // 0: full causal; w: position p sees (p - w, p]
  float softcap = 0.0f;        // > 0: scores = softcap * tanh(scores / softcap) (Gemma 2)
};

void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     std::span<const PagedRow> rows, Tensor& out,
                     const PagedAttentionOptions& opt = {});

// k, v [T, Hkv, D] f32; slots i32 [T] (each < n_blocks * block_size).
void paged_kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_cache,
                    Tensor& v_cache);

namespace cpu {
void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     std::span<const PagedRow> rows, Tensor& out, const PagedAttentionOptions& opt);
void paged_kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_cache,
                    Tensor& v_cache);
}  // namespace cpu
namespace cuda {
void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     std::span<const PagedRow> rows, Tensor& out, const PagedAttentionOptions& opt);
void paged_kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_cache,
                    Tensor& v_cache);
}  // namespace cuda

}  // namespace parley
