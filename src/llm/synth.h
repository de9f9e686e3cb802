// Synthetic chat models: a Hugging Face directory (config.json with a real model's
// hyper-parameters, model.safetensors with seeded random weights, generation_config.json)
// for tests and benchmarks where real weights cannot be had. Shapes: the real
// qwen3-0.6b, qwen3-1.7b, llama-3.2-1b, gemma-3-1b, qwen2-0.5b, a small qwen3-moe-tiny, and
// tiny-<family> shapes (hidden 128, few layers, vocab 2048) that keep every structural
// feature: GQA, q/k norms, llama3 RoPE scaling, 8 experts top-2 with a dense layer,
// Gemma's sliding pattern with a 64-token window and linear scaling on global layers.
// Weight scales: Linear U(+-sqrt(3/in)) (unit variance out of unit variance in);
// embeddings and lm_head std 3/sqrt(hidden) (logits std ~3); norms 1 + U(+-0.1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/dtype.h"

namespace parley {

struct LlmSynthOptions {
  std::string shape = "tiny-qwen3";
  uint64_t seed = 0;
  int64_t layers = 0;        // 0: the shape's own layer count
  DType dtype = DType::f32;  // stored dtype: f32 or bf16
  std::string mtp;           // "deepseek_v3" or "mimo": an MTP module in that layout (llm/mtp.h)
};

std::vector<std::string> llm_synth_shape_names();
// config.json text of a shape (layers overridden when > 0); invalid_argument for an
// unknown shape.
std::string llm_synth_config_json(const std::string& shape, int64_t layers);
// Writes config.json, generation_config.json and model.safetensors into dir (created).
void write_synth_llm(const LlmSynthOptions& options, const std::string& dir);

}  // namespace parley
