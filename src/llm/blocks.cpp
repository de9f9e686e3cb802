// Shared decoder-layer blocks (see blocks.h).
#include "llm/blocks.h"

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
#include "engine/ops/scatter_rows.h"

namespace parley {

LayerWeights load_layer(const TensorSource& src, const std::string& prefix, const LlmConfig& c,
                        const FamilySpec& spec, int64_t layer) {
  return load_layer_at(src, prefix + "model.layers." + std::to_string(layer) + ".", c, spec, layer);
}

LayerWeights load_layer_at(const TensorSource& src, const std::string& p, const LlmConfig& c,
                           const FamilySpec& spec, int64_t layer) {
  const int64_t h = c.hidden_size, d = c.head_dim, qd = c.n_heads * d, kvd = c.n_kv_heads * d;
  auto norm = [&](const std::string& name, int64_t n) {
    return spec.norm_plus_one ? src.get_plus_one(p + name + ".weight", {n})
                              : src.get(p + name + ".weight", {n});
  };
  // A linear weight: still quantized when the source has it in blocks (GGUF), else f32.
  auto lin = [&](const std::string& name, const Shape& shape, Tensor& t, QuantMatrix& q) {
    if (const QuantMatrix* m = src.quant(name, shape))
      q = m->device == src.device() ? *m : quant_matrix_to(*m, src.device());
    else
      t = src.get(name, shape);
  };
  LayerWeights w;
  w.attn_norm = norm("input_layernorm", h);
  lin(p + "self_attn.q_proj.weight", {qd, h}, w.q, w.q_quant);
  lin(p + "self_attn.k_proj.weight", {kvd, h}, w.k, w.k_quant);
  lin(p + "self_attn.v_proj.weight", {kvd, h}, w.v, w.v_quant);
  lin(p + "self_attn.o_proj.weight", {h, qd}, w.o, w.o_quant);
  if (spec.qkv_bias) {
    w.q_bias = src.get(p + "self_attn.q_proj.bias", {qd});
    w.k_bias = src.get(p + "self_attn.k_proj.bias", {kvd});
    w.v_bias = src.get(p + "self_attn.v_proj.bias", {kvd});
  }
  if (spec.o_bias) w.o_bias = src.get(p + "self_attn.o_proj.bias", {h});
  if (spec.qk_norm) {
    w.q_norm = norm("self_attn.q_norm", d);
    w.k_norm = norm("self_attn.k_norm", d);
  }
  if (spec.sandwich_norms) {
    w.attn_out_norm = norm("post_attention_layernorm", h);
    w.mlp_out_norm = norm("post_feedforward_layernorm", h);
  }
  w.mlp_norm = norm(spec.mlp_norm, h);
  if (!c.is_moe_layer(layer)) {
    const int64_t i = c.intermediate_size;
    lin(p + "mlp.gate_proj.weight", {i, h}, w.gate, w.gate_quant);
    lin(p + "mlp.up_proj.weight", {i, h}, w.up, w.up_quant);
    lin(p + "mlp.down_proj.weight", {h, i}, w.down, w.down_quant);
    return w;
  }
  const int64_t e = c.num_experts, i = c.moe_intermediate_size;
  w.router = src.get(p + "mlp.gate.weight", {e, h});
  // Hugging Face stores experts one by one; mlx-lm's sanitize stacks them as switch_mlp.
  const bool stacked = src.has(p + "mlp.switch_mlp.gate_proj.weight");
  Tensor sg, su, sd;
  QuantMatrix qg, qu, qdn;
  if (stacked) {
    lin(p + "mlp.switch_mlp.gate_proj.weight", {e, i, h}, sg, qg);
    lin(p + "mlp.switch_mlp.up_proj.weight", {e, i, h}, su, qu);
    lin(p + "mlp.switch_mlp.down_proj.weight", {e, h, i}, sd, qdn);
  }
  // Expert x of a stacked quantized [E * N, K] matrix: its N rows, same blocks.
  auto expert_rows = [](const QuantMatrix& m, int64_t x, int64_t n) {
    return quant_rows(m, x * n, n);
  };
  for (int64_t x = 0; x < e; ++x) {
    ExpertWeights ew;
    if (stacked) {
      if (qg.rows > 0)
        ew.gate_quant = expert_rows(qg, x, i);
      else
        ew.gate = sg.slice0(x, x + 1).reshape({i, h});
      if (qu.rows > 0)
        ew.up_quant = expert_rows(qu, x, i);
      else
        ew.up = su.slice0(x, x + 1).reshape({i, h});
      if (qdn.rows > 0)
        ew.down_quant = expert_rows(qdn, x, h);
      else
        ew.down = sd.slice0(x, x + 1).reshape({h, i});
    } else {
      const std::string q = p + "mlp.experts." + std::to_string(x) + ".";
      ew.gate = src.get(q + "gate_proj.weight", {i, h});
      ew.up = src.get(q + "up_proj.weight", {i, h});
      ew.down = src.get(q + "down_proj.weight", {h, i});
    }
    w.experts.push_back(std::move(ew));
  }
  return w;
}

namespace {

// out = x @ w^T + bias. matmul_quant takes f32 activations: 16-bit ones (CUDA) go through
// f32 copies from `pool`, and the bias is added in out's dtype.
void linear(const Tensor& x, const Tensor& w, const QuantMatrix& wq, const Tensor& bias, Pool& pool,
            Tensor& out) {
  const bool has_bias = bias.defined() && bias.numel() > 0;
  if (wq.rows > 0 && x.dtype() == DType::f32) {
    MatmulQuantOptions qo;
    if (has_bias) qo.bias = &bias;
    matmul_quant(x, wq, out, qo);
    return;
  }
  if (wq.rows > 0) {
    Tensor x32 = pool.alloc(x.shape(), DType::f32);
    Tensor o32 = pool.alloc(out.shape(), DType::f32);
    convert(x, x32);
    matmul_quant(x32, wq, o32);
    convert(o32, out);
    if (has_bias) add(out, bias, out);
    return;
  }
  MatmulOptions opt;
  opt.trans_b = true;
  opt.batch_invariant = true;  // a request's rows do not depend on the batch beside them
  if (has_bias) opt.bias = &bias;
  matmul(x, w, out, opt);
}

void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Pool& pool, Tensor& out) {
  linear(x, w, QuantMatrix(), bias, pool, out);
}

void mlp_impl(const FamilySpec& spec, const Tensor& gate, const QuantMatrix& gq, const Tensor& up,
              const QuantMatrix& uq, const Tensor& down, const QuantMatrix& dq, const Tensor& x,
              Pool& pool, Tensor& out) {
  const int64_t t = x.dim(0), i = gq.rows > 0 ? gq.rows : gate.dim(0);
  Tensor g = pool.alloc({t, i}, x.dtype());
  Tensor u = pool.alloc({t, i}, x.dtype());
  linear(x, gate, gq, Tensor(), pool, g);
  linear(x, up, uq, Tensor(), pool, u);
  glu(g, u, spec.act, g);
  linear(g, down, dq, Tensor(), pool, out);
}

}  // namespace

