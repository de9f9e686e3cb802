// Parsing of WhisperConfig from CTranslate2, Hugging Face, mlx-community and whisper.cpp
// ggml models.
#include "whisper/config.h"

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "io/ctranslate2.h"
#include "io/ggml_legacy.h"

namespace parley {
namespace {

std::vector<std::pair<int, int>> parse_alignment_heads(const nlohmann::json& j,
                                                       const std::string& source) {
  std::vector<std::pair<int, int>> heads;
  if (!j.is_array()) return heads;
  for (const auto& pair : j) {
    check_arg(pair.is_array() && pair.size() == 2 && pair[0].is_number_integer() &&
                  pair[1].is_number_integer(),
              "[whisper] " + source + ": alignment_heads must be [[layer, head], ...]");
    heads.emplace_back(pair[0].get<int>(), pair[1].get<int>());
  }
  return heads;
}

nlohmann::json parse_json(const std::string& text, const std::string& source) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::invalid_argument,
                "[whisper] " + source + ": config.json is not valid JSON: " + e.what());
  }
}

// The shape of a CTranslate2 variable, which must have `rank` dims.
const Shape& ct2_shape(const io::Ct2Model& model, const std::string& name, int rank,
                       const std::string& source) {
  auto it = model.variables.find(name);
  check(it != model.variables.end(), ErrorKind::not_found,
        "[whisper] " + source + ": missing variable '" + name + "'");
  check_arg(it->second.shape.ndim() == rank, "[whisper] " + source + ": variable '" + name +
                                                 "' has shape " + it->second.shape.str() +
                                                 ", expected rank " + std::to_string(rank));
  return it->second.shape;
}

int count_layers(const io::Ct2Model& model, const std::string& prefix) {
  int n = 0;
  while (model.contains(prefix + std::to_string(n) + "/ffn/linear_0/weight")) ++n;
  return n;
}

int json_int(const nlohmann::json& j, const char* key, const std::string& source) {
  check_arg(j.contains(key) && j[key].is_number_integer(),
            "[whisper] " + source + ": config.json has no integer '" + key + "'");
  return j[key].get<int>();
}

}  // namespace

WhisperConfig config_from_ctranslate2(const io::Ct2Model& model, const std::string& config_json,
                                      const std::string& source) {
  WhisperConfig c;
  const Shape& conv1 = ct2_shape(model, "encoder/conv1/weight", 3, source);  // [d, n_mels, 3]
  c.n_audio_state = int(conv1[0]);
  c.n_mels = int(conv1[1]);
  const Shape& enc_pos = ct2_shape(model, "encoder/position_encodings/encodings", 2, source);
  c.n_audio_ctx = int(enc_pos[0]);
  const Shape& emb = ct2_shape(model, "decoder/embeddings/weight", 2, source);  // [V, d]
  c.n_vocab = int(emb[0]);
  c.n_text_state = int(emb[1]);
  const Shape& dec_pos = ct2_shape(model, "decoder/position_encodings/encodings", 2, source);
  c.n_text_ctx = int(dec_pos[0]);
  c.n_audio_layer = count_layers(model, "encoder/layer_");
  c.n_text_layer = count_layers(model, "decoder/layer_");
  c.n_audio_head = int(model.scalar_int("encoder/num_heads"));
  c.n_text_head = int(model.scalar_int("decoder/num_heads"));
  if (!config_json.empty()) {
    const nlohmann::json j = parse_json(config_json, source);
    if (j.contains("alignment_heads"))
      c.alignment_heads = parse_alignment_heads(j["alignment_heads"], source);
  }
  validate(c, source);
  return c;
}

WhisperConfig config_from_huggingface(const std::string& config_json, const std::string& source) {
  const nlohmann::json j = parse_json(config_json, source);
  WhisperConfig c;
  c.n_mels = json_int(j, "num_mel_bins", source);
  c.n_audio_ctx = json_int(j, "max_source_positions", source);
  c.n_audio_state = json_int(j, "d_model", source);
  c.n_audio_head = json_int(j, "encoder_attention_heads", source);
  c.n_audio_layer = json_int(j, "encoder_layers", source);
  c.n_vocab = json_int(j, "vocab_size", source);
  c.n_text_ctx = json_int(j, "max_target_positions", source);
  c.n_text_state = c.n_audio_state;
  c.n_text_head = json_int(j, "decoder_attention_heads", source);
  c.n_text_layer = json_int(j, "decoder_layers", source);
  if (j.contains("alignment_heads"))
    c.alignment_heads = parse_alignment_heads(j["alignment_heads"], source);
  validate(c, source);
  return c;
}

