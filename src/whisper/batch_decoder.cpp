// The decoder side of WhisperBatchSession (batch_session.h): prefill of one slot's initial
// tokens, and the batched step (one token per listed slot, each at its own position). The
// math is the decoder's (decoder.cpp; openai/whisper model.py TextDecoder) in the same op
// order, so a slot's logits equal a WhisperSession's for the same audio and tokens up to the
// GEMM library's blocking for a different number of rows:
//   x = token_embedding(token) + positional_embedding[position of its slot]   [n, d]
//   per block: x += self_attn(ln(x)) over the slot's cached positions (key_mask);
//              x += cross_attn(ln(x), the slot's audio K/V); x += mlp(ln(x))
//   logits = ln(x) @ token_embedding^T                                      [n, n_vocab]
// Every weight is one GEMM over the n rows; the new K/V of all rows go into the caches with
// one scatter_rows per layer; attention runs per run of consecutive slots.
#include <algorithm>
#include <cstring>

#include "engine/error.h"
#include "engine/ops/attention.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "engine/ops/matmul.h"
#include "engine/ops/reduce.h"
#include "engine/ops/scatter_rows.h"
#include "engine/ops/transpose.h"
#include "engine/step_graphs.h"
#include "whisper/batch_session.h"
#include "whisper/encoder.h"
#include "whisper/logit_filters.h"
#include "whisper/model.h"

