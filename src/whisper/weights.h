// WhisperWeights: every parameter of a Whisper model in one layout, whatever the file
// format it came from (CTranslate2 model.bin, Hugging Face safetensors, mlx-community
// safetensors / npz, whisper.cpp ggml), on the model's
// device and dtype. Projections that the forward pass runs together are stored fused:
// self-attention q|k|v [3d, d] and cross-attention k|v [2d, d]; the k projection has no
// bias in Whisper, so its part of a fused bias is zero.
#pragma once

#include <string>
#include <vector>

#include "engine/ops/int8_matmul.h"
#include "engine/quant.h"
#include "engine/tensor.h"
#include "io/tensor_map.h"
#include "whisper/config.h"

namespace parley {

struct LinearWeights {
  Tensor weight;  // [out, in] (PyTorch Linear layout: matmul with trans_b)
  Tensor bias;    // [out]
  // The CPU int8 configuration (LoadOptions::int8): the weight in q8_0 blocks, multiplied
  // by ops/quant_matmul.h instead of `weight` (which stays for the other uses).
  QuantMatrix q8;
  bool quantized() const { return q8.data != nullptr; }
  // The CPU int8 configuration's encoder GEMMs (--int8-encoder): the weight in per-row
  // 8-bit integers, multiplied by ops/int8_matmul.h (activations quantized per row) instead
  // of `weight`.
  RowInt8 i8;
};

struct LayerNormWeights {
  Tensor gamma;  // [d]
  Tensor beta;   // [d]
};

// A LayerNorm folded into the GEMM that reads its output (MatmulOptions::norm, ops/matmul.h):
// the weight times gamma and times beta, f32 [out]. WhisperModel fills these for the
// decoder's norms on CUDA with 16-bit weights; elsewhere they stay empty and the norm runs
// on its own.
struct NormFoldWeights {
  Tensor w_gamma;  // weight @ gamma
  Tensor w_shift;  // weight @ beta
};

struct EncoderLayerWeights {
  LayerNormWeights attn_ln;
  LinearWeights attn_qkv;  // [3d, d]
  LinearWeights attn_out;  // [d, d]
  LayerNormWeights mlp_ln;
  LinearWeights fc1;  // [4d, d]
  LinearWeights fc2;  // [d, 4d]
};

struct DecoderLayerWeights {
  LayerNormWeights self_ln;
  LinearWeights self_qkv;  // [3d, d]
  LinearWeights self_out;  // [d, d]
  LayerNormWeights cross_ln;
  LinearWeights cross_q;    // [d, d]
  LinearWeights cross_kv;   // [2d, d], applied to the encoder output
  LinearWeights cross_out;  // [d, d]
  LayerNormWeights mlp_ln;
  LinearWeights fc1;  // [4d, d]
  LinearWeights fc2;  // [d, 4d]
  // self_ln into self_qkv, cross_ln into cross_q, mlp_ln into fc1 (NormFoldWeights)
  NormFoldWeights self_fold, cross_fold, mlp_fold;
};

struct WhisperWeights {
  Tensor conv1_weight;       // [d, n_mels, 3]
  Tensor conv1_bias;         // [d]
  Tensor conv2_weight;       // [d, d, 3]
  Tensor conv2_bias;         // [d]
  Tensor encoder_positions;  // [n_audio_ctx, d] (sinusoidal)
  std::vector<EncoderLayerWeights> encoder_layers;
  LayerNormWeights encoder_ln;

  Tensor token_embedding;  // [n_vocab, d], also the output projection (tied)
  // LoadOptions::int8: token_embedding in q8_0 for the logits, and per 32-column block the
  // largest block scale and the largest sum of squared dequantized weights over its rows,
  // from which whisper::final_logits estimates the q8 logits' error; rows from
  // logits_exact_from on (<|endoftext|>, the specials and the timestamps) are always
  // computed in f32.
  QuantMatrix logits_q8;
  std::vector<float> logits_max_d, logits_max_l2;
  int64_t logits_exact_from = 0;
  Tensor decoder_positions;  // [n_text_ctx, d] (learned)
  std::vector<DecoderLayerWeights> decoder_layers;
  LayerNormWeights decoder_ln;
  NormFoldWeights decoder_fold;  // decoder_ln into the logits GEMM (token_embedding)
  // Every decoder layer's cross_kv stacked, [n_text_layer * 2d, d] (layer i's rows
  // [2d * i, 2d * (i + 1))), for one GEMM per window; filled by WhisperModel, whose layers'
  // cross_kv are views of it.
  LinearWeights decoder_cross_kv;
};

struct WeightsOptions {
  Device device = Device::cpu;
  DType dtype = DType::f32;
};

// Readers for the layouts. `dir` is the model directory; shapes are checked against
// `config`, and a missing or misshapen tensor throws Error naming it and the expected
// shape. Every weight is converted to opt.dtype and placed on opt.device.
WhisperWeights load_ctranslate2_weights(const io::Ct2Model& model, const WhisperConfig& config,
                                        const WeightsOptions& opt, const std::string& source);
WhisperWeights load_huggingface_weights(const std::string& safetensors_path,
                                        const WhisperConfig& config, const WeightsOptions& opt);

// openai-whisper's parameter names (whisper/model.py), as two other layouts keep them:
//   mlx: mlx-examples whisper/convert.py renames mlp.0 / mlp.2 to mlp1 / mlp2, stores conv
//        weights channels-last [out, kernel, in] (swapaxes(1, 2)) and drops
//        encoder.positional_embedding (mlx-whisper computes the sinusoids itself).
//   ggml: whisper.cpp models/convert-pt-to-ggml.py keeps the names and shapes, except the
//        conv biases, stored as [d, 1].
enum class OpenaiNaming { mlx, ggml };
WhisperWeights load_openai_named_weights(const io::TensorMap& tensors, OpenaiNaming naming,
                                         const WhisperConfig& config, const WeightsOptions& opt,
                                         const std::string& source);

// openai-whisper's sinusoids(length, channels) computed as torch and mlx do, in float32
// arithmetic: inv = exp(-(log(10000) / (c/2 - 1)) * i), t = p * inv, [sin(t) | cos(t)].
// f32 [length, channels] on the CPU.
Tensor whisper_sinusoids(int64_t length, int64_t channels);

}  // namespace parley