void attention_block(const LlmConfig& c, const FamilySpec& spec, const LayerWeights& w,
                     int64_t layer, const Tensor& x, const StepInputs& step, const Tensor& inv_freq,
                     KvCache& cache, Pool& pool, Tensor& out) {
  const int64_t t = x.dim(0), d = c.head_dim, hq = c.n_heads, hkv = c.n_kv_heads;
  const DType dt = x.dtype();
  PagedAttentionOptions opt;
  opt.scale = c.query_pre_attn_scalar > 0 ? 1.0f / std::sqrt(c.query_pre_attn_scalar)
                                          : 1.0f / std::sqrt(float(d));
  opt.sliding_window = c.is_sliding_layer(layer) ? c.sliding_window : 0;
  opt.softcap = c.attn_logit_softcapping;
  opt.tables = step.tables;
  Tensor attn = pool.alloc({t, hq, d}, dt);
  if (w.qkv.defined() && w.qkv.numel() > 0) {  // CUDA: one projection, one fused kernel
    Tensor qkv = pool.alloc({t, (hq + 2 * hkv) * d}, dt);
    linear(x, w.qkv, QuantMatrix(), w.qkv_bias, pool, qkv);
    Tensor q3 = pool.alloc({t, hq, d}, dt);
    QkvRope a;
    a.n_q_heads = hq;
    a.n_kv_heads = hkv;
    if (spec.qk_norm) {
      a.q_norm = &w.q_norm;
      a.k_norm = &w.k_norm;
    }
    a.eps = c.rms_norm_eps;
    a.positions = step.positions;
    a.inv_freq = &inv_freq;
    a.slots = step.slots;
    qkv_rope_write(qkv, a, q3, cache.k(layer), cache.v(layer));
    paged_attention(q3, cache.k(layer), cache.v(layer), step.rows, attn, opt);
    linear(attn.reshape({t, hq * d}), w.o, w.o_quant, w.o_bias, pool, out);
    return;
  }
  Tensor q = pool.alloc({t, hq * d}, dt);
  Tensor k = pool.alloc({t, hkv * d}, dt);
  Tensor v = pool.alloc({t, hkv * d}, dt);
  linear(x, w.q, w.q_quant, w.q_bias, pool, q);
  linear(x, w.k, w.k_quant, w.k_bias, pool, k);
  linear(x, w.v, w.v_quant, w.v_bias, pool, v);
  Tensor q3 = q.reshape({t, hq, d}), k3 = k.reshape({t, hkv, d}), v3 = v.reshape({t, hkv, d});
  if (spec.qk_norm) {
    Tensor qf = q.reshape({t * hq, d}), kf = k.reshape({t * hkv, d});
    rms_norm(qf, w.q_norm, c.rms_norm_eps, qf);
    rms_norm(kf, w.k_norm, c.rms_norm_eps, kf);
  }
  rope(q3, *step.positions, inv_freq);
  rope(k3, *step.positions, inv_freq);
  paged_kv_write(k3, v3, *step.slots, cache.k(layer), cache.v(layer));
  paged_attention(q3, cache.k(layer), cache.v(layer), step.rows, attn, opt);
  linear(attn.reshape({t, hq * d}), w.o, w.o_quant, w.o_bias, pool, out);
}