namespace parley {
namespace {

// `logits` on the CPU (itself when it is there already).
Tensor host_logits(Pool& host_pool, const Tensor& logits) {
  if (!logits.is_cuda()) return logits;
  Tensor host = host_pool.alloc(logits.shape(), DType::f32);
  host.copy_from(logits);
  return host;
}

// The rows of x [n * T, d] whose logits a prefill returns: sequence i's positions
// rows[i * r, (i + 1) * r) of its T (r = rows.size() / n; all of x when `rows` is empty), as
// [rows.size(), d], gathered before the vocabulary GEMM.
Tensor selected_rows(Pool& pool, Pool& host_pool, const Tensor& x, int64_t n, int64_t t,
                     std::span<const int64_t> rows, Device dev) {
  if (rows.empty()) return x;
  const int64_t r = int64_t(rows.size()) / n;
  std::vector<int32_t> ids;
  ids.reserve(rows.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < r; ++j) ids.push_back(int32_t(i * t + rows[size_t(i * r + j)]));
  Tensor out = pool.alloc({int64_t(ids.size()), x.dim(1)}, x.dtype());
  embedding(x, whisper::ids_on_device(pool, host_pool, ids, dev), out);  // a row gather
  return out;
}

// Checked before the pass, so a bad row changes no cache.
void check_rows(std::span<const int64_t> rows, int64_t t) {
  for (int64_t r : rows) {
    check_arg(r >= 0 && r < t, "[whisper] batch prefill: logits row " + std::to_string(r) +
                                   " outside [0, " + std::to_string(t) + ")");
  }
}

}  // namespace

Tensor WhisperBatchSession::prefill(int slot, std::span<const int32_t> tokens,
                                    std::span<const int64_t> rows) {
  using namespace whisper;
  g_decoder_runs.fetch_add(1, std::memory_order_relaxed);
  const WhisperConfig& c = model_->config();
  const WhisperWeights& w = model_->weights();
  check_slot(slot, "prefill");
  check_arg(audio_ctx(slot) > 0, "[whisper] batch prefill: slot " + std::to_string(slot) +
                                     " has no audio; encode first");
  const int64_t t = int64_t(tokens.size()), d = c.n_text_state, offset = n_cached_[size_t(slot)];
  const int64_t h = c.n_text_head, dh = d / h, total = offset + t;
  check_arg(t > 0, "[whisper] batch prefill: no tokens");
  check_arg(total <= c.n_text_ctx, "[whisper] batch prefill: slot " + std::to_string(slot) + ": " +
                                       std::to_string(offset) + " cached + " + std::to_string(t) +
                                       " new tokens exceed the text context of " +
                                       std::to_string(c.n_text_ctx));
  check_token_ids(tokens, c.n_vocab, "[whisper] batch prefill");
  check_rows(rows, t);
  const DType dt = model_->dtype();
  const Device dev = model_->device();
  // A short window's audio length, for every layer's cross-attention key_len (none: full).
  const int32_t audio = int32_t(audio_ctx(slot));
  const Tensor audio_len = audio < c.n_audio_ctx
                               ? ids_on_device(pool_, host_pool_, std::span(&audio, 1), dev)
                               : Tensor();

  const Tensor ids = ids_on_device(pool_, host_pool_, tokens, dev);
  Tensor x = pool_.alloc({t, d}, dt);  // [T, d]
  embedding(w.token_embedding, ids, x);
  add(x, w.decoder_positions.slice0(offset, total), x);

  for (size_t i = 0; i < cache_.size(); ++i) {
    const DecoderLayerWeights& l = w.decoder_layers[i];
    LayerCache& lc = cache_[i];
    {  // causal self-attention over the slot's positions [0, total)
      const Tensor attn_in = layer_norm(pool_, x, l.self_ln);  // [T, d]
      const Tensor qkv = linear(pool_, attn_in, l.self_qkv);   // [T, 3d]
      Tensor parts = pool_.alloc({3, h, t, dh}, dt);           // q, k, v head-major
      permute(qkv.reshape({t, 3, h, dh}), {1, 2, 0, 3}, parts);
      write_positions(lc.self_k, slot, offset, parts.slice0(1, 2).reshape({h, t, dh}));
      write_positions(lc.self_v, slot, offset, parts.slice0(2, 3).reshape({h, t, dh}));
      // The slot's cached prefix, contiguous [1, H, total, dh] (once per window).
      Tensor k = pool_.alloc({1, h, total, dh}, dt);
      Tensor v = pool_.alloc({1, h, total, dh}, dt);
      const int64_t n_ctx = c.n_text_ctx;
      for (int64_t j = 0; j < h; ++j) {
        const int64_t at = (int64_t(slot) * h + j) * n_ctx;
        k.reshape({h * total, dh})
            .slice0(j * total, (j + 1) * total)
            .copy_from(lc.self_k.reshape({-1, dh}).slice0(at, at + total));
        v.reshape({h * total, dh})
            .slice0(j * total, (j + 1) * total)
            .copy_from(lc.self_v.reshape({-1, dh}).slice0(at, at + total));
      }
      const Tensor q = parts.slice0(0, 1);  // [1, H, T, dh]
      Tensor attn = pool_.alloc(q.shape(), dt);
      AttentionOptions opt;
      opt.causal = true;
      attention(q, k, v, attn, opt);
      const Tensor merged = merge_heads(pool_, attn);  // [T, d]
      linear_residual(merged, l.self_out, x);
    }
    {  // cross-attention over the slot's audio
      const Tensor attn_in = layer_norm(pool_, x, l.cross_ln);  // [T, d]
      const Tensor q_tok = linear(pool_, attn_in, l.cross_q);   // [T, d]
      Tensor q = pool_.alloc({1, h, t, dh}, dt);
      permute(q_tok.reshape({1, t, h, dh}), {0, 2, 1, 3}, q);
      const int64_t n_audio = c.n_audio_ctx;
      const Tensor kv = lc.cross_kv.reshape({2 * int64_t(n_slots_), h, n_audio, dh});
      Tensor attn = pool_.alloc(q.shape(), dt);
      AttentionOptions opt;
      opt.key_len = audio_len.defined() ? &audio_len : nullptr;
      attention(q, kv.slice0(slot, slot + 1), kv.slice0(n_slots_ + slot, n_slots_ + slot + 1), attn,
                opt);
      const Tensor merged = merge_heads(pool_, attn);  // [T, d]
      linear_residual(merged, l.cross_out, x);
    }
    mlp_block(pool_, x, l.mlp_ln, l.fc1, l.fc2);
  }
  n_cached_[size_t(slot)] = int(total);
  const Tensor out = selected_rows(pool_, host_pool_, x, 1, t, rows, dev);
  return host_logits(host_pool_, final_logits(pool_, out, w, c.n_vocab));
}

Tensor WhisperBatchSession::prefill_batch(std::span<const int32_t> slots,
                                          std::span<const int32_t> tokens,
                                          std::span<const int64_t> rows) {
  const int64_t n = int64_t(slots.size());
  check_arg(n >= 1, "[whisper] batch prefill: no slots");
  check_arg(tokens.size() % slots.size() == 0 && !tokens.empty(),
            "[whisper] batch prefill: " + std::to_string(tokens.size()) +
                " tokens are not the same positive number for each of " + std::to_string(n) +
                " slots");
  const int64_t t = int64_t(tokens.size()) / n;
  check_rows(rows, t);
  const std::vector<int32_t> lengths(static_cast<size_t>(n), int32_t(t));
  std::vector<int64_t> per_slot;
  for (int64_t i = 0; i < n; ++i) {
    if (rows.empty()) {
      for (int64_t r = 0; r < t; ++r) per_slot.push_back(r);
    } else {
      per_slot.insert(per_slot.end(), rows.begin(), rows.end());
    }
  }
  return prefill_ragged(slots, tokens, lengths, per_slot);
}

Tensor WhisperBatchSession::prefill_ragged(std::span<const int32_t> slots,
                                           std::span<const int32_t> tokens,
                                           std::span<const int32_t> lengths,
                                           std::span<const int64_t> rows) {
  using namespace whisper;
  g_decoder_runs.fetch_add(1, std::memory_order_relaxed);
  const WhisperConfig& c = model_->config();
  const WhisperWeights& w = model_->weights();
  const int64_t n = int64_t(slots.size()), d = c.n_text_state, h = c.n_text_head, dh = d / h;
  const int64_t n_ctx = c.n_text_ctx, n_audio = c.n_audio_ctx;
  check_arg(n >= 1, "[whisper] batch prefill: no slots");
  check_arg(lengths.size() == slots.size(),
            "[whisper] batch prefill: " + std::to_string(lengths.size()) + " lengths for " +
                std::to_string(n) + " slots");
  int64_t t = 0, sum = 0;
  for (int32_t len : lengths) {
    check_arg(len >= 1 && len <= n_ctx, "[whisper] batch prefill: a sequence of " +
                                            std::to_string(len) + " tokens (1 to " +
                                            std::to_string(n_ctx) + " fit the text context)");
    t = std::max<int64_t>(t, len);
    sum += len;
  }
  check_arg(sum == int64_t(tokens.size()), "[whisper] batch prefill: the lengths add up to " +
                                               std::to_string(sum) + ", not the " +
                                               std::to_string(tokens.size()) + " tokens given");
  check_arg(!rows.empty() && rows.size() % slots.size() == 0,
            "[whisper] batch prefill: " + std::to_string(rows.size()) +
                " logits rows are not the same positive number for each of " + std::to_string(n) +
                " slots");
  const int64_t per = int64_t(rows.size()) / n;
  for (int64_t i = 0; i < n; ++i)
    check_rows(rows.subspan(size_t(i * per), size_t(per)), lengths[size_t(i)]);
  check_token_ids(tokens, c.n_vocab, "[whisper] batch prefill");
  for (int32_t s : slots) {
    check_slot(s, "prefill");
    check_arg(audio_ctx(s) > 0,
              "[whisper] batch prefill: slot " + std::to_string(s) + " has no audio; encode first");
    check_arg(n_cached_[size_t(s)] == 0, "[whisper] batch prefill: slot " + std::to_string(s) +
                                             " has cached tokens; prefill_batch takes fresh slots");
    check_arg(std::count(slots.begin(), slots.end(), s) == 1,
              "[whisper] batch prefill: slot " + std::to_string(s) + " listed twice");
  }
  const DType dt = model_->dtype();
  const Device dev = model_->device();
  // Each sequence's slot and audio length, for the cross-attention's batch_index and key_len.
  step_ids_.assign(slots.begin(), slots.end());
  for (int32_t s : slots) step_ids_.push_back(audio_len_[size_t(s)]);
  const Tensor slot_ids = ids_on_device(pool_, host_pool_, step_ids_, dev);
  const Tensor slot_index = slot_ids.slice0(0, n), audio_len = slot_ids.slice0(n, 2 * n);

  // [n, T] tokens, each sequence padded with its own last token.
  std::vector<int32_t> padded(static_cast<size_t>(n * t));
  for (int64_t i = 0, at = 0; i < n; at += lengths[size_t(i)], ++i)
    for (int64_t j = 0; j < t; ++j)
      padded[size_t(i * t + j)] = tokens[size_t(at + std::min<int64_t>(j, lengths[size_t(i)] - 1))];
  const Tensor ids = ids_on_device(pool_, host_pool_, padded, dev);
  Tensor x = pool_.alloc({n * t, d}, dt);  // [n * T, d]
  embedding(w.token_embedding, ids, x);
  Tensor x_3d = x.reshape({n, t, d});
  add(x_3d, w.decoder_positions.slice0(0, t), x_3d);  // every slot from position 0
  std::vector<int32_t> kv_rows(size_t(n * h * t));    // cache rows of the new K/V
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < h; ++j)
      for (int64_t i = 0; i < t; ++i)
        kv_rows[size_t((r * h + j) * t + i)] = int32_t((slots[size_t(r)] * h + j) * n_ctx + i);
  const Tensor kv_ids = ids_on_device(pool_, host_pool_, kv_rows, dev);
  for (size_t i = 0; i < cache_.size(); ++i) {
    const DecoderLayerWeights& l = w.decoder_layers[i];
    LayerCache& lc = cache_[i];
    {  // causal self-attention: with nothing cached the keys are this pass's own
      const Tensor attn_in = layer_norm(pool_, x, l.self_ln);  // [n * T, d]
      const Tensor qkv = linear(pool_, attn_in, l.self_qkv);   // [n * T, 3d]
      Tensor parts = pool_.alloc({3, n, h, t, dh}, dt);        // q, k, v head-major
      permute(qkv.reshape({n, t, 3, h, dh}), {2, 0, 3, 1, 4}, parts);
      Tensor k_rows = lc.self_k.reshape({int64_t(n_slots_) * h * n_ctx, dh});
      Tensor v_rows = lc.self_v.reshape({int64_t(n_slots_) * h * n_ctx, dh});
      scatter_rows(parts.slice0(1, 2).reshape({n * h * t, dh}), kv_ids, k_rows);
      scatter_rows(parts.slice0(2, 3).reshape({n * h * t, dh}), kv_ids, v_rows);
      Tensor attn = pool_.alloc({n, h, t, dh}, dt);
      AttentionOptions opt;
      opt.causal = true;
      attention(parts.slice0(0, 1).reshape({n, h, t, dh}),
                parts.slice0(1, 2).reshape({n, h, t, dh}),
                parts.slice0(2, 3).reshape({n, h, t, dh}), attn, opt);
      Tensor merged = pool_.alloc({n * t, d}, dt);
      Tensor merged_4d = merged.reshape({n, t, h, dh});
      permute(attn, {0, 2, 1, 3}, merged_4d);
      linear_residual(merged, l.self_out, x);
    }
    {  // cross-attention, each slot over its own audio
      const Tensor attn_in = layer_norm(pool_, x, l.cross_ln);  // [n * T, d]
      const Tensor q_tok = linear(pool_, attn_in, l.cross_q);   // [n * T, d]
      Tensor q = pool_.alloc({n, h, t, dh}, dt);
      permute(q_tok.reshape({n, t, h, dh}), {0, 2, 1, 3}, q);
      const Tensor kv = lc.cross_kv.reshape({2 * int64_t(n_slots_), h, n_audio, dh});
      Tensor attn = pool_.alloc({n, h, t, dh}, dt);
      AttentionOptions opt;
      opt.batch_index = &slot_index;
      opt.key_len = &audio_len;  // short windows' keys end early
      attention(q, kv.slice0(0, n_slots_), kv.slice0(n_slots_, 2 * n_slots_), attn, opt);
      Tensor merged = pool_.alloc({n * t, d}, dt);
      Tensor merged_4d = merged.reshape({n, t, h, dh});
      permute(attn, {0, 2, 1, 3}, merged_4d);
      linear_residual(merged, l.cross_out, x);
    }
    mlp_block(pool_, x, l.mlp_ln, l.fc1, l.fc2);
  }
  for (int64_t i = 0; i < n; ++i) n_cached_[size_t(slots[size_t(i)])] = lengths[size_t(i)];
  const Tensor out = selected_rows(pool_, host_pool_, x, n, t, rows, dev);
  return host_logits(host_pool_, final_logits(pool_, out, w, c.n_vocab));
}

