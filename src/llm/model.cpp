// LlmModel: loading (config + safetensors -> f32 weights by role) and the batched forward.
#include "llm/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/error.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "engine/ops/llm_fused.h"
#include "engine/ops/matmul.h"
#include "engine/ops/norm.h"
#include "engine/ops/quant_matmul.h"
#include "engine/ops/rope.h"
#include "llm/blocks.h"
#include "llm/families/families.h"
#include "llm/gguf_loader.h"
#include "llm/mtp.h"

namespace parley {

namespace {

// Row blocks stacked into one tensor on their device: [sum of rows, cols...].
Tensor stack_rows(std::initializer_list<const Tensor*> parts) {
  Shape shape = (*parts.begin())->shape();
  int64_t rows = 0;
  for (const Tensor* p : parts) rows += p->dim(0);
  shape[0] = rows;
  Tensor out = Tensor::empty(shape, (*parts.begin())->dtype(), (*parts.begin())->device());
  int64_t at = 0;
  for (const Tensor* p : parts) {
    Tensor dst = out.slice0(at, at + p->dim(0));
    dst.copy_from(*p);
    at += p->dim(0);
  }
  return out;
}

// The CUDA path's stacked projections (LayerWeights::qkv, gate_up), for dense weights.
void fuse_projections(LayerWeights& w) {
  if (w.q.defined() && w.q.numel() > 0 && w.k.defined() && w.v.defined() && w.q_quant.rows == 0 &&
      w.k_quant.rows == 0 && w.v_quant.rows == 0) {
    w.qkv = stack_rows({&w.q, &w.k, &w.v});
    w.q = w.k = w.v = Tensor();
    if (w.q_bias.defined() && w.q_bias.numel() > 0) {
      w.qkv_bias = stack_rows({&w.q_bias, &w.k_bias, &w.v_bias});
      w.q_bias = w.k_bias = w.v_bias = Tensor();
    }
  }
  if (w.gate.defined() && w.gate.numel() > 0 && w.up.defined() && w.gate_quant.rows == 0 &&
      w.up_quant.rows == 0) {
    w.gate_up = stack_rows({&w.gate, &w.up});
    w.gate = w.up = Tensor();
  }
}

Tensor host_vector(const std::vector<float>& v) {
  Tensor t = Tensor::empty({int64_t(v.size())}, DType::f32);
  std::memcpy(t.data<float>(), v.data(), v.size() * sizeof(float));
  return t;
}

}  // namespace

LlmModel::LlmModel(LlmConfig config, LlmWeights weights)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      device_(weights_.embed.device()),
      dtype_(weights_.embed.dtype()) {
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
  if (device_ != Device::cpu) {
    for (LayerWeights& w : weights_.layers) fuse_projections(w);
    for (MtpWeights& m : weights_.mtp) fuse_projections(m.block);
    inv_freq_global_ = inv_freq_global_.to(device_);
    inv_freq_local_ = inv_freq_local_.to(device_);
  }
}

LlmModel LlmModel::load(const std::string& dir, const LlmLoadOptions& options) {
  check_arg(is_float(options.dtype), "[llm] the load dtype must be a float type");
  check(
      options.device == Device::cuda || options.dtype == DType::f32, ErrorKind::unsupported,
      "[llm] the CPU runs chat models in f32 only, not " + std::string(dtype_name(options.dtype)));
  if (is_gguf_model(dir)) return load_gguf_llm(dir, options);
  LlmConfig config = load_llm_config(dir);
  TensorSource src = open_tensor_source(dir);
  src.set_target(options.device, options.dtype);
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
  const QuantMatrix* head_q =
      src.quant(prefix + (tied ? "model.embed_tokens.weight" : "lm_head.weight"), {v, h});
  if (head_q)
    w.lm_head_quant =
        head_q->device == src.device() ? *head_q : quant_matrix_to(*head_q, src.device());
  if (tied)
    w.lm_head = w.embed;
  else if (!head_q)
    w.lm_head = src.get(prefix + "lm_head.weight", {v, h});
  for (int64_t l = 0; l < config.n_layers; ++l)
    w.layers.push_back(load_layer(src, prefix, config, spec, l));
  w.mtp = load_mtp(src, prefix, config, spec, w.lm_head);
  w.rope_freq_factors = std::move(rope_freq_factors);
  return LlmModel(std::move(config), std::move(w));
}

LlmModel::Staged LlmModel::stage(const Batch& batch, KvCache& cache, ForwardScratch& s) const {
  const LlmConfig& c = config_;
  constexpr int64_t bs = KvCache::kBlockSize;
  // Checked without building messages on the good path: this runs every decode step.
  auto fail = [](const std::string& what) {
    throw Error(ErrorKind::invalid_argument, "[llm forward] " + what);
  };
  Staged st;
  st.decode_step = true;
  for (const BatchRow& r : batch.rows) {
    if (r.tokens.empty()) fail("a batch row has no tokens");
    if (r.start_pos < 0) fail("a batch row has a negative start_pos");
    if (int64_t(r.block_table.size()) < KvCache::blocks_for(r.start_pos + int64_t(r.tokens.size())))
      fail("a row's block table does not cover its positions");
    st.n_tok += int64_t(r.tokens.size());
    st.decode_step = st.decode_step && r.tokens.size() == 1 && r.want_logits;
  }
  if (st.n_tok == 0) fail("empty batch");
  if (cache.k(0).device() != device_ || cache.k(0).dtype() != dtype_ || s.pool.device() != device_)
    fail("the KV cache and the scratch must be on the model's device, the cache in its dtype (" +
         std::string(dtype_name(dtype_)) + ")");
  const bool on_host = device_ == Device::cpu;
  Pool& host = on_host ? s.pool : s.host;
  // The step's i32 inputs, staged on the host: ids, positions, slots, the rows whose logits
  // are returned.
  st.ids = host.alloc({st.n_tok}, DType::i32);
  st.pos = host.alloc({st.n_tok}, DType::i32);
  st.slots = host.alloc({st.n_tok}, DType::i32);
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
      if (r.tokens[j] < 0 || r.tokens[j] >= c.vocab_size)
        fail("token id " + std::to_string(r.tokens[j]) + " outside the vocabulary");
      st.ids.data<int32_t>()[t] = r.tokens[j];
      st.pos.data<int32_t>()[t] = p;
      st.slots.data<int32_t>()[t] = int32_t(block * bs + p % bs);
      if (r.logits_all || (r.want_logits && j + 1 == r.tokens.size()))
        s.logit_rows.push_back(int32_t(t));
    }
  }
  st.n_out = int64_t(s.logit_rows.size());
  return st;
}