void mlp_block(const FamilySpec& spec, const Tensor& gate, const Tensor& up, const Tensor& down,
               const Tensor& x, Pool& pool, Tensor& out) {
  mlp_impl(spec, gate, QuantMatrix(), up, QuantMatrix(), down, QuantMatrix(), x, pool, out);
}

void mlp_block(const FamilySpec& spec, const LayerWeights& w, const Tensor& x, Pool& pool,
               Tensor& out) {
  if (w.gate_up.defined() && w.gate_up.numel() > 0) {  // CUDA: one [2I, H] projection
    const int64_t t = x.dim(0), i = w.gate_up.dim(0) / 2;
    Tensor gu = pool.alloc({t, 2 * i}, x.dtype());
    Tensor g = pool.alloc({t, i}, x.dtype());
    linear(x, w.gate_up, QuantMatrix(), Tensor(), pool, gu);
    glu_halves(gu, spec.act, g);
    linear(g, w.down, w.down_quant, Tensor(), pool, out);
    return;
  }
  mlp_impl(spec, w.gate, w.gate_quant, w.up, w.up_quant, w.down, w.down_quant, x, pool, out);
}

void moe_block(const LlmConfig& c, const FamilySpec& spec, const LayerWeights& w, const Tensor& x,
               Pool& pool, Pool& host, Tensor& out) {
  const int64_t t = x.dim(0), h = x.dim(1), n_exp = c.num_experts, top_k = c.num_experts_per_tok;
  const bool on_host = x.device() == Device::cpu;
  Tensor router = pool.alloc({t, n_exp}, DType::f32);
  linear(x, w.router, Tensor(), pool, router);
  if (!on_host) {  // the routing runs on the host: the router's [T, E] comes down
    Tensor r = host.alloc({t, n_exp}, DType::f32);
    r.copy_from(router);
    router = r;
  }
  // Routing: per token its k experts (expert-major lists built by counting sort).
  Tensor choice = host.alloc({t * top_k}, DType::i32);
  Tensor weight = host.alloc({t * top_k}, DType::f32);
  Tensor counts = host.alloc({n_exp + 1}, DType::i32);
  Tensor order = host.alloc({t * top_k}, DType::i32);  // (token * top_k + j) by expert
  int32_t* ch = choice.data<int32_t>();
  float* wt = weight.data<float>();
  int32_t* cnt = counts.data<int32_t>();
  std::fill(cnt, cnt + n_exp + 1, 0);
  for (int64_t tok = 0; tok < t; ++tok) {
    float* p = router.data<float>() + tok * n_exp;
    const float m = *std::max_element(p, p + n_exp);
    float sum = 0.0f;
    for (int64_t e = 0; e < n_exp; ++e) sum += (p[e] = std::exp(p[e] - m));
    for (int64_t e = 0; e < n_exp; ++e) p[e] /= sum;
    int32_t* sel = ch + tok * top_k;
    // Top-k by probability; the lower expert index wins a tie.
    for (int64_t j = 0; j < top_k; ++j) {
      int32_t best = -1;
      for (int32_t e = 0; e < int32_t(n_exp); ++e) {
        if (std::find(sel, sel + j, e) != sel + j) continue;
        if (best < 0 || p[e] > p[best]) best = e;
      }
      sel[j] = best;
    }
    std::sort(sel, sel + top_k);  // ascending expert order for a fixed summation order
    float norm = 0.0f;
    for (int64_t j = 0; j < top_k; ++j) norm += p[sel[j]];
    for (int64_t j = 0; j < top_k; ++j)
      wt[tok * top_k + j] = c.norm_topk_prob ? p[sel[j]] / norm : p[sel[j]];
    for (int64_t j = 0; j < top_k; ++j) ++cnt[sel[j] + 1];
  }
  for (int64_t e = 0; e < n_exp; ++e) cnt[e + 1] += cnt[e];
  {
    Tensor fill = host.alloc({n_exp}, DType::i32);
    int32_t* f = fill.data<int32_t>();
    std::copy(cnt, cnt + n_exp, f);
    // Token-major traversal keeps each expert's list in token order.
    for (int64_t a = 0; a < t * top_k; ++a) order.data<int32_t>()[f[ch[a]]++] = int32_t(a);
  }
  // Each expert on its tokens; per-token contributions land in `contrib` slot (tok, j) and
  // are summed in j order (= ascending expert) afterwards.
  const DType dt = x.dtype();
  Tensor xe = pool.alloc({t * top_k, h}, dt);
  Tensor ye = pool.alloc({t * top_k, h}, dt);
  Tensor contrib = pool.alloc({t * top_k, h}, dt);
  const int32_t* ord = order.data<int32_t>();
  const int64_t tk = t * top_k;
  Tensor order_dev;
  if (!on_host) {
    // CUDA: every expert's rows gathered at once (expert-major). The token of each slot and
    // the slot order go up in one copy from the pools (host ids would be copied by the ops
    // into fresh device memory at every MoE layer).
    Tensor staged = host.alloc({2 * tk}, DType::i32), ids = pool.alloc({2 * tk}, DType::i32);
    int32_t* st = staged.data<int32_t>();
    for (int64_t a = 0; a < tk; ++a) st[a] = ord[a] / int32_t(top_k);
    std::copy(ord, ord + tk, st + tk);
    ids.copy_from(staged);
    order_dev = ids.slice0(tk, 2 * tk);
    embedding(x, ids.slice0(0, tk), xe);
  }
  for (int64_t e = 0; e < n_exp; ++e) {
    const int64_t b = cnt[e], n = cnt[e + 1] - cnt[e];
    if (n == 0) continue;
    if (on_host)
      for (int64_t r = 0; r < n; ++r)
        std::memcpy(xe.data<float>() + r * h, x.data<float>() + (ord[b + r] / top_k) * h,
                    size_t(h) * sizeof(float));
    const int64_t at = on_host ? 0 : b;
    Tensor xin = xe.slice0(at, at + n), yout = ye.slice0(at, at + n);
    const ExpertWeights& ew = w.experts[size_t(e)];
    mlp_impl(spec, ew.gate, ew.gate_quant, ew.up, ew.up_quant, ew.down, ew.down_quant, xin, pool,
             yout);
    if (on_host)
      for (int64_t r = 0; r < n; ++r)
        std::memcpy(contrib.data<float>() + ord[b + r] * h, yout.data<float>() + r * h,
                    size_t(h) * sizeof(float));
  }
  if (!on_host) {
    // contrib[(tok, j)] = ye[expert-major slot]; out[tok] = sum_j w[tok, j] contrib[(tok, j)]
    // as a batched [1, k] x [k, H] product per token (f32 accumulation in j order).
    scatter_rows(ye, order_dev, contrib);
    Tensor w_host = host.alloc({t, 1, top_k}, dt);
    convert(weight.reshape({t, 1, top_k}), w_host);
    Tensor w_dev = pool.alloc({t, 1, top_k}, dt);
    w_dev.copy_from(w_host);
    Tensor out3 = out.reshape({t, 1, h});
    matmul(w_dev, contrib.reshape({t, top_k, h}), out3);
    return;
  }
  float* po = out.data<float>();
  for (int64_t tok = 0; tok < t; ++tok) {
    float* o = po + tok * h;
    std::fill(o, o + h, 0.0f);
    for (int64_t j = 0; j < top_k; ++j) {
      const float s = wt[tok * top_k + j];
      const float* y = contrib.data<float>() + (tok * top_k + j) * h;
      for (int64_t i = 0; i < h; ++i) o[i] += s * y[i];
    }
  }
}

}  // namespace parley
