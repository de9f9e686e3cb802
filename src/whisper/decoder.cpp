// The Whisper decoder forward pass (WhisperSession::decode). Reference: openai/whisper
// model.py TextDecoder:
//   x = token_embedding(tokens) + positional_embedding[offset : offset + T]
//   per block: x += self_attn(ln(x)) (causal, KV cache); x += cross_attn(ln(x), audio);
//              x += mlp(ln(x))
//   logits = ln(x) @ token_embedding^T
// The self-attention cache of a layer is token-major [n_text_ctx, 3d]: the fused q|k|v
// projection of a step writes its rows straight into it, and attention_tokens reads q, k and
// v there in place (k and v as column ranges with a row stride of 3d), so a step runs no
// permutes and no cache copies. Cross-attention reads the session's token-major buffer of
// every layer's audio K/V (encoder.cpp) the same way. A single-token step per layer:
// LayerNorm, QKV GEMM, attention, output GEMM + residual; LayerNorm, q GEMM, attention,
// output GEMM + residual; LayerNorm, fc1 + GELU (one GEMM), fc2 + residual.
//
// Batched rows (beam search, best_of; WhisperSession::fork / decode_rows / reorder_rows):
// the initial tokens are decoded once into the session's cache; fork() copies them into
// each row's slot of a per-layer [rows, n_text_ctx, 3d] cache, where the row keeps its later
// positions too; a step runs all rows as one [B, d] batch (one GEMM per weight,
// cross-attention as B queries of the shared audio K/V, self-attention as one
// attention_tokens call whose k/v batch_index maps each row to its slot, after one
// scatter_rows of the rows' new q|k|v into their slots). The row -> slot map and the tokens
// are device data uploaded once per step (RowsInput), so on CUDA the step replays a graph
// (decode_graphs.h) whichever slots reorder_rows gave the rows.
#include <algorithm>
#include <array>
#include <cstring>

#include "engine/error.h"
#include "engine/ops/attention.h"
#include "engine/ops/embedding.h"
#include "engine/ops/matmul.h"
#include "engine/ops/reduce.h"
#include "engine/ops/scatter_rows.h"
#include "whisper/decode_graphs.h"
#include "whisper/encoder.h"
#include "whisper/logit_filters.h"
#include "whisper/model.h"

