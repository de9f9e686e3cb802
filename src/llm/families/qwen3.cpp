// Qwen3: Llama with a per-head RMSNorm on q and k (weights [head_dim]) before RoPE, and
// head_dim as its own config key; no biases.
#include "llm/families/families.h"

namespace parley {

FamilySpec qwen3_family(const LlmConfig& config) {
  FamilySpec s;
  s.qk_norm = true;
  s.qkv_bias = config.attention_bias;
  return s;
}

}  // namespace parley
