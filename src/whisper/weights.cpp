// Readers that fill WhisperWeights from a CTranslate2 model.bin or a Hugging Face
// model.safetensors, checking every shape against the config.
#include "whisper/weights.h"

#include <functional>

#include "engine/error.h"
#include "io/ctranslate2.h"
#include "io/safetensors.h"

namespace parley {
namespace {

// Finds tensors by name in one file, checks their shapes and converts them to the
// requested dtype and device.
class WeightReader {
 public:
  using Lookup = std::function<const Tensor*(const std::string&)>;
  WeightReader(Lookup lookup, std::string source, WeightsOptions opt)
      : lookup_(std::move(lookup)), source_(std::move(source)), opt_(opt) {}

  bool has(const std::string& name) const { return lookup_(name) != nullptr; }

  // The tensor `name` with shape `want`, converted.
  Tensor get(const std::string& name, const Shape& want) const { return place(raw(name, want)); }

  // Tensors stacked along dim 0 (fused projections). A null name stands for zeros of
  // `parts[i].second` (the k projection's absent bias).
  Tensor fuse(const std::vector<std::pair<std::string, Shape>>& parts) const {
    Shape shape = parts.front().second;
    for (size_t i = 1; i < parts.size(); ++i) shape[0] += parts[i].second[0];
    Tensor out = Tensor::zeros(shape, opt_.dtype, opt_.device);
    int64_t row = 0;
    for (const auto& [name, want] : parts) {
      if (!name.empty()) out.slice0(row, row + want[0]).copy_from(converted(raw(name, want)));
      row += want[0];
    }
    return out;
  }

 private:
  const Tensor& raw(const std::string& name, const Shape& want) const {
    const Tensor* t = lookup_(name);
    check(t != nullptr, ErrorKind::not_found,
          "[whisper] " + source_ + ": missing tensor '" + name + "' (expected " + want.str() + ")");
    check_arg(t->shape() == want, "[whisper] " + source_ + ": tensor '" + name + "' has shape " +
                                      t->shape().str() + ", expected " + want.str());
    check_arg(is_float(t->dtype()), "[whisper] " + source_ + ": tensor '" + name + "' has dtype " +
                                        std::string(dtype_name(t->dtype())) +
                                        ", expected a float type");
    return *t;
  }
  // On the CPU, in the target dtype.
  Tensor converted(const Tensor& t) const {
    return t.dtype() == opt_.dtype ? t : t.cast(opt_.dtype);
  }
  Tensor place(const Tensor& t) const {
    Tensor c = converted(t);
    return c.device() == opt_.device ? c : c.to(opt_.device);
  }

