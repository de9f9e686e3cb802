// LlmWeights: the tensors of a chat model (f32 on the CPU; the load dtype on CUDA), by role (not by
// file name), so the shared blocks (blocks.h) read the same fields for every family; a family file
// (families/) states which tensors it has and what they are called. Absent optional tensors are
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
  // CUDA: q, k, v stacked as one [(Hq + 2 Hkv) D, H] projection (biases likewise) and gate,
  // up as one [2 I, H] (the separate tensors are then dropped): one GEMM instead of three
  // and two, feeding qkv_rope_write and glu_halves (ops/llm_fused.h).
  Tensor qkv, qkv_bias, gate_up;
};

// A multi-token-prediction (MTP) module: one more decoder layer that predicts the token
// after next from the target's hidden state at position i and the embedding of token i + 1
// (DeepSeek-V3's MTP module as vLLM runs it to draft for speculative decoding). The two
// layouts parley reads (llm/mtp.h says which tensors): DeepSeek-V3's (also GLM-4.5's),
// model.layers.{n_layers}.{enorm, hnorm, eh_proj, shared_head.norm, shared_head.head}, and
// XiaomiMiMo's, model.mtp_layers.{i}.{token_layernorm, hidden_layernorm, input_proj,
// final_layernorm}; the decoder layer is the base family's.
enum class MtpLayout { deepseek_v3, mimo };
struct MtpWeights {
  MtpLayout layout = MtpLayout::deepseek_v3;
  Tensor norm_embed, norm_hidden;  // [H]: RMSNorm of the embedding and of the target's hidden
  // The [H, 2H] projection of [embedding ; hidden] (MiMo: [hidden ; embedding]) as its two
  // [H, H] column halves: proj(cat(e, h)) = proj_embed e + proj_hidden h.
  Tensor proj_embed, proj_hidden;
  LayerWeights block;
  Tensor final_norm;  // [H] before the head
  Tensor head;        // [V, H]: DeepSeek-V3's own shared_head.head, else the target's lm_head
  // The hidden state it reads: the target's after model.norm (DeepSeek-V3: vLLM feeds the
  // model's normed output) or before it (MiMo: vLLM's MiMo model returns the residual stream
  // and norms in compute_logits).
  bool hidden_before_final_norm = false;
};

struct LlmWeights {
  Tensor embed;               // [V, H]
  Tensor final_norm;          // [H]
  Tensor lm_head;             // [V, H]; the embedding itself when tied
  QuantMatrix lm_head_quant;  // [V, H] in a GGUF's blocks (tied: the embedding's), rows 0: none
  std::vector<LayerWeights> layers;
  Tensor rope_freq_factors;     // [D/2] divisors of the global inv_freq (a GGUF's rope_freqs)
  std::vector<MtpWeights> mtp;  // the checkpoint's MTP modules (none: empty)
};

// Where a family's loader takes tensors from: every tensor of the model's safetensors
// files by name. get() checks the shape against the config's and widens 16-bit data to
// f32; a missing tensor is not_found and a wrong shape invalid_argument, both naming it.
class TensorSource {
 public:
  TensorSource(std::map<std::string, Tensor> tensors, std::string dir);
  bool has(const std::string& name) const;
  // The tensor in the target dtype on the target device (set_target; f32 on the CPU by
  // default): a view of the file when it already is that, else a converted copy.
  Tensor get(const std::string& name, const Shape& shape) const;
  // get() plus 1 on every element: Gemma's RMSNorm scales by (1 + w). Added in f32 and
  // kept f32 whatever the target dtype (the norms take f32 weights).
  Tensor get_plus_one(const std::string& name, const Shape& shape) const;
  // Where get() puts tensors and in which dtype (a model loaded for CUDA in bf16);
  // quantized weights (quant()) are the caller's to move.
  void set_target(Device device, DType dtype) {
    device_ = device;
    dtype_ = dtype;
  }
  Device device() const { return device_; }
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
  Tensor get_as(const std::string& name, const Shape& shape, Device device, DType dtype) const;
  std::string display(const std::string& name) const;
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, QuantMatrix> quant_;
  std::string dir_;
  std::function<std::string(const std::string&)> name_of_;
  bool plus_one_stored_ = false;
  Device device_ = Device::cpu;
  DType dtype_ = DType::f32;
};

// Every tensor of DIR's model.safetensors or of the shards model.safetensors.index.json
// names (mmap'ed views).
TensorSource open_tensor_source(const std::string& dir);

}  // namespace parley