Tensor WhisperBatchSession::step_on_device(std::span<const int32_t> slots,
                                           std::span<const int32_t> tokens) {
  using namespace whisper;
  g_decoder_runs.fetch_add(1, std::memory_order_relaxed);
  const WhisperConfig& c = model_->config();
  const int64_t n = int64_t(slots.size()), h = c.n_text_head;
  check_arg(n >= 1, "[whisper] batch step: no slots");
  check_arg(tokens.size() == slots.size(),
            "[whisper] batch step: " + std::to_string(tokens.size()) + " tokens for " +
                std::to_string(n) + " slots");
  check_token_ids(tokens, c.n_vocab, "[whisper] batch step");
  for (int32_t s : slots) {
    check_slot(s, "step");
    check_arg(audio_ctx(s) > 0,
              "[whisper] batch step: slot " + std::to_string(s) + " has no audio; encode first");
    check_arg(n_cached_[size_t(s)] < c.n_text_ctx,
              "[whisper] batch step: slot " + std::to_string(s) + ": the text context of " +
                  std::to_string(c.n_text_ctx) + " is full");
    check_arg(std::count(slots.begin(), slots.end(), s) == 1,
              "[whisper] batch step: slot " + std::to_string(s) + " listed twice");
  }
  const Device dev = model_->device();
  const int64_t n_ctx = c.n_text_ctx;

  // The step's integer inputs in one upload: each row's token, position (its slot's cached
  // tokens), slot, keys to attend (the cached ones and its own), audio length, and the cache
  // rows its K/V go to (slot * H + head) * n_ctx + position.
  step_ids_.assign(tokens.begin(), tokens.end());
  for (int32_t s : slots) step_ids_.push_back(n_cached_[size_t(s)]);
  step_ids_.insert(step_ids_.end(), slots.begin(), slots.end());
  for (int32_t s : slots) step_ids_.push_back(n_cached_[size_t(s)] + 1);
  for (int32_t s : slots) step_ids_.push_back(audio_len_[size_t(s)]);
  for (int32_t s : slots)
    for (int64_t j = 0; j < h; ++j)
      step_ids_.push_back(int32_t((s * h + j) * n_ctx + n_cached_[size_t(s)]));
  Tensor logits;
  if (dev == Device::cuda && StepGraphs::enabled()) {
    // Replayed as a CUDA graph per row count: the inputs go to a buffer that never moves,
    // the logits come out in another, and the body's intermediates come from a pool that
    // nothing outside the body allocates from.
    Tensor inputs = graph_input_.slice0(0, int64_t(step_ids_.size()));
    ids_to(host_pool_, step_ids_, inputs);
    logits = graph_logits_.slice0(0, n);
    graphs_.run({n, 0, 0}, [&] { step_body(n, inputs, graph_pool_, logits); });
  } else {
    const Tensor inputs = ids_on_device(pool_, host_pool_, step_ids_, dev);
    logits = pool_.alloc({n, c.n_vocab}, DType::f32);
    step_body(n, inputs, pool_, logits);
  }
  for (int32_t s : slots) ++n_cached_[size_t(s)];
  return logits;
}

