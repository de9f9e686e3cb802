// LlmWeights: the tensors of a chat model, f32, by role (not by file name), so the shared
// blocks (blocks.h) read the same fields for every family; a family file (families/)
// states which tensors it has and what they are called. Absent optional tensors are
// undefined Tensors.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/quant.h"
#include "engine/tensor.h"
#include "llm/config.h"

namespace parley {

// A linear weight either as a Tensor or, from a GGUF, still in ggml's blocks: when
// `quant.rows > 0` the Tensor is undefined and the layer calls matmul_quant.
struct ExpertWeights {
  Tensor gate, up, down;  // [I, H], [I, H], [H, I]
  QuantMatrix gate_quant, up_quant, down_quant;
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
  // Block-quantized forms of q, k, v, o, gate, up, down (rows == 0: the Tensor is used).
  QuantMatrix q_quant, k_quant, v_quant, o_quant, gate_quant, up_quant, down_quant;
};

struct LlmWeights {
  Tensor embed;       // [V, H]
  Tensor final_norm;  // [H]
  Tensor lm_head;     // [V, H]; the embedding itself when tied
  std::vector<LayerWeights> layers;
  Tensor rope_freq_factors;  // [D/2] divisors of the global inv_freq (a GGUF's rope_freqs)
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
  // Block-quantized weights by name (a GGUF's Q8_0, Q4_K, ...), kept out of get().
  void set_quant(std::map<std::string, QuantMatrix> quant) { quant_ = std::move(quant); }
  // The quantized form of `name` (shape [N, K], or [E, N, K] for stacked experts), or null
  // when the tensor is not quantized; a wrong shape is invalid_argument.
  const QuantMatrix* quant(const std::string& name, const Shape& shape) const;
  // Messages name tensors as the file does (a GGUF's "blk.0.attn_q.weight").
  void set_file_names(std::function<std::string(const std::string&)> name_of) {
    name_of_ = std::move(name_of);
  }
  // The file stores Gemma's norms as 1 + w already (llama.cpp's GGUF): get_plus_one = get.
  void set_norms_plus_one_stored(bool stored) { plus_one_stored_ = stored; }

 private:
  std::string display(const std::string& name) const;
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, QuantMatrix> quant_;
  std::string dir_;
  std::function<std::string(const std::string&)> name_of_;
  bool plus_one_stored_ = false;
};

// Every tensor of DIR's model.safetensors or of the shards model.safetensors.index.json
// names (mmap'ed views).
TensorSource open_tensor_source(const std::string& dir);

}  // namespace parley
