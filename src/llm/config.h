// LlmConfig: the hyper-parameters of a chat model, read from a Hugging Face config.json.
// Families: llama (and mistral without a sliding window), qwen2, qwen3, qwen3_moe,
// gemma3_text (and gemma3 with a text_config). Defaults for absent keys are those of the
// family's transformers config class. rope_scaling types: default, linear, llama3; yarn,
// dynamic and the rest are Error(unsupported) for now.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/ops/rope.h"

namespace parley {

enum class LlmFamily { llama, qwen2, qwen3, qwen3_moe, gemma3 };

const char* family_name(LlmFamily f);

struct LlmConfig {
  std::string model_type;  // as config.json spells it ("llama", "mistral", "gemma3_text", ...)
  LlmFamily family = LlmFamily::llama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;  // its own key in Qwen3 / Gemma; else hidden_size / n_heads
  int64_t intermediate_size = 0;
  float rms_norm_eps = 1e-6f;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;  // for Gemma 3: the global layers only
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q, k, v (and Llama's o) biases
  int64_t max_position_embeddings = 0;

  // Qwen3-MoE: layer l is routed when num_experts > 0, l is not in mlp_only_layers and
  // (l + 1) % decoder_sparse_step == 0.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t decoder_sparse_step = 1;
  bool norm_topk_prob = false;
  std::vector<int64_t> mlp_only_layers;

  // Gemma 3: scores scaled by query_pre_attn_scalar^-1/2; sliding (local) layers see the
  // last sliding_window positions and use rope_local_base_freq.
  float query_pre_attn_scalar = 0.0f;
  int64_t sliding_window = 0;
  std::vector<bool> layer_sliding;  // per layer; empty for families without local layers
  double rope_local_base_freq = 10000.0;
  float final_logit_softcapping = 0.0f;  // 0: none
  float attn_logit_softcapping = 0.0f;   // 0: none

  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;

  bool is_moe_layer(int64_t layer) const;
  bool is_sliding_layer(int64_t layer) const {
    return !layer_sliding.empty() && layer_sliding[size_t(layer)];
  }
};

// Parses config.json text; `source` names it in messages ("[llm config] DIR/config.json").
// A missing required key or a bad value is invalid_argument, an unknown model_type or an
// unsupported feature (rope_scaling yarn, a Mistral sliding window) unsupported.
LlmConfig parse_llm_config(const std::string& json_text, const std::string& source);
// DIR/config.json (not_found when absent).
LlmConfig load_llm_config(const std::string& dir);

}  // namespace parley
