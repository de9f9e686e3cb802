// The shared pieces of every family's decoder layer (llama.cpp's build_attn / build_ffn):
// weight loading by role, the attention block over the paged cache, the gated MLP and the
// routed-experts MLP. Linear weights a GGUF keeps in ggml blocks (LayerWeights' *_quant)
// go through matmul_quant. Family files (families/) only set the FamilySpec flags these read.
// Shapes: T tokens of the batch, H hidden, Hq / Hkv heads of D, I intermediate. Activations
// have x's dtype and device (f32 on the CPU).
#pragma once

#include <span>

#include "engine/ops/paged_attention.h"
#include "engine/pool.h"
#include "llm/config.h"
#include "llm/families/families.h"
#include "llm/kv_cache.h"
#include "llm/weights.h"

namespace parley {

// The tensors of layer `layer` as the family names them (prefix: "" or "language_model.").
LayerWeights load_layer(const TensorSource& src, const std::string& prefix, const LlmConfig& config,
                        const FamilySpec& spec, int64_t layer);
// The same under an explicit name prefix (path: "model.mtp_layers.0." for a MiMo MTP layer);
// `layer` only decides whether it is an MoE layer.
LayerWeights load_layer_at(const TensorSource& src, const std::string& path,
                           const LlmConfig& config, const FamilySpec& spec, int64_t layer);

// What every layer of one forward call shares.
struct StepInputs {
  const Tensor* positions;  // i32 [T]
  const Tensor* slots;      // i32 [T]: the cache slot of each new token
  std::span<const PagedRow> rows;
  const PagedTables* tables = nullptr;  // the rows on the device (CUDA)
};

// out [T, H] = o_proj(attention(x [T, H])); writes the new keys and values into `cache`.
void attention_block(const LlmConfig& config, const FamilySpec& spec, const LayerWeights& w,
                     int64_t layer, const Tensor& x, const StepInputs& step, const Tensor& inv_freq,
                     KvCache& cache, Pool& pool, Tensor& out);

// out [T, H] = down(act(gate x) * up x).
void mlp_block(const FamilySpec& spec, const Tensor& gate, const Tensor& up, const Tensor& down,
               const Tensor& x, Pool& pool, Tensor& out);
// The same with layer w's dense MLP weights, quantized or not.
void mlp_block(const FamilySpec& spec, const LayerWeights& w, const Tensor& x, Pool& pool,
               Tensor& out);

// out [T, H] = sum over the token's top-k experts e of p_e * expert_e(x); p from the
// softmax router (renormalized over the k with norm_topk_prob). Each token's sum runs in
// ascending expert order. The routing runs on the host (`host`: the same pool on the CPU;
// on CUDA the router's logits come down, and the experts' rows are gathered, run and
// scattered back on the device).
void moe_block(const LlmConfig& config, const FamilySpec& spec, const LayerWeights& w,
               const Tensor& x, Pool& pool, Pool& host, Tensor& out);

}  // namespace parley