void LlmModel::upload(Staged& st, ForwardScratch& s) const {
  const bool on_host = device_ == Device::cpu;
  Pool& host = on_host ? s.pool : s.host;
  st.out_rows = host.alloc({std::max<int64_t>(st.n_out, 1)}, DType::i32);
  std::copy(s.logit_rows.begin(), s.logit_rows.end(), st.out_rows.data<int32_t>());
  if (on_host) return;
  // Every i32 input of the step in one host-to-device copy (each copy waits for the stream),
  // the rows' tables (make_paged_tables) included.
  make_paged_tables(s.paged, host, host, s.tables);
  Tensor* parts[] = {&st.ids,          &st.pos,          &st.slots,      &st.out_rows,
                     &s.tables.tokens, &s.tables.blocks, &s.tables.tiles};
  int64_t n = 0;
  for (const Tensor* p : parts) n += p->numel();
  Tensor staged = host.alloc({n}, DType::i32), on_device = s.pool.alloc({n}, DType::i32);
  int64_t at = 0;
  for (const Tensor* p : parts) {
    std::copy(p->data<int32_t>(), p->data<int32_t>() + p->numel(), staged.data<int32_t>() + at);
    at += p->numel();
  }
  on_device.copy_from(staged);
  at = 0;
  for (Tensor* p : parts) {
    *p = on_device.slice0(at, at + p->numel()).reshape(p->shape());
    at += p->numel();
  }
}

