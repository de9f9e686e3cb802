// LlmModel: loading (config + safetensors -> f32 weights by role) and the batched forward.
#include "llm/model.h"

#include <cmath>
#include <cstring>

#include "engine/error.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "engine/ops/matmul.h"
#include "engine/ops/norm.h"
#include "engine/ops/rope.h"
#include "llm/blocks.h"
#include "llm/families/families.h"
#include "llm/gguf_loader.h"

namespace parley {

namespace {

Tensor host_vector(const std::vector<float>& v) {
  Tensor t = Tensor::empty({int64_t(v.size())}, DType::f32);
  std::memcpy(t.data<float>(), v.data(), v.size() * sizeof(float));
  return t;
}

}  // namespace

LlmModel::LlmModel(LlmConfig config, LlmWeights weights)
    : config_(std::move(config)), weights_(std::move(weights)) {
  check_arg(int64_t(weights_.layers.size()) == config_.n_layers,
            "[llm] weights have " + std::to_string(weights_.layers.size()) + " layers, config " +
                std::to_string(config_.n_layers));
  inv_freq_global_ =
      host_vector(rope_inv_freq(int(config_.head_dim), config_.rope_theta, config_.rope_scaling));
  // Gemma 3's local layers use their own base and no scaling.
  if (weights_.rope_freq_factors.defined() && weights_.rope_freq_factors.numel() > 0) {
    check_arg(weights_.rope_freq_factors.numel() == inv_freq_global_.numel(),
              "[llm] rope frequency factors do not match head_dim / 2");
    for (int64_t i = 0; i < inv_freq_global_.numel(); ++i)
      inv_freq_global_.data<float>()[i] /= weights_.rope_freq_factors.data<float>()[i];
  }
  inv_freq_local_ =
      host_vector(rope_inv_freq(int(config_.head_dim), config_.rope_local_base_freq, {}));
}

LlmModel LlmModel::load(const std::string& dir) {
  if (is_gguf_model(dir)) return load_gguf_llm(dir);
  LlmConfig config = load_llm_config(dir);
  const TensorSource src = open_tensor_source(dir);
  return from_source(std::move(config), src);
}

LlmModel LlmModel::from_source(LlmConfig config, const TensorSource& src,
                               Tensor rope_freq_factors) {
  const FamilySpec spec = family_spec(config);
  // Multimodal Gemma 3 checkpoints keep the text model under language_model.
  const std::string prefix =
      !src.has("model.embed_tokens.weight") && src.has("language_model.model.embed_tokens.weight")
          ? "language_model."
          : "";
  const int64_t v = config.vocab_size, h = config.hidden_size;
  LlmWeights w;
  w.embed = src.get(prefix + "model.embed_tokens.weight", {v, h});
  w.final_norm = spec.norm_plus_one ? src.get_plus_one(prefix + "model.norm.weight", {h})
                                    : src.get(prefix + "model.norm.weight", {h});
  // mlx-lm ties Gemma 3 whenever lm_head is absent; the others follow the config.
  const bool tied = config.tie_word_embeddings ||
                    (config.family == LlmFamily::gemma3 && !src.has(prefix + "lm_head.weight"));
  w.lm_head = tied ? w.embed : src.get(prefix + "lm_head.weight", {v, h});
  for (int64_t l = 0; l < config.n_layers; ++l)
    w.layers.push_back(load_layer(src, prefix, config, spec, l));
  w.rope_freq_factors = std::move(rope_freq_factors);
  return LlmModel(std::move(config), std::move(w));
}

void LlmModel::forward(const Batch& batch, KvCache& cache, Tensor& logits,
                       ForwardScratch& s) const {
  const LlmConfig& c = config_;
  const FamilySpec spec = family_spec(c);
  constexpr int64_t bs = KvCache::kBlockSize;
  int64_t n_tok = 0;
  // Checked without building messages on the good path: this runs every decode step.
  auto fail = [](const std::string& what) {
    throw Error(ErrorKind::invalid_argument, "[llm forward] " + what);
  };
  for (const BatchRow& r : batch.rows) {
    if (r.tokens.empty()) fail("a batch row has no tokens");
    if (r.start_pos < 0) fail("a batch row has a negative start_pos");
    if (int64_t(r.block_table.size()) < KvCache::blocks_for(r.start_pos + int64_t(r.tokens.size())))
      fail("a row's block table does not cover its positions");
    n_tok += int64_t(r.tokens.size());
  }
  if (n_tok == 0) fail("empty batch");
  Pool& pool = s.pool;
  Tensor ids = pool.alloc({n_tok}, DType::i32);
  Tensor pos = pool.alloc({n_tok}, DType::i32);
  Tensor slots = pool.alloc({n_tok}, DType::i32);
  s.paged.clear();
  s.logit_rows.clear();
  int64_t t = 0;
  for (const BatchRow& r : batch.rows) {
    s.paged.push_back({t, int64_t(r.tokens.size()), r.start_pos, r.block_table});
    for (size_t j = 0; j < r.tokens.size(); ++j, ++t) {
      const int32_t p = r.start_pos + int32_t(j);
      const int32_t block = r.block_table[size_t(p / bs)];
      if (block < 0 || block >= cache.n_blocks())
        fail("block id " + std::to_string(block) + " outside the cache");
      ids.data<int32_t>()[t] = r.tokens[j];
      pos.data<int32_t>()[t] = p;
      slots.data<int32_t>()[t] = int32_t(block * bs + p % bs);
      if (r.logits_all || (r.want_logits && j + 1 == r.tokens.size())) s.logit_rows.push_back(t);
    }
  }
  const int64_t h_dim = c.hidden_size;
  Tensor h = pool.alloc({n_tok, h_dim}, DType::f32);
  embedding(weights_.embed, ids, h);
  if (spec.embed_scale) scale(h, bf16_to_f32(f32_to_bf16(std::sqrt(float(h_dim)))), h);
  Tensor x = pool.alloc({n_tok, h_dim}, DType::f32);
  Tensor y = pool.alloc({n_tok, h_dim}, DType::f32);
  const StepInputs step{&pos, &slots, s.paged};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = weights_.layers[size_t(l)];
    rms_norm(h, w.attn_norm, c.rms_norm_eps, x);
    const Tensor& inv_freq = c.is_sliding_layer(l) ? inv_freq_local_ : inv_freq_global_;
    attention_block(c, spec, w, l, x, step, inv_freq, cache, pool, y);
    if (spec.sandwich_norms) rms_norm(y, w.attn_out_norm, c.rms_norm_eps, y);
    add(h, y, h);
    rms_norm(h, w.mlp_norm, c.rms_norm_eps, x);
    if (c.is_moe_layer(l))
      moe_block(c, spec, w, x, pool, y);
    else
      mlp_block(spec, w, x, pool, y);
    if (spec.sandwich_norms) rms_norm(y, w.mlp_out_norm, c.rms_norm_eps, y);
    add(h, y, h);
  }
  const int64_t n_out = int64_t(s.logit_rows.size());
  logits = pool.alloc({n_out, c.vocab_size}, DType::f32);
  if (n_out == 0) return;
  Tensor sel = pool.alloc({n_out, h_dim}, DType::f32);
  for (int64_t i = 0; i < n_out; ++i)
    std::memcpy(sel.data<float>() + i * h_dim, h.data<float>() + s.logit_rows[size_t(i)] * h_dim,
                size_t(h_dim) * sizeof(float));
  Tensor normed = pool.alloc({n_out, h_dim}, DType::f32);
  rms_norm(sel, weights_.final_norm, c.rms_norm_eps, normed);
  MatmulOptions opt;
  opt.trans_b = true;
  matmul(normed, weights_.lm_head, logits, opt);
  if (c.final_logit_softcapping > 0) {
    const float cap = c.final_logit_softcapping;
    float* p = logits.data<float>();
    for (int64_t i = 0; i < logits.numel(); ++i) p[i] = cap * std::tanh(p[i] / cap);
  }
}

}  // namespace parley
