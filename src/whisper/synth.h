// Synthetic Whisper models (DESIGN.md section 5): a Hugging Face layout directory
// (config.json, model.safetensors, tokenizer.json, vocab.json, merges.txt) at a real
// model's shapes, with deterministic pseudo-random weights and the real vocabulary.
//
// Weights are scaled like a trained model (LayerNorm gamma near 1, beta near 0, matrices
// ~N(0, 0.02), encoder positions = the sinusoidal table), except where plain random
// weights make greedy decoding repeat one token forever (tied embeddings pull a random
// decoder towards its input token): the decoder's cross-attention is sharp and dominant,
// encoder residual branches are scaled by 1/sqrt(2 * layers), the decoder's final
// LayerNorm gamma is ~16 (confident logits) and the special tokens' embedding rows are
// halved. See synth.cpp (kCross*, kDecoderFinalGamma, kSpecialRowScale) for the measured
// effect of each.
//
// Determinism: each tensor has its own generator seeded from (seed, tensor name) and
// values use only integer arithmetic and one correctly rounded float multiply (or fma),
// so the same seed gives byte-identical files on any machine. The encoder's sinusoids use
// libm sin/cos/exp in double, rounded once to float.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/dtype.h"
#include "engine/tensor.h"
#include "whisper/config.h"

namespace parley {

// "tiny", "base", "small", "medium", "large-v3", "large-v3-turbo".
std::vector<std::string> synth_shape_names();
// The config of a named shape; Error(invalid_argument) listing the names otherwise.
WhisperConfig synth_config(std::string_view shape);

// One tensor of model.safetensors, by its Hugging Face name (weights.cpp reads them).
struct SynthTensorSpec {
  std::string name;  // "model.encoder.conv1.weight"
  Shape shape;
};
// Every tensor the Hugging Face loader expects, in name order (the file's order).
std::vector<SynthTensorSpec> synth_tensor_specs(const WhisperConfig& config);

// The transformers config.json text for `config` (tiktoken specials' ids at eot = the
// number of BPE ranks: 50257 for the multilingual vocabulary).
std::string synth_config_json(const WhisperConfig& config, int32_t eot);

// The values of one tensor (f32, in spec order), from (seed, spec.name).
std::vector<float> synth_tensor_values(const WhisperConfig& config, const SynthTensorSpec& spec,
                                       uint64_t seed);

struct SynthOptions {
  std::string shape = "tiny";  // a name from synth_shape_names()
  uint64_t seed = 0;
  DType dtype = DType::f32;  // of model.safetensors: f32, f16 or bf16
  // The tiktoken ranks file of the vocabulary (multilingual.tiktoken for every shape
  // above); required: the product embeds no vocabulary.
  std::string vocab_path;
  bool write_weights = true;  // false: config and tokenizer files only
};

// Writes the model directory `dir` (created if missing; files in it are replaced).
void write_synth_whisper(const SynthOptions& options, const std::string& dir);

// Hugging Face tokenizer files from tiktoken ranks: tokenizer.json (byte-level BPE, merges
// derived from the ranks, Whisper's specials as added tokens up to n_vocab), vocab.json and
// merges.txt. ranks are the contents of ranks_path (read again for the specials). The merge for the
// token of rank r is the split that BPE with ranks < r leaves (tiktoken's own tiktoken -> Hugging
// Face conversion).
void write_hf_tokenizer_files(const std::vector<std::string>& ranks, bool multilingual, int n_vocab,
                              const std::string& ranks_path, const std::string& dir);
// The merges as (left rank, right rank), in rank order of the merged token.
std::vector<std::pair<int32_t, int32_t>> merges_from_ranks(const std::vector<std::string>& ranks);

}  // namespace parley
