// WhisperConfig: the dimensions of a Whisper model, read from its directory: a
// CTranslate2 model (dims derived from the variables' shapes in model.bin, alignment
// heads from config.json), a Hugging Face config.json, an mlx-community config.json
// (mlx-whisper's ModelDimensions) or a whisper.cpp ggml file's hyper-parameters.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace parley::io {
struct Ct2Model;
struct WhisperHparams;
}  // namespace parley::io

namespace parley {

struct WhisperConfig {
  int n_mels = 0;         // 80, or 128 for large-v3
  int n_audio_ctx = 0;    // encoder positions (1500 for 30 s)
  int n_audio_state = 0;  // encoder width d
  int n_audio_head = 0;
  int n_audio_layer = 0;
  int n_vocab = 0;       // 51864 (.en), 51865, 51866 (large-v3)
  int n_text_ctx = 0;    // decoder positions (448)
  int n_text_state = 0;  // decoder width d
  int n_text_head = 0;
  int n_text_layer = 0;
  // (decoder layer, head) pairs used for word timestamps; empty when the model has none.
  std::vector<std::pair<int, int>> alignment_heads;

  bool multilingual() const { return n_vocab >= 51865; }
  bool operator==(const WhisperConfig&) const = default;
};

// From a CTranslate2 model.bin (already read) and the text of the config.json beside it
// (may be empty). `source` names the model in error messages.
WhisperConfig config_from_ctranslate2(const io::Ct2Model& model, const std::string& config_json,
                                      const std::string& source);
// From the text of a Hugging Face config.json.
WhisperConfig config_from_huggingface(const std::string& config_json, const std::string& source);

// From the text of an mlx-community config.json: mlx-whisper's ModelDimensions fields
// (n_mels, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_vocab, n_text_ctx,
// n_text_state, n_text_head, n_text_layer; mlx-examples whisper/mlx_whisper/whisper.py)
// plus "model_type": "whisper". A "quantization" entry (convert.py -q) throws
// Error(unsupported): quantized mlx weights are not read.
WhisperConfig config_from_mlx(const std::string& config_json, const std::string& source);
// From a whisper.cpp ggml file's hyper-parameters (the same ten dims, in file order).
WhisperConfig config_from_ggml(const io::WhisperHparams& hparams, const std::string& source);

// The "alignment_heads" of a JSON document (e.g. transformers' generation_config.json);
// empty when it has none.
std::vector<std::pair<int, int>> alignment_heads_from_json(const std::string& json,
                                                           const std::string& source);

// Throws Error(invalid_argument) naming `source` when a dimension is not positive or the
// heads do not divide the widths.
void validate(const WhisperConfig& config, const std::string& source);

}  // namespace parley
