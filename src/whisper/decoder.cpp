// The Whisper decoder forward pass (WhisperSession::decode). Reference: openai/whisper
// model.py TextDecoder:
//   x = token_embedding(tokens) + positional_embedding[offset : offset + T]
//   per block: x += self_attn(ln(x)) (causal, KV cache); x += cross_attn(ln(x), audio);
//              x += mlp(ln(x))
//   logits = ln(x) @ token_embedding^T
// The self-attention cache keeps K and V token-major, [n_text_ctx, d], so appending T
// tokens is one contiguous copy; each step permutes the valid prefix to [1, H, L, d_head]
// for the attention op (2 * L * d elements per layer, small next to the matmuls).
//
// Batched rows (beam search, best_of; WhisperSession::fork / decode_rows / reorder_rows):
// the initial tokens are decoded once into the session's cache and shared; each row keeps
// its later positions in a slot of a per-layer [rows, n_text_ctx, d] cache, and a step runs
// all rows as one [B, d] batch (one GEMM per weight, cross-attention as B queries of the
// shared audio K/V, self-attention as B batches of the attention op).
#include <cstring>

#include "engine/error.h"
#include "engine/ops/attention.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "engine/ops/matmul.h"
#include "engine/ops/transpose.h"
#include "whisper/decode_graphs.h"
#include "whisper/encoder.h"
#include "whisper/model.h"

