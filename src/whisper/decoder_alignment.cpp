// WhisperSession::cross_attention_weights: the decoder forward that openai/whisper's
// find_alignment (whisper/timing.py) runs with forward hooks on every cross-attention
// block: the whole token sequence at once from position 0, no KV cache, and the raw
// scaled q k^T of each block kept (`outs[-1]`, with SDPA disabled). Separate from
// WhisperSession::decode so the decoding hot path keeps its fused attention op; this pass
// runs once per window with word timestamps on.
//
// Scaling: the reference multiplies q and k by d_head^-0.25 each; we scale q k^T by
// 1 / sqrt(d_head) once (the same value up to rounding, as the rest of the parity path).
#include <cmath>
#include <cstring>

#include "engine/error.h"
#include "engine/ops/attention.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "engine/ops/matmul.h"
#include "engine/ops/softmax.h"
#include "whisper/encoder.h"
#include "whisper/model.h"

namespace parley {
namespace whisper {
namespace {

// x [T, d] += out_proj(causal_self_attention(ln(x))) over the T tokens only.
void full_self_attention(Pool& pool, Tensor& x, const DecoderLayerWeights& l, int n_head) {
  const Tensor attn_in = layer_norm(pool, x, l.self_ln);   // [T, d]
  const Tensor qkv = linear(pool, attn_in, l.self_qkv);    // [T, 3d]
  const Tensor heads = split_heads(pool, qkv, 3, n_head);  // [3, H, T, d_head]
  const Tensor q = heads.slice0(0, 1), k = heads.slice0(1, 2), v = heads.slice0(2, 3);
  Tensor attn = pool.alloc(q.shape(), q.dtype());  // [1, H, T, d_head]
  AttentionOptions opt;
  opt.causal = true;
  attention(q, k, v, attn, opt);
  const Tensor merged = merge_heads(pool, attn);  // [T, d]
  linear_residual(merged, l.self_out, x);
}

// x [T, d] += out_proj(cross_attention(ln(x), audio K/V)), as q k^T, softmax, @ v; the
// scores [H, T, n_audio_ctx] (before the softmax) are returned for the caller to keep.
// The layer's K/V are projected from the audio features again here, split into heads
// [2, H, n_audio_ctx, d_head]: the decoding path keeps them token-major for its fused
// attention, and this pass runs once per window.
Tensor cross_attention_keep_scores(Pool& pool, Tensor& x, const DecoderLayerWeights& l,
                                   const Tensor& audio, int n_head) {
  const Tensor kv_tok = linear(pool, audio, l.cross_kv);         // [n_audio_ctx, 2d]
  const Tensor cross_kv = split_heads(pool, kv_tok, 2, n_head);  // [2, H, n_audio_ctx, dh]
  const int64_t t = x.dim(0), h = n_head, tk = cross_kv.dim(2), dh = cross_kv.dim(3);
  const Tensor attn_in = layer_norm(pool, x, l.cross_ln);  // [T, d]
  const Tensor q_tok = linear(pool, attn_in, l.cross_q);   // [T, d]
  const Tensor q = split_heads(pool, q_tok, 1, n_head);    // [1, H, T, dh]
  Tensor scores = pool.alloc({h, t, tk}, x.dtype());       // [H, T, n_audio_ctx]
  MatmulOptions qk;
  qk.trans_b = true;
  qk.alpha = 1.0f / std::sqrt(float(dh));
  matmul(q.reshape({h, t, dh}), cross_kv.slice0(0, 1).reshape({h, tk, dh}), scores, qk);
  Tensor probs = pool.alloc(scores.shape(), scores.dtype());
  softmax(scores, probs);
  Tensor attn = pool.alloc({1, h, t, dh}, x.dtype());  // [1, H, T, dh]
  Tensor attn_3d = attn.reshape({h, t, dh});
  matmul(probs, cross_kv.slice0(1, 2).reshape({h, tk, dh}), attn_3d);
  const Tensor merged = merge_heads(pool, attn);  // [T, d]
  linear_residual(merged, l.cross_out, x);
  return scores;
}

// src (any float dtype, any device) -> dst f32 on the CPU, same number of elements.
void to_host_f32(Pool& pool, const Tensor& src, Tensor dst) {
  Tensor f32 = src;
  if (src.dtype() != DType::f32) {
    f32 = pool.alloc(src.shape(), DType::f32);
    convert(src, f32);
  }
  dst.copy_from(f32.reshape(dst.shape()));
}

}  // namespace
}  // namespace whisper

CrossAttentionWeights WhisperSession::cross_attention_weights(
    std::span<const int32_t> tokens, std::span<const std::pair<int, int>> heads) {
  using namespace whisper;
  const WhisperConfig& c = model_->config();
  const WhisperWeights& w = model_->weights();
  check_arg(encoded_, "[whisper] cross_attention_weights: call encode() first");
  const int64_t t = int64_t(tokens.size()), d = c.n_text_state;
  check_arg(t > 0 && t <= c.n_text_ctx, "[whisper] cross_attention_weights: " + std::to_string(t) +
                                            " tokens, expected 1.." + std::to_string(c.n_text_ctx));
  for (int32_t id : tokens)
    check_arg(id >= 0 && id < c.n_vocab, "[whisper] cross_attention_weights: token id " +
                                             std::to_string(id) + " outside [0, " +
                                             std::to_string(c.n_vocab) + ")");
  for (const auto& [layer, head] : heads)
    check_arg(layer >= 0 && layer < c.n_text_layer && head >= 0 && head < c.n_text_head,
              "[whisper] cross_attention_weights: head (" + std::to_string(layer) + ", " +
                  std::to_string(head) + ") outside " + std::to_string(c.n_text_layer) +
                  " layers x " + std::to_string(c.n_text_head) + " heads");
  n_cached_ = 0;  // this pass writes no cache, but what was cached no longer follows
  const DType dt = model_->dtype();
  const Device dev = model_->device();

  Tensor ids = Tensor::empty({t}, DType::i32, Device::cpu);
  std::memcpy(ids.raw(), tokens.data(), tokens.size_bytes());
  if (dev != Device::cpu) {
    Tensor on_dev = pool_.alloc({t}, DType::i32);
    on_dev.copy_from(ids);
    ids = on_dev;
  }
  Tensor x = pool_.alloc({t, d}, dt);  // [T, d]
  embedding(w.token_embedding, ids, x);
  add(x, w.decoder_positions.slice0(0, t), x);

  CrossAttentionWeights out;
  out.qk = Tensor::empty({int64_t(heads.size()), t, c.n_audio_ctx}, DType::f32, Device::cpu);
  for (size_t i = 0; i < cache_.size(); ++i) {
    const DecoderLayerWeights& layer = w.decoder_layers[i];
    full_self_attention(pool_, x, layer, c.n_text_head);
    const Tensor scores =
        cross_attention_keep_scores(pool_, x, layer, audio_features_, c.n_text_head);
    for (size_t k = 0; k < heads.size(); ++k) {
      if (heads[k].first != int(i)) continue;
      const int64_t h = heads[k].second;
      to_host_f32(pool_, scores.slice0(h, h + 1), out.qk.slice0(int64_t(k), int64_t(k) + 1));
    }
    mlp_block(pool_, x, layer.mlp_ln, layer.fc1, layer.fc2);
  }

  const Tensor normed = layer_norm(pool_, x, w.decoder_ln);  // [T, d]
  // f32 out of the GEMM, as decode(): 16-bit logits would flip argmaxes.
  Tensor logits = pool_.alloc({t, c.n_vocab}, DType::f32);  // [T, n_vocab]
  MatmulOptions opt;
  opt.trans_b = true;
  matmul(normed, w.token_embedding, logits, opt);
  out.logits = Tensor::empty({t, c.n_vocab}, DType::f32, Device::cpu);
  to_host_f32(pool_, logits, out.logits);
  return out;
}

}  // namespace parley
