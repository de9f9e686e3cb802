// Qwen2 / Qwen2.5: Llama with biases on q, k and v (not on o).
#include "llm/families/families.h"

namespace parley {

FamilySpec qwen2_family(const LlmConfig&) {
  FamilySpec s;
  s.qkv_bias = true;
  return s;
}

}  // namespace parley