  Lookup lookup_;
  std::string source_;
  WeightsOptions opt_;
};

struct Dims {
  int64_t d, d_ff, n_mels, n_audio_ctx, n_text_ctx, n_vocab;
  explicit Dims(const WhisperConfig& c)
      : d(c.n_audio_state),
        d_ff(4 * int64_t(c.n_audio_state)),
        n_mels(c.n_mels),
        n_audio_ctx(c.n_audio_ctx),
        n_text_ctx(c.n_text_ctx),
        n_vocab(c.n_vocab) {}
};

// ---- CTranslate2 (ctranslate2/specs/whisper_spec.py, transformer_spec.py) ----

LayerNormWeights ct2_ln(const WeightReader& r, const std::string& p, int64_t d) {
  return {r.get(p + "/gamma", {d}), r.get(p + "/beta", {d})};
}

LinearWeights ct2_linear(const WeightReader& r, const std::string& p, int64_t out, int64_t in) {
  return {r.get(p + "/weight", {out, in}), r.get(p + "/bias", {out})};
}

}  // namespace

WhisperWeights load_ctranslate2_weights(const io::Ct2Model& model, const WhisperConfig& config,
                                        const WeightsOptions& opt, const std::string& source) {
  const WeightReader r(
      [&](const std::string& name) -> const Tensor* {
        if (!model.contains(name)) return nullptr;
        return &model.tensor(name);
      },
      source, opt);
  const Dims n(config);
  WhisperWeights w;
  w.conv1_weight = r.get("encoder/conv1/weight", {n.d, n.n_mels, 3});
  w.conv1_bias = r.get("encoder/conv1/bias", {n.d});
  w.conv2_weight = r.get("encoder/conv2/weight", {n.d, n.d, 3});
  w.conv2_bias = r.get("encoder/conv2/bias", {n.d});
  w.encoder_positions = r.get("encoder/position_encodings/encodings", {n.n_audio_ctx, n.d});
  for (int i = 0; i < config.n_audio_layer; ++i) {
    const std::string p = "encoder/layer_" + std::to_string(i);
    EncoderLayerWeights l;
    l.attn_ln = ct2_ln(r, p + "/self_attention/layer_norm", n.d);
    // Fused q|k|v; CTranslate2 stores the k projection's absent bias as zeros.
    l.attn_qkv = ct2_linear(r, p + "/self_attention/linear_0", 3 * n.d, n.d);
    l.attn_out = ct2_linear(r, p + "/self_attention/linear_1", n.d, n.d);
    l.mlp_ln = ct2_ln(r, p + "/ffn/layer_norm", n.d);
    l.fc1 = ct2_linear(r, p + "/ffn/linear_0", n.d_ff, n.d);
    l.fc2 = ct2_linear(r, p + "/ffn/linear_1", n.d, n.d_ff);
    w.encoder_layers.push_back(std::move(l));
  }
  w.encoder_ln = ct2_ln(r, "encoder/layer_norm", n.d);

  w.token_embedding = r.get("decoder/embeddings/weight", {n.n_vocab, n.d});
  w.decoder_positions = r.get("decoder/position_encodings/encodings", {n.n_text_ctx, n.d});
  for (int i = 0; i < config.n_text_layer; ++i) {
    const std::string p = "decoder/layer_" + std::to_string(i);
    DecoderLayerWeights l;
    l.self_ln = ct2_ln(r, p + "/self_attention/layer_norm", n.d);
    l.self_qkv = ct2_linear(r, p + "/self_attention/linear_0", 3 * n.d, n.d);
    l.self_out = ct2_linear(r, p + "/self_attention/linear_1", n.d, n.d);
    l.cross_ln = ct2_ln(r, p + "/attention/layer_norm", n.d);
    l.cross_q = ct2_linear(r, p + "/attention/linear_0", n.d, n.d);
    l.cross_kv = ct2_linear(r, p + "/attention/linear_1", 2 * n.d, n.d);
    l.cross_out = ct2_linear(r, p + "/attention/linear_2", n.d, n.d);
    l.mlp_ln = ct2_ln(r, p + "/ffn/layer_norm", n.d);
    l.fc1 = ct2_linear(r, p + "/ffn/linear_0", n.d_ff, n.d);
    l.fc2 = ct2_linear(r, p + "/ffn/linear_1", n.d, n.d_ff);
    w.decoder_layers.push_back(std::move(l));
  }
  w.decoder_ln = ct2_ln(r, "decoder/layer_norm", n.d);
  return w;
}

// ---- Hugging Face (transformers' modeling_whisper.py names) ----

namespace {

LayerNormWeights hf_ln(const WeightReader& r, const std::string& p, int64_t d) {
  return {r.get(p + ".weight", {d}), r.get(p + ".bias", {d})};
}

LinearWeights hf_linear(const WeightReader& r, const std::string& p, int64_t out, int64_t in) {
  return {r.get(p + ".weight", {out, in}), r.get(p + ".bias", {out})};
}

// q|k|v (or k|v when `with_q` is false) of one attention module, fused; k has no bias.
LinearWeights hf_fused(const WeightReader& r, const std::string& p, int64_t d, bool with_q) {
  std::vector<std::pair<std::string, Shape>> weights, biases;
  if (with_q) {
    weights.push_back({p + ".q_proj.weight", {d, d}});
    biases.push_back({p + ".q_proj.bias", {d}});
  }
  weights.push_back({p + ".k_proj.weight", {d, d}});
  biases.push_back({r.has(p + ".k_proj.bias") ? p + ".k_proj.bias" : "", {d}});
  weights.push_back({p + ".v_proj.weight", {d, d}});
  biases.push_back({p + ".v_proj.bias", {d}});
  return {r.fuse(weights), r.fuse(biases)};
}

}  // namespace

WhisperWeights load_huggingface_weights(const std::string& safetensors_path,
                                        const WhisperConfig& config, const WeightsOptions& opt) {
  const io::SafetensorsFile file = io::read_safetensors(safetensors_path);
  // Checkpoints saved from WhisperModel lack the "model." prefix of
  // WhisperForConditionalGeneration.
  const std::string root = file.tensors.contains("encoder.conv1.weight") ? "" : "model.";
  const WeightReader r([&](const std::string& name) { return file.tensors.find(name); },
                       safetensors_path, opt);
  const Dims n(config);
  const std::string enc = root + "encoder", dec = root + "decoder";
  WhisperWeights w;
  w.conv1_weight = r.get(enc + ".conv1.weight", {n.d, n.n_mels, 3});
  w.conv1_bias = r.get(enc + ".conv1.bias", {n.d});
  w.conv2_weight = r.get(enc + ".conv2.weight", {n.d, n.d, 3});
  w.conv2_bias = r.get(enc + ".conv2.bias", {n.d});
  w.encoder_positions = r.get(enc + ".embed_positions.weight", {n.n_audio_ctx, n.d});
  for (int i = 0; i < config.n_audio_layer; ++i) {
    const std::string p = enc + ".layers." + std::to_string(i);
    EncoderLayerWeights l;
    l.attn_ln = hf_ln(r, p + ".self_attn_layer_norm", n.d);
    l.attn_qkv = hf_fused(r, p + ".self_attn", n.d, true);
    l.attn_out = hf_linear(r, p + ".self_attn.out_proj", n.d, n.d);
    l.mlp_ln = hf_ln(r, p + ".final_layer_norm", n.d);
    l.fc1 = hf_linear(r, p + ".fc1", n.d_ff, n.d);
    l.fc2 = hf_linear(r, p + ".fc2", n.d, n.d_ff);
    w.encoder_layers.push_back(std::move(l));
  }
  w.encoder_ln = hf_ln(r, enc + ".layer_norm", n.d);

  w.token_embedding = r.get(dec + ".embed_tokens.weight", {n.n_vocab, n.d});
  w.decoder_positions = r.get(dec + ".embed_positions.weight", {n.n_text_ctx, n.d});
  for (int i = 0; i < config.n_text_layer; ++i) {
    const std::string p = dec + ".layers." + std::to_string(i);
    DecoderLayerWeights l;
    l.self_ln = hf_ln(r, p + ".self_attn_layer_norm", n.d);
    l.self_qkv = hf_fused(r, p + ".self_attn", n.d, true);
    l.self_out = hf_linear(r, p + ".self_attn.out_proj", n.d, n.d);
    l.cross_ln = hf_ln(r, p + ".encoder_attn_layer_norm", n.d);
    l.cross_q = hf_linear(r, p + ".encoder_attn.q_proj", n.d, n.d);
    l.cross_kv = hf_fused(r, p + ".encoder_attn", n.d, false);
    l.cross_out = hf_linear(r, p + ".encoder_attn.out_proj", n.d, n.d);
    l.mlp_ln = hf_ln(r, p + ".final_layer_norm", n.d);
    l.fc1 = hf_linear(r, p + ".fc1", n.d_ff, n.d);
    l.fc2 = hf_linear(r, p + ".fc2", n.d, n.d_ff);
    w.decoder_layers.push_back(std::move(l));
  }
  w.decoder_ln = hf_ln(r, dec + ".layer_norm", n.d);
  return w;
}

}  // namespace parley
