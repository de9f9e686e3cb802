// Attention over a paged KV cache (vLLM's PagedAttention layout, DESIGN.md section 8): the
// keys and values of every sequence live in fixed-size blocks of a shared cache, and each
// batch row names its blocks in a block table; attention reads the blocks in place (no
// gather into a contiguous copy).
//   k_cache, v_cache [n_blocks, block_size, Hkv, D] (one layer)
//   q   [T, Hq, D]: the new tokens of all rows, row after row
//   out [T, Hq, D]
// dtypes: all four the same; f32 on the CPU, f32, f16 or bf16 on CUDA (scores, softmax and
// sums in f32).
// Row r's token j sits at position start_pos + j and sees the row's own positions
// [0, start_pos + j] (causal), or only the last `sliding_window` of them (Gemma's local
// layers). Query head h reads KV head h / (Hq / Hkv) (GQA). Scores, softmax and the
// weighted sum accumulate in f32 in one fixed order per (token, head), so a row's output
// does not depend on the other rows of the batch (batch invariance).
//
// On CUDA the rows travel as PagedTables (below), built once per forward call and shared
// by every layer. One block per (token, KV head) reads the token's visible keys in tiles of
// 32 (a lane per key for the scores, a lane per D / 32 values for the weighted sum), the
// group's query heads together; a row of at most kPagedSplitRowTokens tokens (a decode step,
// a short verify) splits its keys into chunks of kPagedSplitKeys, one block each, merged in
// chunk order by the last block to finish (flash-decoding). The split depends only on the
// token's own position, so a row's output is the same whatever else is in the batch.
//
// paged_kv_write stores the new tokens' keys and values: token t goes to the cache slot
// slots[t] = block * block_size + offset.
#pragma once

#include <cstdint>
#include <span>

#include "engine/pool.h"
#include "engine/tensor.h"

namespace parley {

struct PagedRow {
  int64_t q_begin = 0;    // first token of the row in q / out
  int64_t n_tokens = 0;   // new tokens of the row
  int64_t start_pos = 0;  // position of its first new token (tokens before it are cached)
  std::span<const int32_t> block_table;  // covers positions [0, start_pos + n_tokens)
};

// 128 keys a chunk: a batch-1 decode step at a 512-token context then runs on 5 chunks per KV
// head instead of 3 (H100, bf16, 2026-12-07: Llama-3.1-8B b1 6.65-6.68 -> 6.35 ms a step,
// Qwen3-0.6B b1 1.76-1.79 -> 1.56; 64 about the same, 32 slower; bench/RESULTS.md).
constexpr int64_t kPagedSplitKeys = 128;
// The key chunk of a split token on CUDA: kPagedSplitKeys, or PARLEY_PAGED_SPLIT_KEYS (a
// multiple of 32, read once) to compare chunk sizes. PagedTables::max_splits counts in it.
int64_t paged_split_keys();
// The chunks a split token at `pos` (keys [0, pos]) needs: (pos + 1) / chunk, rounded up.
inline int64_t paged_splits(int64_t pos) { return (pos + paged_split_keys()) / paged_split_keys(); }
constexpr int64_t kPagedSplitRowTokens = 16;
constexpr int64_t kPagedFlashTile = 64;  // query tokens of a long row per tensor-core block

// The rows of one forward call on the attention's device:
//   tokens i32 [T, 3]: per token its position, the offset of its row's block table in
//     `blocks`, and its slot among the split tokens (rows of at most kPagedSplitRowTokens
//     tokens), -1 for tokens of longer rows;
//   blocks i32 [sum of the rows' block-table lengths];
//   tiles i32 [n_tiles, 2]: the rows of more than kPagedSplitRowTokens tokens cut into
//     tiles of kPagedFlashTile tokens from each row's start: (first token, count).
struct PagedTables {
  Tensor tokens, blocks, tiles;
  int64_t n_tiles = 0;
  int64_t split_tokens = 0;  // tokens with a split slot
  int64_t max_splits = 1;    // the most key chunks any split token has (full causal)
};

// Fills `tables` for `rows` with tensors from `host` (staging) and `device` pools; the CPU's
// attention does not need them.
void make_paged_tables(std::span<const PagedRow> rows, Pool& host, Pool& device,
                       PagedTables& tables);

struct PagedAttentionOptions {
  float scale = 0.0f;                   // 0 means 1 / sqrt(D)
  int64_t sliding_window = 0;           // 0: full causal; w: position p sees (p - w, p]
  float softcap = 0.0f;                 // > 0: scores = softcap * tanh(scores / softcap) (Gemma 2)
  const PagedTables* tables = nullptr;  // the rows on the device: required on CUDA
};

void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     std::span<const PagedRow> rows, Tensor& out,
                     const PagedAttentionOptions& opt = {});

// k, v [T, Hkv, D] of the cache's dtype; slots i32 [T] (each < n_blocks * block_size).
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