void WhisperBatchSession::step_body(int64_t n, const Tensor& step_ids, Pool& pool, Tensor& logits) {
  using namespace whisper;
  const WhisperConfig& c = model_->config();
  const WhisperWeights& w = model_->weights();
  const int64_t d = c.n_text_state, h = c.n_text_head, dh = d / h;
  const int64_t n_ctx = c.n_text_ctx, n_audio = c.n_audio_ctx;
  const DType dt = model_->dtype();
  const auto part = [&](int64_t i, int64_t len = 1) {
    return step_ids.slice0(i * n, (i + len) * n);
  };
  const Tensor ids = part(0), pos_ids = part(1), slot_index = part(2), self_len = part(3),
               audio_len = part(4), kv_ids = part(5, h);
  Tensor pos = pool.alloc({n, d}, dt);  // row r: its slot's next position
  embedding(w.decoder_positions, pos_ids, pos);
  Tensor x = pool.alloc({n, d}, dt);  // [n, d]
  embedding(w.token_embedding, ids, x, &pos);

  for (size_t i = 0; i < cache_.size(); ++i) {
    const DecoderLayerWeights& l = w.decoder_layers[i];
    LayerCache& lc = cache_[i];
    {  // self-attention, each row over its slot's cached positions and its own
      const Tensor attn_in = layer_norm(pool, x, l.self_ln);  // [n, d]
      const Tensor qkv = linear(pool, attn_in, l.self_qkv);   // [n, 3d]
      Tensor parts = pool.alloc({3, n, h, dh}, dt);           // q, k, v
      permute(qkv.reshape({n, 3, h, dh}), {1, 0, 2, 3}, parts);
      // Row r's K/V of head j go to row (slot * H + j) * n_ctx + position of the cache.
      Tensor k_rows = lc.self_k.reshape({int64_t(n_slots_) * h * n_ctx, dh});
      Tensor v_rows = lc.self_v.reshape({int64_t(n_slots_) * h * n_ctx, dh});
      scatter_rows(parts.slice0(1, 2).reshape({n * h, dh}), kv_ids, k_rows);
      scatter_rows(parts.slice0(2, 3).reshape({n * h, dh}), kv_ids, v_rows);
      const Tensor q = parts.slice0(0, 1).reshape({n, h, 1, dh});
      Tensor attn = pool.alloc({n, h, 1, dh}, dt);
      AttentionOptions opt;  // row r over its slot's keys [0, position]
      opt.batch_index = &slot_index;
      opt.key_len = &self_len;
      attention(q, lc.self_k, lc.self_v, attn, opt);
      linear_residual(attn.reshape({n, d}), l.self_out, x);  // [n, H, 1, dh] is [n, d]
    }
    {  // cross-attention, row r over its slot's audio
      const Tensor attn_in = layer_norm(pool, x, l.cross_ln);  // [n, d]
      const Tensor q_tok = linear(pool, attn_in, l.cross_q);   // [n, d]
      const Tensor q = q_tok.reshape({n, h, 1, dh});
      const Tensor kv = lc.cross_kv.reshape({2 * int64_t(n_slots_), h, n_audio, dh});
      Tensor attn = pool.alloc({n, h, 1, dh}, dt);
      AttentionOptions opt;
      opt.kv_static = true;  // a slot's audio K/V are written when it is admitted, not here
      opt.batch_index = &slot_index;
      opt.key_len = &audio_len;  // short windows' keys end early
      attention(q, kv.slice0(0, n_slots_), kv.slice0(n_slots_, 2 * n_slots_), attn, opt);
      linear_residual(attn.reshape({n, d}), l.cross_out, x);
    }
    mlp_block(pool, x, l.mlp_ln, l.fc1, l.fc2);
  }
  final_logits(pool, x, w, logits);
}

