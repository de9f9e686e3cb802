// The model families, one file each: what a family changes in the shared decoder layer
// (blocks.h). Llama is the baseline; every other family names only where it differs:
//   qwen2      q/k/v biases
//   qwen3      per-head q/k RMSNorm before RoPE, no biases
//   qwen3_moe  qwen3 with routed experts in the layers LlmConfig::is_moe_layer names
//   gemma3     (1 + w) RMSNorm, sqrt(hidden) embedding scale, norms after attention and
//              MLP too, GeGLU (tanh), q/k norms, query_pre_attn_scalar, sliding layers
#pragma once

#include "engine/ops/glu.h"
#include "llm/config.h"

namespace parley {

struct FamilySpec {
  bool qkv_bias = false;        // q_proj / k_proj / v_proj have biases
  bool o_bias = false;          // o_proj has a bias (Llama with attention_bias)
  bool qk_norm = false;         // self_attn.q_norm / k_norm over head_dim
  bool norm_plus_one = false;   // RMSNorm scales by (1 + w)
  bool sandwich_norms = false;  // post_attention_layernorm on the attention output and
                                // post_feedforward_layernorm on the MLP output
  bool embed_scale = false;     // embeddings times sqrt(hidden), rounded to bf16 as mlx-lm
  GluActivation act = GluActivation::silu;
  // The norm in front of the MLP (Llama: post_attention_layernorm).
  const char* mlp_norm = "post_attention_layernorm";
};

FamilySpec llama_family(const LlmConfig& config);
FamilySpec qwen2_family(const LlmConfig& config);
FamilySpec qwen3_family(const LlmConfig& config);
FamilySpec qwen3_moe_family(const LlmConfig& config);
FamilySpec gemma3_family(const LlmConfig& config);

// The spec of config.family.
FamilySpec family_spec(const LlmConfig& config);

}  // namespace parley
