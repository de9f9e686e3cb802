// Qwen3-MoE: Qwen3's attention; the MLP of the layers LlmConfig::is_moe_layer names is a
// softmax router over num_experts SwiGLU experts, the top num_experts_per_tok weighted by
// their router probabilities (renormalized to sum 1 with norm_topk_prob). The block itself
// is moe_block (blocks.h): the config alone decides which layers route.
#include "llm/families/families.h"

namespace parley {

FamilySpec qwen3_moe_family(const LlmConfig& config) { return qwen3_family(config); }

}  // namespace parley
