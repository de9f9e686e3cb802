// whisper.cpp's legacy ggml model file (.bin, magic 0x67676d6c "ggml"): hyper-parameters,
// mel filter bank, vocabulary, then tensors until the end of the file. Layout as written
// by whisper.cpp's models/convert-pt-to-ggml.py and read by whisper_model_load.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/tensor_map.h"

namespace parley::io {

constexpr uint32_t kGgmlMagic = 0x67676d6c;

// The 11 int32 hyper-parameters in file order.
struct WhisperHparams {
  int32_t n_vocab = 0;
  int32_t n_audio_ctx = 0;
  int32_t n_audio_state = 0;
  int32_t n_audio_head = 0;
  int32_t n_audio_layer = 0;
  int32_t n_text_ctx = 0;
  int32_t n_text_state = 0;
  int32_t n_text_head = 0;
  int32_t n_text_layer = 0;
  int32_t n_mels = 0;
  // ggml ftype of the weights (0 f32, 1 f16, ...), plus 1000 * the quantization version in
  // quantized files (whisper.cpp's GGML_QNT_VERSION_FACTOR); as stored.
  int32_t ftype = 0;
};

struct GgmlWhisperFile {
  WhisperHparams hparams;
  Tensor mel_filters;              // f32 [n_mel, n_fft], e.g. [80, 201]
  std::vector<std::string> vocab;  // token bytes by id; the file may hold fewer than n_vocab
  TensorMap tensors;               // f32 / f16, row-major (ggml dims reversed)
};

// Maps and parses `path`. Tensors of ggml types other than f32 and f16 throw
// Error(unsupported) naming the type; malformed files Error(invalid_argument).
GgmlWhisperFile read_ggml_whisper(const std::string& path);

// Parses a whole file image; `owner` keeps `bytes` alive for the tensor views (null: the
// caller keeps them alive). `name` names the file in messages.
GgmlWhisperFile parse_ggml_whisper(std::span<const uint8_t> bytes,
                                   std::shared_ptr<const void> owner, const std::string& name);

}  // namespace parley::io
