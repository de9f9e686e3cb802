// Chat models from one GGUF file (llama.cpp's layout): LlmConfig from the {arch}.*
// metadata, the tensors under llama.cpp's names mapped to the roles LlmWeights holds, and
// the tokenizer and chat template stored in the same file. Architectures: llama, qwen2,
// qwen3, qwen3moe (a layer without ffn_gate_inp is dense), gemma3 (score scale from
// attention.scale, else key_length^-1/2 as llama.cpp; sliding pattern from
// attention.sliding_window_pattern, else every 6th layer global).
//
// Weights: linear weights (attn_q/k/v/output, ffn_gate/up/down, the experts' stacks) in a
// block type engine/quant.h knows (Q4_0 .. Q8_0, Q2_K .. Q6_K) stay in their blocks,
// zero-copy over the mapped file (llama's Q/K: a row-reordered copy), and the layers call
// matmul_quant; everything else (F32/F16/BF16, token_embd, output, norms, the MoE router)
// is widened or dequantized to f32 once at load. Other types: Error(unsupported).
// Conversions that undo llama.cpp's converter: llama's Q and K rows (and biases) were
// permuted for its interleaved RoPE (w.reshape(heads, 2, D/2, in).swapaxes(1, 2)), restored
// here to transformers' order; Gemma 3's norms are stored as 1 + w already (its converter's
// norm_shift), so they are not shifted again; llama3 RoPE scaling arrives as the rope_freqs
// tensor (divisors of inv_freq).
#pragma once

#include <string>

#include "io/gguf.h"
#include "llm/config.h"
#include "llm/model.h"
#include "text/tokenizer.h"

namespace parley {

// Whether `path` names a GGUF chat model: a file ending in .gguf, or a folder without
// config.json that holds exactly one .gguf file.
bool is_gguf_model(const std::string& path);

// The .gguf file `path` stands for (itself, or the folder's one .gguf); not_found /
// invalid_argument when the folder has none or several.
std::string gguf_model_file(const std::string& path);

// The config implied by the file's metadata (and, for the vocabulary size and tying, its
// tensors). unsupported for an unknown general.architecture; invalid_argument / not_found
// for a missing or ill-typed key, naming it.
LlmConfig gguf_llm_config(const io::GgufFile& file);

// The model of a .gguf file (or a folder holding one); on CUDA the quantized weights are
// copied to the device in their blocks, the rest converted to options.dtype.
LlmModel load_gguf_llm(const std::string& path, const LlmLoadOptions& options = {});

// Whether `path` is a chat model: a GGUF (is_gguf_model), or a folder whose config.json has a
// model_type other than Whisper's (the family itself is checked when it loads).
bool is_llm_model(const std::string& path);

// The model / tokenizer of a chat model path: a Hugging Face folder or a GGUF.
LlmModel load_llm_model(const std::string& path, const LlmLoadOptions& options = {});
Tokenizer load_llm_tokenizer(const std::string& path);

// tokenizer.chat_template and the bos / eos token strings of a GGUF; not_found when the
// file has no template.
struct GgufChatTemplateText {
  std::string source, bos_token, eos_token;
};
GgufChatTemplateText gguf_chat_template_text(const std::string& path);

}  // namespace parley