Tensor WhisperBatchSession::step(std::span<const int32_t> slots, std::span<const int32_t> tokens) {
  return host_logits(host_pool_, step_on_device(slots, tokens));
}

const std::vector<int32_t>& WhisperBatchSession::step_argmax(std::span<const int32_t> slots,
                                                             std::span<const int32_t> tokens) {
  const Tensor logits = step_on_device(slots, tokens);
  const int64_t n = logits.dim(0);
  Tensor ids = model_->device() == Device::cpu ? host_pool_.alloc({n}, DType::i32)
                                               : pool_.alloc({n}, DType::i32);
  argmax(logits, ids);
  argmax_.resize(size_t(n));
  if (ids.is_cuda()) {
    Tensor host = host_pool_.alloc({n}, DType::i32);
    host.copy_from(ids);
    ids = host;
  }
  std::memcpy(argmax_.data(), ids.data<int32_t>(), size_t(n) * sizeof(int32_t));
  return argmax_;
}

void WhisperBatchSession::step_choose(std::span<const int32_t> slots,
                                      std::span<const int32_t> tokens,
                                      std::span<const int32_t> always,
                                      std::span<const int32_t> rules, int k,
                                      std::vector<int32_t>& ids, std::vector<float>& logprobs) {
  using namespace whisper;
  const WhisperConfig& c = model_->config();
  const int64_t n = int64_t(slots.size());
  check_arg(int64_t(rules.size()) == n * kRuleWidth,
            "[whisper] step_choose: " + std::to_string(rules.size()) + " rule values for " +
                std::to_string(n) + " rows of " + std::to_string(kRuleWidth));
  check_arg(k >= 1 && k <= std::min<int64_t>(kMaskedTopKMax, c.n_vocab),
            "[whisper] step_choose: k = " + std::to_string(k) + " is out of range");
  const Device dev = model_->device();
  if (!choice_mask_) choice_mask_ = std::make_shared<SuppressMask>();
  const Tensor& mask = choice_mask_->get(always, c.n_vocab, dev);
  const Tensor rule_rows = ids_on_device(pool_, host_pool_, rules, dev).reshape({n, kRuleWidth});
  const Tensor logits = step_on_device(slots, tokens);
  Tensor lp = pool_.alloc({n, int64_t(k)}, DType::f32);
  Tensor top = pool_.alloc({n, int64_t(k)}, DType::i32);
  masked_topk(logits, &mask, rule_rows, k, lp, top);
  read_choices(top, lp, ids, logprobs);
}

}  // namespace parley
