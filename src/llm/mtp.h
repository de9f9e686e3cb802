// Multi-token-prediction (MTP) modules of a checkpoint (MtpWeights, llm/weights.h): found by
// their tensor names and loaded beside the target's layers. Forward: LlmModel::forward_mtp.
//
// What an MTP module computes for position i (vLLM's deepseek_mtp.py and mimo_mtp.py; the
// DeepSeek-V3 report, section 2.2): with h_i the target's hidden state at i and e the
// embedding of token i + 1 (zeroed where i = 0, as vLLM does),
//   x = proj(cat(norm_embed(e), norm_hidden(h_i)))        (MiMo: cat(norm_hidden(h_i), ...))
//   y = decoder_layer(x) at position i, over the module's own KV cache (one layer)
//   logits = head(final_norm(y))                           the token at i + 2
// Layouts:
//   DeepSeek-V3 / GLM-4.5: model.layers.{n_layers}.{enorm, hnorm, eh_proj, shared_head.norm,
//     shared_head.head} and that index's decoder-layer tensors; h after model.norm.
//   XiaomiMiMo: model.mtp_layers.{k}.{token_layernorm, hidden_layernorm, input_proj,
//     final_layernorm} and the Qwen2 layer's tensors under the same prefix; h before
//     model.norm; the target's lm_head.
// The decoder layer is the base family's (parley has no DeepSeek-V3 attention or MoE, so a
// DeepSeek-V3 checkpoint itself does not load; the layout does, over Llama / Qwen bases).
#pragma once

#include <string>
#include <vector>

#include "llm/config.h"
#include "llm/families/families.h"
#include "llm/weights.h"

namespace parley {

// Every MTP module `src` holds (none: empty). `lm_head` is the target's, for layouts that
// share it. A partial module (some of its tensors missing) is a not_found error naming one.
std::vector<MtpWeights> load_mtp(const TensorSource& src, const std::string& prefix,
                                 const LlmConfig& config, const FamilySpec& spec,
                                 const Tensor& lm_head);

// The config of an MTP module's KV cache: the target's attention shape, one layer.
LlmConfig mtp_cache_config(const LlmConfig& config);

}  // namespace parley
