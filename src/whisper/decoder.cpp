// The Whisper decoder forward pass (WhisperSession::decode). Reference: openai/whisper
// model.py TextDecoder:
//   x = token_embedding(tokens) + positional_embedding[offset : offset + T]
//   per block: x += self_attn(ln(x)) (causal, KV cache); x += cross_attn(ln(x), audio);
//              x += mlp(ln(x))
//   logits = ln(x) @ token_embedding^T
// The self-attention cache keeps K and V token-major, [n_text_ctx, d], so appending T
// tokens is one contiguous copy; each step permutes the valid prefix to [1, H, L, d_head]
// for the attention op (2 * L * d elements per layer, small next to the matmuls).
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

}  // namespace
}  // namespace whisper

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