namespace parley {
namespace whisper {
namespace {

// x [T, H * d_head] token-major -> out [1, H, T, d_head]
void to_heads(const Tensor& x, int64_t n_head, Tensor& out) {
  const int64_t t = x.dim(0), d_head = x.dim(1) / n_head;
  permute(x.reshape({1, t, n_head, d_head}), {0, 2, 1, 3}, out);
}

Tensor to_heads(Pool& pool, const Tensor& x, int64_t n_head) {
  Tensor heads = pool.alloc({1, n_head, x.dim(0), x.dim(1) / n_head}, x.dtype());
  to_heads(x, n_head, heads);
  return heads;
}

// The first `total` cached positions of `cache` [n_text_ctx, d] as [1, H, total, d_head],
// in a buffer of the cache's full size, so a warm pool serves every step from one block.
Tensor cached_heads(Pool& pool, const Tensor& cache, int64_t total, int64_t n_head) {
  const int64_t d = cache.dim(1);
  Tensor buffer = pool.alloc({cache.numel()}, cache.dtype());
  Tensor heads = buffer.slice0(0, total * d).reshape({1, n_head, total, d / n_head});
  to_heads(cache.slice0(0, total), n_head, heads);
  return heads;
}

struct SelfCache {
  Tensor& k;       // [n_text_ctx, d]
  Tensor& v;       // [n_text_ctx, d]
  int64_t offset;  // positions already cached
};

// x [T, d] += out_proj(causal_self_attention(ln(x))), appending this step's K/V.
void decoder_self_attention(Pool& pool, Tensor& x, const DecoderLayerWeights& l,
                            const SelfCache& cache, int n_head) {
  const int64_t t = x.dim(0), d = x.dim(1), total = cache.offset + t;
  const Tensor attn_in = layer_norm(pool, x, l.self_ln);  // [T, d]
  const Tensor qkv = linear(pool, attn_in, l.self_qkv);   // [T, 3d]
  Tensor parts = pool.alloc({3, t, d}, x.dtype());        // q, k, v token-major
  permute(qkv.reshape({t, 3, d}), {1, 0, 2}, parts);
  cache.k.slice0(cache.offset, total).copy_from(parts.slice0(1, 2).reshape({t, d}));
  cache.v.slice0(cache.offset, total).copy_from(parts.slice0(2, 3).reshape({t, d}));

  const Tensor q = to_heads(pool, parts.slice0(0, 1).reshape({t, d}), n_head);  // [1, H, T, dh]
  const Tensor k = cached_heads(pool, cache.k, total, n_head);                  // [1, H, L, dh]
  const Tensor v = cached_heads(pool, cache.v, total, n_head);                  // [1, H, L, dh]
  Tensor attn = pool.alloc(q.shape(), q.dtype());
  AttentionOptions opt;
  opt.causal = true;
  attention(q, k, v, attn, opt);
  const Tensor merged = merge_heads(pool, attn);  // [T, d]
  linear_residual(merged, l.self_out, x);
}

// x [T, d] += out_proj(cross_attention(ln(x), audio K/V))
void decoder_cross_attention(Pool& pool, Tensor& x, const DecoderLayerWeights& l,
                             const Tensor& cross_kv, int n_head) {
  const Tensor attn_in = layer_norm(pool, x, l.cross_ln);  // [T, d]
  const Tensor q_tok = linear(pool, attn_in, l.cross_q);   // [T, d]
  const Tensor q = to_heads(pool, q_tok, n_head);          // [1, H, T, dh]
  Tensor attn = pool.alloc(q.shape(), q.dtype());
  attention(q, cross_kv.slice0(0, 1), cross_kv.slice0(1, 2), attn);
  const Tensor merged = merge_heads(pool, attn);  // [T, d]
  linear_residual(merged, l.cross_out, x);
}

// Batched self-attention, one new token per row: x [B, d] += out_proj(attn(ln(x))), row b
// seeing the shared positions [0, shared_len) of `shared` and its own [shared_len, total) of
// slot slots[b] in `rows` [capacity, n_text_ctx, d]; this step's K/V go to position offset.
struct RowsSelfCache {
  const Tensor& shared_k;  // [n_text_ctx, d]
  const Tensor& shared_v;
  Tensor& rows_k;  // [capacity, n_text_ctx, d]
  Tensor& rows_v;
  std::span<const int32_t> slots;
  int64_t shared_len;
  int64_t offset;
};

// [B, L, d] (row b: shared positions, then its slot's) as heads [B, H, L, dh], in buffers of
// the largest size so a warm pool serves every step.
Tensor rows_heads(Pool& pool, const Tensor& shared, const Tensor& rows, const RowsSelfCache& c,
                  int64_t n_head) {
  const int64_t b = int64_t(c.slots.size()), n_ctx = shared.dim(0), d = shared.dim(1);
  const int64_t total = c.offset + 1;
  Tensor joined = pool.alloc({b * n_ctx * d}, shared.dtype());
  Tensor joined_3d = joined.slice0(0, b * total * d).reshape({b, total, d});
  for (int64_t r = 0; r < b; ++r) {
    Tensor dst = joined_3d.slice0(r, r + 1).reshape({total, d});
    const Tensor own = rows.slice0(c.slots[size_t(r)], c.slots[size_t(r)] + 1).reshape({n_ctx, d});
    dst.slice0(0, c.shared_len).copy_from(shared.slice0(0, c.shared_len));
    dst.slice0(c.shared_len, total).copy_from(own.slice0(c.shared_len, total));
  }
  Tensor buffer = pool.alloc({b * n_ctx * d}, shared.dtype());
  Tensor heads = buffer.slice0(0, b * total * d).reshape({b, n_head, total, d / n_head});
  permute(joined_3d.reshape({b, total, n_head, d / n_head}), {0, 2, 1, 3}, heads);
  return heads;
}

void rows_self_attention(Pool& pool, Tensor& x, const DecoderLayerWeights& l,
                         const RowsSelfCache& c, int n_head) {
  const int64_t b = x.dim(0), d = x.dim(1), n_ctx = c.shared_k.dim(0), dh = d / n_head;
  const Tensor attn_in = layer_norm(pool, x, l.self_ln);  // [B, d]
  const Tensor qkv = linear(pool, attn_in, l.self_qkv);   // [B, 3d]
  Tensor parts = pool.alloc({3, b, d}, x.dtype());        // q, k, v row-major
  permute(qkv.reshape({b, 3, d}), {1, 0, 2}, parts);
  for (int64_t r = 0; r < b; ++r) {
    const int64_t slot = c.slots[size_t(r)];
    for (int kv = 1; kv <= 2; ++kv) {
      Tensor& cache = kv == 1 ? c.rows_k : c.rows_v;
      cache.slice0(slot, slot + 1)
          .reshape({n_ctx, d})
          .slice0(c.offset, c.offset + 1)
          .copy_from(parts.slice0(kv, kv + 1).reshape({b, d}).slice0(r, r + 1));
    }
  }
  Tensor q = pool.alloc({b, n_head, 1, dh}, x.dtype());  // [B, H, 1, dh]
  permute(parts.slice0(0, 1).reshape({b, 1, n_head, dh}), {0, 2, 1, 3}, q);
  const Tensor k = rows_heads(pool, c.shared_k, c.rows_k, c, n_head);  // [B, H, L, dh]
  const Tensor v = rows_heads(pool, c.shared_v, c.rows_v, c, n_head);  // [B, H, L, dh]
  Tensor attn = pool.alloc(q.shape(), q.dtype());
  attention(q, k, v, attn);  // one query per row sees every cached position
  Tensor merged = pool.alloc({b, d}, x.dtype());
  Tensor merged_4d = merged.reshape({b, 1, n_head, dh});
  permute(attn, {0, 2, 1, 3}, merged_4d);
  linear_residual(merged, l.self_out, x);
}

// Logits f32 [T, n_vocab] on the CPU of the final hidden states x [T, d] (decode_rows; decode()
// keeps its own copy of these steps so the two can change apart).
Tensor logits_of(Pool& pool, Pool& host_pool, const Tensor& x, const WhisperWeights& w,
                 int64_t n_vocab, Device dev, DType dt) {
  const int64_t t = x.dim(0);
  const Tensor out = layer_norm(pool, x, w.decoder_ln);  // [T, d]
  const bool direct = dev == Device::cpu && dt == DType::f32;
  Tensor logits = direct ? host_pool.alloc({t, n_vocab}, DType::f32)
                         : pool.alloc({t, n_vocab}, dt);  // [T, n_vocab]
  MatmulOptions opt;
  opt.trans_b = true;
  matmul(out, w.token_embedding, logits, opt);
  if (direct) return logits;
  Tensor logits_f32 = logits;
  if (dt != DType::f32) {
    logits_f32 = pool.alloc(logits.shape(), DType::f32);
    convert(logits, logits_f32);
  }
  Tensor host = host_pool.alloc(logits.shape(), DType::f32);
  host.copy_from(logits_f32);
  return host;
}

// Token ids on the model's device (decode_rows).
Tensor device_ids(Pool& pool, Pool& host_pool, std::span<const int32_t> tokens, Device dev) {
  const int64_t t = int64_t(tokens.size());
  Tensor ids_host = host_pool.alloc({t}, DType::i32);
  std::memcpy(ids_host.raw(), tokens.data(), tokens.size_bytes());
  if (dev == Device::cpu) return ids_host;
  Tensor ids = pool.alloc({t}, DType::i32);
  ids.copy_from(ids_host);
  return ids;
}

}  // namespace
}  // namespace whisper

void WhisperSession::fork(int n_rows) {
  const WhisperConfig& c = model_->config();
  check_arg(n_rows >= 1, "[whisper] fork: n_rows must be >= 1, got " + std::to_string(n_rows));
  check_arg(encoded_ && n_cached_ > 0, "[whisper] fork: decode the shared tokens first");
  check_arg(!rows_active(), "[whisper] fork: rows are already in use; reset() first");
  if (row_capacity_ < n_rows) {  // once per session and beam size, never in the step loop
    row_cache_.clear();
    for (int i = 0; i < c.n_text_layer; ++i) {
      row_cache_.push_back(
          {Tensor::empty({n_rows, c.n_text_ctx, c.n_text_state}, model_->dtype(), model_->device()),
           Tensor::empty({n_rows, c.n_text_ctx, c.n_text_state}, model_->dtype(),
                         model_->device())});
    }
    row_capacity_ = n_rows;
  }
  n_rows_ = n_rows;
  fork_at_ = n_cached_;
  row_slot_.resize(size_t(n_rows));
  for (int i = 0; i < n_rows; ++i) row_slot_[size_t(i)] = i;
}

void WhisperSession::reorder_rows(std::span<const int32_t> source) {
  check_arg(rows_active(), "[whisper] reorder_rows: no rows; fork() first");
  check_arg(int(source.size()) == n_rows_,
            "[whisper] reorder_rows: " + std::to_string(source.size()) + " sources for " +
                std::to_string(n_rows_) + " rows");
  for (int32_t s : source) {
    check_arg(s >= 0 && s < n_rows_, "[whisper] reorder_rows: source " + std::to_string(s) +
                                         " outside [0, " + std::to_string(n_rows_) + ")");
  }
  // The first successor of a row takes its slot as it is; a second one gets a free slot
  // (one no successor needs) and a copy of the row's own positions.
  std::vector<char> taken(size_t(row_capacity_), 0);
  std::vector<int32_t> next(source.size(), -1);
  for (size_t i = 0; i < source.size(); ++i) {
    const int32_t slot = row_slot_[size_t(source[i])];
    if (!taken[size_t(slot)]) {
      taken[size_t(slot)] = 1;
      next[i] = slot;
    }
  }
  const WhisperConfig& c = model_->config();
  const int64_t d = c.n_text_state;
  int32_t free_slot = 0;
  for (size_t i = 0; i < source.size(); ++i) {
    if (next[i] >= 0) continue;
    while (taken[size_t(free_slot)]) ++free_slot;
    taken[size_t(free_slot)] = 1;
    next[i] = free_slot;
    const int32_t from = row_slot_[size_t(source[i])];
    if (n_cached_ > fork_at_) {
      for (RowCache& rc : row_cache_) {
        for (Tensor* t : {&rc.k, &rc.v}) {
          const Tensor src = t->slice0(from, from + 1).reshape({c.n_text_ctx, d});
          t->slice0(free_slot, free_slot + 1)
              .reshape({c.n_text_ctx, d})
              .slice0(fork_at_, n_cached_)
              .copy_from(src.slice0(fork_at_, n_cached_));
        }
      }
    }
  }
  row_slot_ = std::move(next);
}

Tensor WhisperSession::decode_rows(std::span<const int32_t> tokens) {
  using namespace whisper;
  g_decoder_runs.fetch_add(1, std::memory_order_relaxed);
  const WhisperConfig& c = model_->config();
  const WhisperWeights& w = model_->weights();
  check_arg(rows_active(), "[whisper] decode_rows: no rows; fork() first");
  const int64_t b = int64_t(tokens.size()), d = c.n_text_state, offset = n_cached_;
  check_arg(b == n_rows_, "[whisper] decode_rows: " + std::to_string(b) + " tokens for " +
                              std::to_string(n_rows_) + " rows");
  check_arg(offset + 1 <= c.n_text_ctx, "[whisper] decode_rows: the text context of " +
                                            std::to_string(c.n_text_ctx) + " is full");
  for (int32_t id : tokens)
    check_arg(id >= 0 && id < c.n_vocab, "[whisper] decode_rows: token id " + std::to_string(id) +
                                             " outside [0, " + std::to_string(c.n_vocab) + ")");
  const DType dt = model_->dtype();
  const Device dev = model_->device();

  const Tensor ids = device_ids(pool_, host_pool_, tokens, dev);
  Tensor x = pool_.alloc({b, d}, dt);  // [B, d], every row at position `offset`
  embedding(w.token_embedding, ids, x);
  const Tensor position = w.decoder_positions.slice0(offset, offset + 1);
  for (int64_t r = 0; r < b; ++r) {
    Tensor row = x.slice0(r, r + 1);
    add(row, position, row);
  }
  for (size_t i = 0; i < cache_.size(); ++i) {
    const DecoderLayerWeights& layer = w.decoder_layers[i];
    rows_self_attention(pool_, x, layer,
                        {cache_[i].self_k, cache_[i].self_v, row_cache_[i].k, row_cache_[i].v,
                         row_slot_, fork_at_, offset},
                        c.n_text_head);
    // The rows are B queries of the same audio: one attention call, no causal mask.
    decoder_cross_attention(pool_, x, layer, cache_[i].cross_kv, c.n_text_head);
    mlp_block(pool_, x, layer.mlp_ln, layer.fc1, layer.fc2);
  }
  n_cached_ = int(offset + 1);
  return logits_of(pool_, host_pool_, x, w, c.n_vocab, dev, dt);
}

Tensor WhisperSession::decode(std::span<const int32_t> tokens) {
  using namespace whisper;
  g_decoder_runs.fetch_add(1, std::memory_order_relaxed);
  const WhisperConfig& c = model_->config();
  const WhisperWeights& w = model_->weights();
  check_arg(encoded_, "[whisper] decode: call encode() first");
  const int64_t t = int64_t(tokens.size()), d = c.n_text_state, offset = n_cached_;
  check_arg(t > 0, "[whisper] decode: no tokens");
  check_arg(offset + t <= c.n_text_ctx,
            "[whisper] decode: " + std::to_string(offset) + " cached + " + std::to_string(t) +
                " new tokens exceed the text context of " + std::to_string(c.n_text_ctx));
  for (int32_t id : tokens)
    check_arg(id >= 0 && id < c.n_vocab, "[whisper] decode: token id " + std::to_string(id) +
                                             " outside [0, " + std::to_string(c.n_vocab) + ")");
  check_arg(!rows_active(), "[whisper] decode: rows are in use (fork); use decode_rows");
  n_rows_ = 0;  // rows of an earlier window end here
  const DType dt = model_->dtype();
  const Device dev = model_->device();

  // A single-token step on CUDA replays a captured graph of the whole forward pass
  // (decode_graphs.h); its token id then lives in the graphs' fixed device buffer.
  const bool graphed = graphs_ && t == 1;
  Tensor ids_host = host_pool_.alloc({t}, DType::i32);
  std::memcpy(ids_host.raw(), tokens.data(), tokens.size_bytes());
  Tensor ids = ids_host;
  if (dev != Device::cpu) {
    ids = graphed ? graphs_->token() : pool_.alloc({t}, DType::i32);
    ids.copy_from(ids_host);
  }
  const bool direct = dev == Device::cpu;

  // Device work only from here to the logits (no host copies: it may be captured).
  auto forward = [&]() -> Tensor {
    Tensor x = pool_.alloc({t, d}, dt);  // [T, d]
    embedding(w.token_embedding, ids, x);
    add(x, w.decoder_positions.slice0(offset, offset + t), x);

    for (size_t i = 0; i < cache_.size(); ++i) {
      const DecoderLayerWeights& layer = w.decoder_layers[i];
      decoder_self_attention(pool_, x, layer, {cache_[i].self_k, cache_[i].self_v, offset},
                             c.n_text_head);
      decoder_cross_attention(pool_, x, layer, cache_[i].cross_kv, c.n_text_head);
      mlp_block(pool_, x, layer.mlp_ln, layer.fc1, layer.fc2);
    }

    const Tensor out = layer_norm(pool_, x, w.decoder_ln);  // [T, d]
    // Logits come out of the GEMM in f32 whatever the weights' dtype (f32 accumulation):
    // rounding them to f16/bf16 would flip argmaxes between near-equal candidates.
    Tensor logits = direct ? host_pool_.alloc({t, c.n_vocab}, DType::f32)
                           : pool_.alloc({t, c.n_vocab}, DType::f32);  // [T, n_vocab]
    MatmulOptions opt;
    opt.trans_b = true;
    matmul(out, w.token_embedding, logits, opt);
    return logits;
  };
  const Tensor logits = graphed ? graphs_->step(int(offset), forward) : forward();
  n_cached_ = int(offset + t);
  if (direct) return logits;
  Tensor host = host_pool_.alloc(logits.shape(), DType::f32);
  host.copy_from(logits);
  return host;
}

}  // namespace parley