void LlmModel::forward(const Batch& batch, KvCache& cache, Tensor& logits,
                       ForwardScratch& s) const {
  const LlmConfig& c = config_;
  Staged st = stage(batch, cache, s);
  const bool on_host = device_ == Device::cpu;
  Pool& host = on_host ? s.pool : s.host;
  const int64_t n_out = st.n_out;
  const bool softcap = c.final_logit_softcapping > 0;
  s.hidden = Tensor();
  if (!on_host && st.decode_step && !s.keep_hidden && c.num_experts == 0 && StepGraphs::enabled()) {
    forward_decode_graph(st.n_tok, st.ids, st.pos, st.slots, cache, logits, s);
  } else {
    // The graph path writes its logit rows into its own input layout; this one stages them.
    upload(st, s);
    const bool keep_on_device = !on_host && s.logits_on_device && !softcap;
    Tensor dev_logits = s.pool.alloc({n_out, c.vocab_size}, DType::f32);
    logits = on_host || keep_on_device ? dev_logits : host.alloc({n_out, c.vocab_size}, DType::f32);
    const StepInputs step{&st.pos, &st.slots, s.paged, on_host ? nullptr : &s.tables};
    run_device(step, st.ids, st.out_rows, cache, s.pool, host, dev_logits,
               s.keep_hidden ? &s.hidden : nullptr);
    if (!on_host && !keep_on_device && n_out > 0) logits.copy_from(dev_logits);
  }
  if (softcap && n_out > 0) {
    const float cap = c.final_logit_softcapping;
    float* p = logits.data<float>();
    for (int64_t i = 0; i < logits.numel(); ++i) p[i] = cap * std::tanh(p[i] / cap);
  }
}

void LlmModel::forward_mtp(const Batch& batch, const Tensor& hidden, KvCache& cache, Tensor& logits,
                           ForwardScratch& s, int module) const {
  check_arg(module >= 0 && module < n_mtp(),
            "[llm forward_mtp] the model has no MTP module " + std::to_string(module));
  const LlmConfig& c = config_;
  check_arg(cache.n_layers() == 1, "[llm forward_mtp] the MTP cache has one layer");
  Staged st = stage(batch, cache, s);
  check_arg(hidden.dim(0) == st.n_tok && hidden.dim(1) == c.hidden_size &&
                hidden.device() == device_ && hidden.dtype() == dtype_,
            "[llm forward_mtp] the hidden states must be [tokens, hidden] on the model's device");
  const bool on_host = device_ == Device::cpu;
  Pool& host = on_host ? s.pool : s.host;
  upload(st, s);
  Tensor dev_logits = s.pool.alloc({st.n_out, c.vocab_size}, DType::f32);
  logits = on_host ? dev_logits : host.alloc({st.n_out, c.vocab_size}, DType::f32);
  const StepInputs step{&st.pos, &st.slots, s.paged, on_host ? nullptr : &s.tables};
  run_mtp_device(weights_.mtp[size_t(module)], step, st.ids, hidden, st.out_rows, cache, s.pool,
                 host, dev_logits);
  if (!on_host && st.n_out > 0) logits.copy_from(dev_logits);
}

