// Gemma 3 (text): RMSNorm scales by (1 + w); embeddings times sqrt(hidden); norms before
// and after both attention and MLP; GeGLU with the tanh GELU; q/k norms; scores scaled by
// query_pre_attn_scalar^-1/2; sliding (local) layers with their own RoPE base. The
// attention scale, the window and the local base come from LlmConfig (blocks.cpp).
#include "llm/families/families.h"

namespace parley {

FamilySpec gemma3_family(const LlmConfig&) {
  FamilySpec s;
  s.qk_norm = true;
  s.norm_plus_one = true;
  s.sandwich_norms = true;
  s.embed_scale = true;
  s.act = GluActivation::gelu_tanh;
  s.mlp_norm = "pre_feedforward_layernorm";
  return s;
}

}  // namespace parley