WhisperConfig config_from_mlx(const std::string& config_json, const std::string& source) {
  const nlohmann::json j = parse_json(config_json, source);
  check_arg(j.is_object(), "[whisper] " + source + ": config.json is not a JSON object");
  if (j.contains("model_type"))
    check_arg(j["model_type"] == "whisper", "[whisper] " + source + ": model_type " +
                                                j["model_type"].dump() + ", expected \"whisper\"");
  // mlx-examples whisper/convert.py quantize(): {"group_size", "bits"} and packed uint32
  // weights with scales/biases.
  // (The message is built only when the key exists: operator[] of a const json on a missing
  // key is undefined behaviour, and an eager check() message read it on every load, a
  // crash about one load in 25.)
  if (j.contains("quantization"))
    throw Error(ErrorKind::unsupported, "[whisper] " + source + ": quantized mlx weights (" +
                                            j.at("quantization").dump() +
                                            ") are not supported; convert with --dtype float16 or "
                                            "float32");
  WhisperConfig c;
  c.n_mels = json_int(j, "n_mels", source);
  c.n_audio_ctx = json_int(j, "n_audio_ctx", source);
  c.n_audio_state = json_int(j, "n_audio_state", source);
  c.n_audio_head = json_int(j, "n_audio_head", source);
  c.n_audio_layer = json_int(j, "n_audio_layer", source);
  c.n_vocab = json_int(j, "n_vocab", source);
  c.n_text_ctx = json_int(j, "n_text_ctx", source);
  c.n_text_state = json_int(j, "n_text_state", source);
  c.n_text_head = json_int(j, "n_text_head", source);
  c.n_text_layer = json_int(j, "n_text_layer", source);
  validate(c, source);
  return c;
}

WhisperConfig config_from_ggml(const io::WhisperHparams& h, const std::string& source) {
  WhisperConfig c;
  c.n_mels = h.n_mels;
  c.n_audio_ctx = h.n_audio_ctx;
  c.n_audio_state = h.n_audio_state;
  c.n_audio_head = h.n_audio_head;
  c.n_audio_layer = h.n_audio_layer;
  c.n_vocab = h.n_vocab;
  c.n_text_ctx = h.n_text_ctx;
  c.n_text_state = h.n_text_state;
  c.n_text_head = h.n_text_head;
  c.n_text_layer = h.n_text_layer;
  validate(c, source);
  return c;
}

std::vector<std::pair<int, int>> alignment_heads_from_json(const std::string& json,
                                                           const std::string& source) {
  const nlohmann::json j = parse_json(json, source);
  if (!j.contains("alignment_heads")) return {};
  return parse_alignment_heads(j["alignment_heads"], source);
}

void validate(const WhisperConfig& c, const std::string& source) {
  auto positive = [&](int v, const char* name) {
    check_arg(v > 0,
              "[whisper] " + source + ": " + name + " must be positive, got " + std::to_string(v));
  };
  positive(c.n_mels, "n_mels");
  positive(c.n_audio_ctx, "n_audio_ctx");
  positive(c.n_audio_state, "n_audio_state");
  positive(c.n_audio_head, "n_audio_head");
  positive(c.n_audio_layer, "n_audio_layer");
  positive(c.n_vocab, "n_vocab");
  positive(c.n_text_ctx, "n_text_ctx");
  positive(c.n_text_state, "n_text_state");
  positive(c.n_text_head, "n_text_head");
  positive(c.n_text_layer, "n_text_layer");
  check_arg(c.n_audio_state % c.n_audio_head == 0 && c.n_text_state % c.n_text_head == 0,
            "[whisper] " + source + ": the head counts (" + std::to_string(c.n_audio_head) + ", " +
                std::to_string(c.n_text_head) + ") do not divide the widths (" +
                std::to_string(c.n_audio_state) + ", " + std::to_string(c.n_text_state) + ")");
  check_arg(c.n_audio_state == c.n_text_state,
            "[whisper] " + source + ": encoder width " + std::to_string(c.n_audio_state) +
                " differs from decoder width " + std::to_string(c.n_text_state));
  for (const auto& [layer, head] : c.alignment_heads)
    check_arg(layer >= 0 && layer < c.n_text_layer && head >= 0 && head < c.n_text_head,
              "[whisper] " + source + ": alignment head (" + std::to_string(layer) + ", " +
                  std::to_string(head) + ") is outside the decoder");
}

}  // namespace parley