void LlmModel::forward_decode_graph(int64_t n_rows, const Tensor& ids, const Tensor& pos,
                                    const Tensor& slots, KvCache& cache, Tensor& logits,
                                    ForwardScratch& s) const {
  const LlmConfig& c = config_;
  const int64_t b = n_rows;
  // The fixed layout of the graphs' input buffer for b rows:
  //   [ids b | positions b | slots b | logit rows b | table tokens 3b | tiles 2 | blocks ...];
  // the block tables are data (each token names its table's offset), so their total length may
  // change between replays within the buffer's capacity.
  int64_t n_blocks = 0, max_splits = 1;
  for (const PagedRow& r : s.paged) {
    n_blocks += int64_t(r.block_table.size());
    max_splits = std::max(max_splits, paged_splits(r.start_pos));
  }
  const int64_t fixed = 7 * b + 2, need = fixed + n_blocks;
  auto grow = [&](Tensor& buf, const Shape& shape, DType dtype) {
    buf = Tensor::empty(shape, dtype, Device::cuda);
    s.graphs.clear();  // the graphs point into the old buffer
  };
  if (!s.graph_input.defined() || s.graph_input.numel() < need)
    grow(s.graph_input, {std::max<int64_t>(2 * need, 4096)}, DType::i32);
  if (!s.graph_logits.defined() || s.graph_logits.dim(0) < b)
    grow(s.graph_logits, {std::max<int64_t>(b, 8), c.vocab_size}, DType::f32);
  Tensor staged = s.host.alloc({need}, DType::i32);
  int32_t* st = staged.data<int32_t>();
  std::copy_n(ids.data<int32_t>(), b, st);
  std::copy_n(pos.data<int32_t>(), b, st + b);
  std::copy_n(slots.data<int32_t>(), b, st + 2 * b);
  for (int64_t i = 0; i < b; ++i) st[3 * b + i] = int32_t(i);
  int32_t* tok = st + 4 * b;
  int32_t* blocks = st + fixed;
  int64_t off = 0;
  for (int64_t i = 0; i < b; ++i) {
    const PagedRow& r = s.paged[size_t(i)];
    tok[3 * i] = int32_t(r.start_pos);
    tok[3 * i + 1] = int32_t(off);
    tok[3 * i + 2] = int32_t(i);  // every token has a split slot
    std::copy(r.block_table.begin(), r.block_table.end(), blocks + off);
    off += int64_t(r.block_table.size());
  }
  st[7 * b] = st[7 * b + 1] = 0;  // no prefill tiles
  Tensor in = s.graph_input.slice0(0, need);
  in.copy_from(staged);

  const Tensor& buf = s.graph_input;
  Tensor d_ids = buf.slice0(0, b), d_pos = buf.slice0(b, 2 * b), d_slots = buf.slice0(2 * b, 3 * b);
  Tensor d_rows = buf.slice0(3 * b, 4 * b);
  PagedTables& tb = s.tables;
  tb.tokens = buf.slice0(4 * b, 7 * b).reshape({b, 3});
  tb.tiles = buf.slice0(7 * b, 7 * b + 2).reshape({1, 2});
  // The graph reads up to the buffer's end: the capacity, not this step's length, is its shape.
  tb.blocks = buf.slice0(fixed, buf.numel());
  tb.n_tiles = 0;
  tb.split_tokens = b;
  tb.max_splits = max_splits;
  Tensor out = s.graph_logits.slice0(0, b);
  const StepInputs step{&d_pos, &d_slots, s.paged, &tb};
  s.graphs.run({b, max_splits, 0},
               [&] { run_device(step, d_ids, d_rows, cache, s.pool, s.host, out); });
  const bool softcap = c.final_logit_softcapping > 0;
  if (s.logits_on_device && !softcap) {
    logits = out;
  } else {
    logits = s.host.alloc({b, c.vocab_size}, DType::f32);
    logits.copy_from(out);
  }
}

void LlmModel::run_device(const StepInputs& step, const Tensor& ids, const Tensor& out_rows,
                          KvCache& cache, Pool& pool, Pool& host, Tensor& dev_logits,
                          Tensor* hidden_out) const {
  const LlmConfig& c = config_;
  const FamilySpec spec = family_spec(c);
  const int64_t n_tok = ids.dim(0), n_out = dev_logits.dim(0);
  const int64_t h_dim = c.hidden_size;
  Tensor h = pool.alloc({n_tok, h_dim}, dtype_);  // the residual stream
  embedding(weights_.embed, ids, h);
  if (spec.embed_scale) scale(h, bf16_to_f32(f32_to_bf16(std::sqrt(float(h_dim)))), h);
  Tensor x = pool.alloc({n_tok, h_dim}, dtype_);
  Tensor y = pool.alloc({n_tok, h_dim}, dtype_);
  // Each residual add and the norm after it are one add_rms_norm (add then rms_norm on the
  // CPU, one kernel on CUDA).
  rms_norm(h, weights_.layers[0].attn_norm, c.rms_norm_eps, x);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = weights_.layers[size_t(l)];
    const Tensor& inv_freq = c.is_sliding_layer(l) ? inv_freq_local_ : inv_freq_global_;
    attention_block(c, spec, w, l, x, step, inv_freq, cache, pool, y);
    if (spec.sandwich_norms) rms_norm(y, w.attn_out_norm, c.rms_norm_eps, y);
    add_rms_norm(h, y, w.mlp_norm, c.rms_norm_eps, x);
    if (c.is_moe_layer(l))
      moe_block(c, spec, w, x, pool, host, y);
    else
      mlp_block(spec, w, x, pool, y);
    if (spec.sandwich_norms) rms_norm(y, w.mlp_out_norm, c.rms_norm_eps, y);
    if (l + 1 < c.n_layers)
      add_rms_norm(h, y, weights_.layers[size_t(l + 1)].attn_norm, c.rms_norm_eps, x);
    else
      add(h, y, h);
  }
  if (hidden_out) {
    if (!weights_.mtp.empty() && weights_.mtp[0].hidden_before_final_norm) {
      *hidden_out = h;
    } else {
      *hidden_out = pool.alloc({n_tok, h_dim}, dtype_);
      rms_norm(h, weights_.final_norm, c.rms_norm_eps, *hidden_out);
    }
  }
  if (n_out == 0) return;
  const bool on_host = device_ == Device::cpu;
  // The rows that want logits, gathered (the embedding op over h), normed, projected.
  Tensor sel = pool.alloc({n_out, h_dim}, dtype_);
  embedding(h, out_rows.slice0(0, n_out), sel);
  Tensor normed = pool.alloc({n_out, h_dim}, dtype_);
  rms_norm(sel, weights_.final_norm, c.rms_norm_eps, normed);
  // The head in its blocks on the CPU (a quantized GGUF's); on CUDA the dense one when there is
  // one (the tied embedding), as the quantized CUDA kernel is far slower than the GEMM.
  const bool dense_head = weights_.lm_head.defined() && weights_.lm_head.numel() > 0;
  if (weights_.lm_head_quant.rows > 0 && (on_host || !dense_head)) {
    if (normed.dtype() == DType::f32) {
      matmul_quant(normed, weights_.lm_head_quant, dev_logits);
    } else {
      Tensor n32 = pool.alloc(normed.shape(), DType::f32);
      convert(normed, n32);
      matmul_quant(n32, weights_.lm_head_quant, dev_logits);
    }
  } else {
    MatmulOptions opt;
    opt.trans_b = true;
    opt.batch_invariant = true;
    matmul(normed, weights_.lm_head, dev_logits, opt);
  }
}

