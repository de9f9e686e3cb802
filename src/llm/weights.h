// LlmWeights: the tensors of a chat model, f32, by role (not by file name), so the shared
// blocks (blocks.h) read the same fields for every family; a family file (families/)
// states which tensors it has and what they are called. Absent optional tensors are
// undefined Tensors.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "llm/config.h"

namespace parley {

struct ExpertWeights {
  Tensor gate, up, down;  // [I, H], [I, H], [H, I]
};

struct LayerWeights {
  Tensor attn_norm;                    // [H] before attention (Gemma: 1 + w, folded at load)
  Tensor q, k, v, o;                   // [Hq*D, H], [Hkv*D, H], [Hkv*D, H], [H, Hq*D]
  Tensor q_bias, k_bias, v_bias;       // [Hq*D], [Hkv*D], [Hkv*D] (Qwen2, Llama attention_bias)
  Tensor o_bias;                       // [H] (Llama attention_bias)
  Tensor q_norm, k_norm;               // [D] per-head RMSNorm before RoPE (Qwen3, Gemma 3)
  Tensor attn_out_norm;                // [H] on the attention output (Gemma 3)
  Tensor mlp_norm;                     // [H] before the MLP
  Tensor mlp_out_norm;                 // [H] on the MLP output (Gemma 3)
  Tensor gate, up, down;               // dense MLP: [I, H], [I, H], [H, I]
  Tensor router;                       // MoE: [E, H]
  std::vector<ExpertWeights> experts;  // MoE: E experts of moe_intermediate_size
};

struct LlmWeights {
  Tensor embed;       // [V, H]
  Tensor final_norm;  // [H]
  Tensor lm_head;     // [V, H]; the embedding itself when tied
  std::vector<LayerWeights> layers;
};

// Where a family's loader takes tensors from: every tensor of the model's safetensors
// files by name. get() checks the shape against the config's and widens 16-bit data to
// f32; a missing tensor is not_found and a wrong shape invalid_argument, both naming it.
class TensorSource {
 public:
  TensorSource(std::map<std::string, Tensor> tensors, std::string dir);
  bool has(const std::string& name) const;
  Tensor get(const std::string& name, const Shape& shape) const;
  // get() plus 1 on every element: Gemma's RMSNorm scales by (1 + w).
  Tensor get_plus_one(const std::string& name, const Shape& shape) const;
  const std::string& dir() const { return dir_; }

 private:
  std::map<std::string, Tensor> tensors_;
  std::string dir_;
};

// Every tensor of DIR's model.safetensors or of the shards model.safetensors.index.json
// names (mmap'ed views).
TensorSource open_tensor_source(const std::string& dir);

}  // namespace parley
