// Llama (also SmolLM and Mistral without a sliding window): the baseline decoder layer of
// blocks.h as it is: RMSNorm, GQA with rotate_half RoPE (llama3 / linear scaling via
// LlmConfig::rope_scaling), SwiGLU MLP; biases only with attention_bias.
#include "llm/families/families.h"

namespace parley {

FamilySpec llama_family(const LlmConfig& config) {
  FamilySpec s;
  s.qkv_bias = config.attention_bias;
  s.o_bias = config.attention_bias;
  return s;
}

FamilySpec family_spec(const LlmConfig& config) {
  switch (config.family) {
    case LlmFamily::llama: return llama_family(config);
    case LlmFamily::qwen2: return qwen2_family(config);
    case LlmFamily::qwen3: return qwen3_family(config);
    case LlmFamily::qwen3_moe: return qwen3_moe_family(config);
    case LlmFamily::gemma3: return gemma3_family(config);
  }
  return llama_family(config);
}

}  // namespace parley