void LlmModel::run_mtp_device(const MtpWeights& m, const StepInputs& step, const Tensor& ids,
                              const Tensor& hidden, const Tensor& out_rows, KvCache& cache,
                              Pool& pool, Pool& host, Tensor& dev_logits) const {
  const LlmConfig& c = config_;
  const FamilySpec spec = family_spec(c);
  const int64_t n_tok = ids.dim(0), n_out = dev_logits.dim(0), h_dim = c.hidden_size;
  const float eps = c.rms_norm_eps;
  // x = proj_embed norm_embed(e) + proj_hidden norm_hidden(h), e zeroed at position 0.
  Tensor e = pool.alloc({n_tok, h_dim}, dtype_);
  embedding(weights_.embed, ids, e);
  for (const PagedRow& r : step.rows)
    if (r.start_pos == 0) {
      Tensor first = e.slice0(r.q_begin, r.q_begin + 1);
      scale(first, 0.0f, first);
    }
  Tensor en = pool.alloc({n_tok, h_dim}, dtype_), hn = pool.alloc({n_tok, h_dim}, dtype_);
  rms_norm(e, m.norm_embed, eps, en);
  rms_norm(hidden, m.norm_hidden, eps, hn);
  Tensor x = pool.alloc({n_tok, h_dim}, dtype_);
  MatmulOptions opt;
  opt.trans_b = true;
  opt.batch_invariant = true;
  matmul(en, m.proj_embed, x, opt);
  opt.beta = 1.0f;
  matmul(hn, m.proj_hidden, x, opt);
  // The base family's decoder layer over the module's own cache layer.
  const LayerWeights& w = m.block;
  Tensor a = pool.alloc({n_tok, h_dim}, dtype_), y = pool.alloc({n_tok, h_dim}, dtype_);
  rms_norm(x, w.attn_norm, eps, a);
  attention_block(c, spec, w, 0, a, step, inv_freq_global_, cache, pool, y);
  add_rms_norm(x, y, w.mlp_norm, eps, a);
  if (w.router.defined())
    moe_block(c, spec, w, a, pool, host, y);
  else
    mlp_block(spec, w, a, pool, y);
  add(x, y, x);
  if (n_out == 0) return;
  Tensor sel = pool.alloc({n_out, h_dim}, dtype_), normed = pool.alloc({n_out, h_dim}, dtype_);
  embedding(x, out_rows.slice0(0, n_out), sel);
  rms_norm(sel, m.final_norm, eps, normed);
  MatmulOptions head;
  head.trans_b = true;
  head.batch_invariant = true;
  matmul(normed, m.head, dev_logits, head);
}

}  // namespace parley