namespace parley {
namespace whisper {
namespace {

// x [T, d] += out_proj(causal_self_attention(ln(x))); the QKV projection of the T tokens
// goes to positions [offset, offset + T) of `cache` [n_text_ctx, 3d].
void decoder_self_attention(Pool& pool, Tensor& x, const DecoderLayerWeights& l, Tensor& cache,
                            int64_t offset, int n_head) {
  const int64_t t = x.dim(0), d = x.dim(1), total = offset + t, n_ctx = cache.dim(0);
  Tensor step = cache.slice0(offset, total);  // [T, 3d]
  MatmulOptions proj;
  proj.bias = &l.self_qkv.bias;
  normed_matmul(pool, x, l.self_ln, l.self_fold, l.self_qkv, step, proj);
  const Tensor all = cache.reshape({1, n_ctx, 3 * d});
  Tensor attn = pool.alloc({1, t, d}, x.dtype());  // [1, T, d], heads side by side
  AttentionOptions opt;
  opt.causal = true;
  opt.static_keys = offset;  // earlier passes wrote the positions before this one's
  attention_tokens({step.reshape({1, t, 3 * d}), 0}, {all, d}, {all, 2 * d}, total, n_head, attn,
                   opt);
  linear_residual(attn.reshape({t, d}), l.self_out, x);
}

// x [T, d] += out_proj(cross_attention(ln(x), audio K/V)); cross_kv [n_audio_ctx, layers * 2d]
// holds layer `layer`'s k at columns [2d * layer, 2d * layer + d) and its v after it.
void decoder_cross_attention(Pool& pool, Tensor& x, const DecoderLayerWeights& l,
                             const Tensor& cross_kv, int64_t layer, int n_head) {
  const int64_t t = x.dim(0), d = x.dim(1), n_audio = cross_kv.dim(0);
  const Tensor q = normed_linear(pool, x, l.cross_ln, l.cross_fold, l.cross_q);  // [T, d]
  const Tensor kv = cross_kv.reshape({1, n_audio, cross_kv.dim(1)});
  Tensor attn = pool.alloc({1, t, d}, x.dtype());  // [1, T, d]
  AttentionOptions opt;
  opt.kv_static = true;  // encode() wrote cross_kv before any decoder step
  attention_tokens({q.reshape({1, t, d}), 0}, {kv, 2 * d * layer}, {kv, 2 * d * layer + d}, n_audio,
                   n_head, attn, opt);
  linear_residual(attn.reshape({t, d}), l.cross_out, x);
}

// Batched self-attention, one new token per row: x [B, d] += out_proj(attn(ln(x))), row b
// reading slot slots[b] of `rows` [capacity, n_text_ctx, 3d] (shared positions copied there
// at fork, then its own); this step's q|k|v go to position offset of that slot. Both indices
// are device data (RowsInput), so a captured step stays right after reorder_rows.
struct RowsSelfCache {
  Tensor& rows;
  const Tensor& slots;       // i32 [B]: row -> slot
  const Tensor& cache_rows;  // i32 [B]: slot * n_text_ctx + offset
  int64_t offset;
};

void rows_self_attention(Pool& pool, Tensor& x, const DecoderLayerWeights& l,
                         const RowsSelfCache& c, int n_head) {
  const int64_t b = x.dim(0), d = x.dim(1), n_ctx = c.rows.dim(1);
  const Tensor qkv = normed_linear(pool, x, l.self_ln, l.self_fold, l.self_qkv);  // [B, 3d]
  Tensor positions = c.rows.reshape({c.rows.dim(0) * n_ctx, 3 * d});
  scatter_rows(qkv, c.cache_rows, positions);
  Tensor attn = pool.alloc({b, 1, d}, x.dtype());  // [B, 1, d]
  // One query per row at the last position sees every cached one: no causal limit. The
  // positions before it were written by fork, earlier steps and reorder_rows' copies.
  AttentionOptions opt;
  opt.static_keys = c.offset;
  attention_tokens({qkv.reshape({b, 1, 3 * d}), 0}, {c.rows, d, &c.slots},
                   {c.rows, 2 * d, &c.slots}, c.offset + 1, n_head, attn, opt);
  linear_residual(attn.reshape({b, d}), l.self_out, x);
}

// The token choice of each row of logits [n, n_vocab]: masked_topk with `mask` and `rules`
// [n, kRuleWidth], {ids i32, logprobs f32} [n, k] from `pool`. Device work only.
std::vector<Tensor> top_k_choices(Pool& pool, const Tensor& logits, const Tensor& mask,
                                  const Tensor& rules, int k) {
  const int64_t n = logits.dim(0);
  Tensor lp = pool.alloc({n, int64_t(k)}, DType::f32),
         ids = pool.alloc({n, int64_t(k)}, DType::i32);
  masked_topk(logits, &mask, rules, k, lp, ids);
  return {ids, lp};
}

// top_k_choices with k = 1 of one row's final hidden state x [1, d]: the vocabulary product
// and the choice in one op (final_logits_top1).
std::vector<Tensor> top_1_choice(Pool& pool, const Tensor& x, const WhisperWeights& w,
                                 int64_t n_vocab, const Tensor& mask, const Tensor& rules) {
  Tensor lp = pool.alloc({1, 1}, DType::f32), ids = pool.alloc({1, 1}, DType::i32);
  final_logits_top1(pool, x, w, n_vocab, mask, rules, lp, ids);
  return {ids, lp};
}

}  // namespace
}  // namespace whisper

void WhisperSession::fork(int n_rows) {
  const WhisperConfig& c = model_->config();
  check_arg(n_rows >= 1, "[whisper] fork: n_rows must be >= 1, got " + std::to_string(n_rows));
  check_arg(encoded_ && n_cached_ > 0, "[whisper] fork: decode the shared tokens first");
  check_arg(!rows_active(), "[whisper] fork: rows are already in use; reset() first");
  const int64_t width = 3 * int64_t(c.n_text_state);
  if (row_capacity_ < n_rows) {  // once per session and beam size, never in the step loop
    row_cache_.clear();
    for (int i = 0; i < c.n_text_layer; ++i)
      row_cache_.push_back(
          {Tensor::empty({n_rows, c.n_text_ctx, width}, model_->dtype(), model_->device())});
    row_capacity_ = n_rows;
    if (graphs_) graphs_->reserve_rows(n_rows);
  }
  n_rows_ = n_rows;
  fork_at_ = n_cached_;
  beam_chain_active_ = false;
  row_slot_.resize(size_t(n_rows));
  for (int i = 0; i < n_rows; ++i) row_slot_[size_t(i)] = i;
  // Every slot a row can take (reorder_rows picks them below n_rows) starts with the shared
  // positions, so a row's attention reads one contiguous cache.
  for (size_t l = 0; l < row_cache_.size(); ++l)
    for (int s = 0; s < n_rows; ++s)
      row_cache_[l]
          .qkv.slice0(s, s + 1)
          .reshape({c.n_text_ctx, width})
          .slice0(0, n_cached_)
          .copy_from(cache_[l].self_qkv.slice0(0, n_cached_));
}

void WhisperSession::reorder_rows(std::span<const int32_t> source) {
  check_arg(rows_active(), "[whisper] reorder_rows: no rows; fork() first");
  check_arg(!beam_chain_active_, "[whisper] reorder_rows: the rows are in a beam chain");
  check_arg(int(source.size()) == n_rows_,
            "[whisper] reorder_rows: " + std::to_string(source.size()) + " sources for " +
                std::to_string(n_rows_) + " rows");
  for (int32_t s : source) {
    check_arg(s >= 0 && s < n_rows_, "[whisper] reorder_rows: source " + std::to_string(s) +
                                         " outside [0, " + std::to_string(n_rows_) + ")");
  }
  // The first successor of a row takes its slot as it is; a second one gets a free slot
  // (one no successor needs) and a copy of the row's own positions.
  std::vector<char>& taken = reorder_taken_;   // scratch kept by the session: no allocation
  std::vector<int32_t>& next = reorder_next_;  // per beam step once warm
  taken.assign(size_t(row_capacity_), 0);
  next.assign(source.size(), -1);
  for (size_t i = 0; i < source.size(); ++i) {
    const int32_t slot = row_slot_[size_t(source[i])];
    if (!taken[size_t(slot)]) {
      taken[size_t(slot)] = 1;
      next[i] = slot;
    }
  }
  const WhisperConfig& c = model_->config();
  const int64_t width = 3 * int64_t(c.n_text_state);
  int32_t free_slot = 0;
  for (size_t i = 0; i < source.size(); ++i) {
    if (next[i] >= 0) continue;
    while (taken[size_t(free_slot)]) ++free_slot;
    taken[size_t(free_slot)] = 1;
    next[i] = free_slot;
    const int32_t from = row_slot_[size_t(source[i])];
    if (n_cached_ > fork_at_) {
      for (RowCache& rc : row_cache_) {
        const Tensor src = rc.qkv.slice0(from, from + 1).reshape({c.n_text_ctx, width});
        rc.qkv.slice0(free_slot, free_slot + 1)
            .reshape({c.n_text_ctx, width})
            .slice0(fork_at_, n_cached_)
            .copy_from(src.slice0(fork_at_, n_cached_));
      }
    }
  }
  row_slot_.swap(next);
}

std::vector<Tensor> WhisperSession::rows_step(std::span<const int32_t> tokens,
                                              std::span<const int32_t> rules, const Tensor* mask,
                                              int k) {
  using namespace whisper;
  g_decoder_runs.fetch_add(1, std::memory_order_relaxed);
  const WhisperConfig& c = model_->config();
  check_arg(rows_active(), "[whisper] decode_rows: no rows; fork() first");
  check_arg(!beam_chain_active_, "[whisper] decode_rows: the rows are in a beam chain");
  const int64_t b = int64_t(tokens.size()), offset = n_cached_;
  check_arg(b == n_rows_, "[whisper] decode_rows: " + std::to_string(b) + " tokens for " +
                              std::to_string(n_rows_) + " rows");
  check_arg(offset + 1 <= c.n_text_ctx, "[whisper] decode_rows: the text context of " +
                                            std::to_string(c.n_text_ctx) + " is full");
  check_token_ids(tokens, c.n_vocab, "[whisper] decode_rows");
  // The inputs are staged on the host and go to the device in one copy (the rule rows only
  // with the choice); the CPU reads them where they are staged.
  Tensor host = host_pool_.alloc({RowsInput::size(b, kRuleWidth)}, DType::i32);
  RowsInput staged(host, b, kRuleWidth);
  std::copy(tokens.begin(), tokens.end(), staged.tokens.data<int32_t>());
  for (int64_t r = 0; r < b; ++r) {
    const int32_t slot = row_slot_[size_t(r)];
    staged.slots.data<int32_t>()[r] = slot;
    staged.cache_rows.data<int32_t>()[r] = slot * c.n_text_ctx + int32_t(offset);
  }
  std::copy(rules.begin(), rules.end(), staged.rules.data<int32_t>());
  Tensor input = host;
  if (model_->device() != Device::cpu) {
    input = graphs_ ? graphs_->rows_input().slice0(0, host.numel())
                    : pool_.alloc(host.shape(), DType::i32);
    const int64_t n_in = RowsInput::size(b, k > 0 ? kRuleWidth : 0);
    input.slice0(0, n_in).copy_from(host.slice0(0, n_in));
  }
  const RowsInput in(input, b, kRuleWidth);
  auto forward = [&]() -> std::vector<Tensor> {
    const Tensor logits = rows_logits(in, offset);
    if (k == 0) return {logits};
    return top_k_choices(pool_, logits, *mask, in.rules, k);
  };
  std::vector<Tensor> out =
      graphs_ ? graphs_->rows_step({int(offset), int(b), k}, forward) : forward();
  n_cached_ = int(offset + 1);
  return out;
}

Tensor WhisperSession::rows_logits(const whisper::RowsInput& in, int64_t offset) {
  using namespace whisper;
  const WhisperConfig& c = model_->config();
  const WhisperWeights& w = decoder_weights();
  const int64_t b = in.tokens.numel(), d = c.n_text_state;
  Tensor x = pool_.alloc({b, d}, model_->dtype());  // [B, d], every row at position `offset`
  const Tensor position = w.decoder_positions.slice0(offset, offset + 1).reshape({d});
  embedding(w.token_embedding, in.tokens, x, &position);
  for (size_t i = 0; i < cache_.size(); ++i) {
    const DecoderLayerWeights& layer = w.decoder_layers[i];
    rows_self_attention(pool_, x, layer, {row_cache_[i].qkv, in.slots, in.cache_rows, offset},
                        c.n_text_head);
    // The rows are B queries of the same audio: one attention call, no causal mask.
    decoder_cross_attention(pool_, x, layer, cross_kv_, int64_t(i), c.n_text_head);
    mlp_block(pool_, x, layer.mlp_ln, layer.fc1, layer.fc2, layer.mlp_fold);
  }
  return final_logits(pool_, x, w, c.n_vocab);
}

Tensor WhisperSession::decode_rows(std::span<const int32_t> tokens) {
  const Tensor logits = rows_step(tokens, {}, nullptr, 0)[0];
  if (logits.device() == Device::cpu) return logits;
  Tensor host = host_pool_.alloc(logits.shape(), DType::f32);
  host.copy_from(logits);
  return host;
}

Tensor WhisperSession::step_logits(const Tensor& ids, int64_t t, int64_t offset,
                                   const Tensor* row_ids, int64_t n_out) {
  const WhisperConfig& c = model_->config();
  return whisper::final_logits(pool_, step_hidden(ids, t, offset, row_ids, n_out),
                               decoder_weights(), c.n_vocab);
}

Tensor WhisperSession::step_hidden(const Tensor& ids, int64_t t, int64_t offset,
                                   const Tensor* row_ids, int64_t n_out) {
  using namespace whisper;
  const WhisperConfig& c = model_->config();
  const WhisperWeights& w = decoder_weights();
  const int64_t d = c.n_text_state;
  Tensor x = pool_.alloc({t, d}, model_->dtype());                          // [T, d]
  const Tensor positions = w.decoder_positions.slice0(offset, offset + t);  // [T, d]
  embedding(w.token_embedding, ids, x, &positions);
  for (size_t i = 0; i < cache_.size(); ++i) {
    const DecoderLayerWeights& layer = w.decoder_layers[i];
    decoder_self_attention(pool_, x, layer, cache_[i].self_qkv, offset, c.n_text_head);
    decoder_cross_attention(pool_, x, layer, cross_kv_, int64_t(i), c.n_text_head);
    mlp_block(pool_, x, layer.mlp_ln, layer.fc1, layer.fc2, layer.mlp_fold);
  }
  if (row_ids) {
    Tensor picked = pool_.alloc({n_out, d}, x.dtype());
    embedding(x, *row_ids, picked);  // a row gather (LayerNorm is per row: gather first)
    x = picked;
  }
  return x;
}

void WhisperSession::begin_pass(std::span<const int32_t> tokens, std::span<const int64_t> rows,
                                const std::string& what) {
  using namespace whisper;
  const WhisperConfig& c = model_->config();
  check_arg(encoded_, what + ": call encode() first");
  const int64_t t = int64_t(tokens.size()), offset = n_cached_;
  check_arg(t > 0, what + ": no tokens");
  check_arg(offset + t <= c.n_text_ctx,
            what + ": " + std::to_string(offset) + " cached + " + std::to_string(t) +
                " new tokens exceed the text context of " + std::to_string(c.n_text_ctx));
  check_token_ids(tokens, c.n_vocab, what);
  for (int64_t r : rows)
    check_arg(r >= 0 && r < t, what + ": logits row " + std::to_string(r) + " outside [0, " +
                                   std::to_string(t) + ")");
  check_arg(!rows_active(), what + ": rows are in use (fork); use decode_rows");
  n_rows_ = 0;  // rows of an earlier window end here
  g_decoder_runs.fetch_add(1, std::memory_order_relaxed);
}

Tensor WhisperSession::initial_logits(std::span<const int32_t> tokens, int64_t sot_index,
                                      std::span<const int32_t> extra, Tensor* extra_out,
                                      const std::string& what) {
  using namespace whisper;
  const int64_t t = int64_t(tokens.size()), offset = n_cached_;
  const std::array<int64_t, 2> rows = {sot_index, t - 1};
  begin_pass(tokens, rows, what);
  // One upload: the token ids, the two rows wanted, then `extra`.
  std::vector<int32_t> staged(tokens.begin(), tokens.end());
  staged.push_back(int32_t(rows[0]));
  staged.push_back(int32_t(rows[1]));
  staged.insert(staged.end(), extra.begin(), extra.end());
  const Tensor input = ids_on_device(pool_, host_pool_, staged, model_->device());
  const Tensor ids = input.slice0(0, t), row_ids = input.slice0(t, t + 2);
  if (extra_out) *extra_out = input.slice0(t + 2, input.numel());
  Tensor logits = step_logits(ids, t, offset, &row_ids, 2);
  n_cached_ = int(offset + t);
  return logits;
}

Tensor WhisperSession::decode(std::span<const int32_t> tokens, std::span<const int64_t> rows) {
  using namespace whisper;
  begin_pass(tokens, rows, "[whisper] decode");
  const int64_t t = int64_t(tokens.size()), offset = n_cached_;
  const Device dev = model_->device();

  // A single-token step on CUDA replays a captured graph of the whole forward pass
  // (decode_graphs.h); its token id then lives in the graphs' fixed device buffer.
  const bool graphed = graphs_ && t == 1 && rows.empty();
  Tensor ids = graphed ? graphs_->token() : ids_on_device(pool_, host_pool_, tokens, dev);
  if (graphed) ids.copy_from(ids_on_device(pool_, host_pool_, tokens, Device::cpu));
  // The positions whose logits are wanted, gathered before the vocabulary GEMM.
  Tensor row_ids;
  if (!rows.empty()) {
    std::vector<int32_t> picked(rows.begin(), rows.end());
    row_ids = ids_on_device(pool_, host_pool_, picked, dev);
  }
  const int64_t n_out = rows.empty() ? t : int64_t(rows.size());
  auto forward = [&]() -> std::vector<Tensor> {
    return {step_logits(ids, t, offset, rows.empty() ? nullptr : &row_ids, n_out)};
  };
  const Tensor logits =
      graphed ? graphs_->step(int(offset), DecodeGraphs::Kind::logits, forward)[0] : forward()[0];
  n_cached_ = int(offset + t);
  if (dev == Device::cpu) return logits;
  Tensor host = host_pool_.alloc(logits.shape(), DType::f32);
  host.copy_from(logits);
  return host;
}

void WhisperSession::check_choice(int k, size_t rules, int64_t rows,
                                  const std::string& what) const {
  using namespace whisper;
  check_arg(k >= 1 && k <= std::min<int64_t>(kMaskedTopKMax, model_->config().n_vocab),
            what + ": k = " + std::to_string(k) + " is out of range");
  check_arg(int64_t(rules) == rows * kRuleWidth, what + ": " + std::to_string(rules) +
                                                     " rule values for " + std::to_string(rows) +
                                                     " rows of " + std::to_string(kRuleWidth));
}

const Tensor& WhisperSession::choice_mask(std::span<const int32_t> always) {
  if (!choice_mask_) choice_mask_ = std::make_shared<whisper::SuppressMask>();
  return choice_mask_->get(always, model_->config().n_vocab, model_->device());
}

const WhisperSession::Choices& WhisperSession::decode_choose(std::span<const int32_t> tokens,
                                                             std::span<const int32_t> always,
                                                             std::span<const int32_t> rules,
                                                             int k) {
  using namespace whisper;
  const WhisperConfig& c = model_->config();
  const int64_t n = int64_t(tokens.size());
  check_choice(k, rules.size(), n, "[whisper] decode_choose");
  const Device dev = model_->device();
  const Tensor& mask = choice_mask(always);
  std::vector<Tensor> out;
  if (rows_active()) {
    out = rows_step(tokens, rules, &mask, k);
  } else {
    g_decoder_runs.fetch_add(1, std::memory_order_relaxed);
    check_arg(encoded_, "[whisper] decode_choose: call encode() first");
    check_arg(n == 1, "[whisper] decode_choose: one token without rows, got " + std::to_string(n));
    const int64_t offset = n_cached_;
    check_arg(offset + 1 <= c.n_text_ctx, "[whisper] decode_choose: the text context of " +
                                              std::to_string(c.n_text_ctx) + " is full");
    check_token_ids(tokens, c.n_vocab, "[whisper] decode_choose");
    n_rows_ = 0;
    // One upload for the token and its rule row: i32 [1 + width].
    Tensor host = host_pool_.alloc({1 + kRuleWidth}, DType::i32);
    host.data<int32_t>()[0] = tokens[0];
    std::copy(rules.begin(), rules.end(), host.data<int32_t>() + 1);
    const bool graphed = graphs_ && k == 1;
    Tensor input = graphed ? graphs_->input() : pool_.alloc(host.shape(), DType::i32);
    if (dev == Device::cpu)
      input = host;
    else
      input.copy_from(host);
    const Tensor ids = input.slice0(0, 1);
    const Tensor rule_rows = input.slice0(1, 1 + kRuleWidth).reshape({1, kRuleWidth});
    auto forward = [&] {
      const Tensor x = step_hidden(ids, 1, offset, nullptr, 1);
      const WhisperWeights& w = decoder_weights();
      if (k == 1) return top_1_choice(pool_, x, w, c.n_vocab, mask, rule_rows);
      return top_k_choices(pool_, final_logits(pool_, x, w, c.n_vocab), mask, rule_rows, k);
    };
    out = graphed ? graphs_->step(int(offset), DecodeGraphs::Kind::choice, forward) : forward();
    n_cached_ = int(offset + 1);
  }
  read_choices(out[0], out[1], choices_.ids, choices_.logprobs);
  return choices_;
}

const WhisperSession::Choices& WhisperSession::decode_initial_choose(
    std::span<const int32_t> tokens, int64_t sot_index, std::span<const int32_t> always,
    std::span<const int32_t> rule, int k, Tensor& sot_logits) {
  using namespace whisper;
  const WhisperConfig& c = model_->config();
  const std::string what = "[whisper] decode_initial_choose";
  check_choice(k, rule.size(), 1, what);
  const Tensor& mask = choice_mask(always);
  Tensor rule_row;
  const Tensor logits = initial_logits(tokens, sot_index, rule, &rule_row, what);  // [2, n_vocab]
  rule_row = rule_row.reshape({1, kRuleWidth});
  const std::vector<Tensor> out = top_k_choices(pool_, logits.slice0(1, 2), mask, rule_row, k);
  sot_logits = host_pool_.alloc({c.n_vocab}, DType::f32);
  sot_logits.copy_from(logits.slice0(0, 1).reshape({c.n_vocab}));
  read_choices(out[0], out[1], choices_.ids, choices_.logprobs);
  return choices_;
}

}  // namespace parley
