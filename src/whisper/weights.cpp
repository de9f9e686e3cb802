// Readers that fill WhisperWeights from a CTranslate2 model.bin, a Hugging Face
// model.safetensors, an mlx-community weights file or a whisper.cpp ggml file, checking
// every shape against the config.
#include "whisper/weights.h"

#include <cmath>
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

  // The tensor `name` with shape `want` as f32 on the CPU (to be rearranged, then place()d).
  Tensor get_f32(const std::string& name, const Shape& want) const {
    const Tensor& t = raw(name, want);
    return t.dtype() == DType::f32 ? t : t.cast(DType::f32);
  }

  // In the target dtype, on the target device.
  Tensor place(const Tensor& t) const {
    Tensor c = converted(t);
    return c.device() == opt_.device ? c : c.to(opt_.device);
  }

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
  return {r.get(p + "/weight", {out, in}), r.get(p + "/bias", {out}), {}, {}};
}

// ---- PyTorch-style names (Hugging Face and openai-whisper): "<module>.weight", ".bias" ----

LayerNormWeights dotted_ln(const WeightReader& r, const std::string& p, int64_t d) {
  return {r.get(p + ".weight", {d}), r.get(p + ".bias", {d})};
}

LinearWeights dotted_linear(const WeightReader& r, const std::string& p, int64_t out, int64_t in) {
  return {r.get(p + ".weight", {out, in}), r.get(p + ".bias", {out}), {}, {}};
}

// The q, k and v projection modules of one attention module, by their names under it.
struct QkvNames {
  const char *q, *k, *v;
};
constexpr QkvNames kHfQkv{"q_proj", "k_proj", "v_proj"};
constexpr QkvNames kOpenaiQkv{"query", "key", "value"};

// q|k|v (or k|v when `with_q` is false) of one attention module, fused; k has no bias.
LinearWeights dotted_fused(const WeightReader& r, const std::string& p, const QkvNames& names,
                           int64_t d, bool with_q) {
  const std::string q = p + "." + names.q, k = p + "." + names.k, v = p + "." + names.v;
  std::vector<std::pair<std::string, Shape>> weights, biases;
  if (with_q) {
    weights.push_back({q + ".weight", {d, d}});
    biases.push_back({q + ".bias", {d}});
  }
  weights.push_back({k + ".weight", {d, d}});
  biases.push_back({r.has(k + ".bias") ? k + ".bias" : "", {d}});
  weights.push_back({v + ".weight", {d, d}});
  biases.push_back({v + ".bias", {d}});
  return {r.fuse(weights), r.fuse(biases), {}, {}};
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
    l.attn_ln = dotted_ln(r, p + ".self_attn_layer_norm", n.d);
    l.attn_qkv = dotted_fused(r, p + ".self_attn", kHfQkv, n.d, true);
    l.attn_out = dotted_linear(r, p + ".self_attn.out_proj", n.d, n.d);
    l.mlp_ln = dotted_ln(r, p + ".final_layer_norm", n.d);
    l.fc1 = dotted_linear(r, p + ".fc1", n.d_ff, n.d);
    l.fc2 = dotted_linear(r, p + ".fc2", n.d, n.d_ff);
    w.encoder_layers.push_back(std::move(l));
  }
  w.encoder_ln = dotted_ln(r, enc + ".layer_norm", n.d);

  w.token_embedding = r.get(dec + ".embed_tokens.weight", {n.n_vocab, n.d});
  w.decoder_positions = r.get(dec + ".embed_positions.weight", {n.n_text_ctx, n.d});
  for (int i = 0; i < config.n_text_layer; ++i) {
    const std::string p = dec + ".layers." + std::to_string(i);
    DecoderLayerWeights l;
    l.self_ln = dotted_ln(r, p + ".self_attn_layer_norm", n.d);
    l.self_qkv = dotted_fused(r, p + ".self_attn", kHfQkv, n.d, true);
    l.self_out = dotted_linear(r, p + ".self_attn.out_proj", n.d, n.d);
    l.cross_ln = dotted_ln(r, p + ".encoder_attn_layer_norm", n.d);
    l.cross_q = dotted_linear(r, p + ".encoder_attn.q_proj", n.d, n.d);
    l.cross_kv = dotted_fused(r, p + ".encoder_attn", kHfQkv, n.d, false);
    l.cross_out = dotted_linear(r, p + ".encoder_attn.out_proj", n.d, n.d);
    l.mlp_ln = dotted_ln(r, p + ".final_layer_norm", n.d);
    l.fc1 = dotted_linear(r, p + ".fc1", n.d_ff, n.d);
    l.fc2 = dotted_linear(r, p + ".fc2", n.d, n.d_ff);
    w.decoder_layers.push_back(std::move(l));
  }
  w.decoder_ln = dotted_ln(r, dec + ".layer_norm", n.d);
  return w;
}

// ---- openai-whisper names: mlx-community and whisper.cpp ggml ----

Tensor whisper_sinusoids(int64_t length, int64_t channels) {
  check_arg(channels % 2 == 0 && channels >= 4,
            "[whisper] sinusoids: channels " + std::to_string(channels) + " must be even, >= 4");
  const int64_t half = channels / 2;
  // whisper/model.py: np.log(10000) / (channels // 2 - 1) is a Python float; torch (and
  // mlx) turn it into float32 before multiplying the integer range, then exp, the outer
  // product and sin / cos run in float32.
  const auto increment = float(std::log(10000.0) / double(half - 1));
  Tensor out = Tensor::empty({length, channels}, DType::f32);
  float* p = out.data<float>();
  std::vector<float> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv[size_t(i)] = std::exp(-increment * float(i));
  for (int64_t t = 0; t < length; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const float x = float(t) * inv[size_t(i)];
      p[t * channels + i] = std::sin(x);
      p[t * channels + half + i] = std::cos(x);
    }
  return out;
}

namespace {

// A conv1d weight [out, in, 3]; mlx stores it channels-last [out, 3, in].
Tensor oa_conv_weight(const WeightReader& r, const std::string& name, int64_t out, int64_t in,
                      OpenaiNaming naming) {
  if (naming != OpenaiNaming::mlx) return r.get(name, {out, in, 3});
  const Tensor src = r.get_f32(name, {out, 3, in});  // [out, k, in]
  Tensor dst = Tensor::empty({out, in, 3}, DType::f32);
  const float* s = src.data<float>();
  float* d = dst.data<float>();
  for (int64_t o = 0; o < out; ++o)
    for (int64_t k = 0; k < 3; ++k)
      for (int64_t i = 0; i < in; ++i) d[(o * in + i) * 3 + k] = s[(o * 3 + k) * in + i];
  return r.place(dst);
}

// A conv1d bias [out]; convert-pt-to-ggml.py reshapes it to [out, 1].
Tensor oa_conv_bias(const WeightReader& r, const std::string& name, int64_t out,
                    OpenaiNaming naming) {
  if (naming != OpenaiNaming::ggml) return r.get(name, {out});
  return r.get(name, {out, 1}).reshape({out});
}

}  // namespace

WhisperWeights load_openai_named_weights(const io::TensorMap& tensors, OpenaiNaming naming,
                                         const WhisperConfig& config, const WeightsOptions& opt,
                                         const std::string& source) {
  const WeightReader r([&](const std::string& name) { return tensors.find(name); }, source, opt);
  const Dims n(config);
  const bool mlx = naming == OpenaiNaming::mlx;
  const std::string mlp1 = mlx ? ".mlp1" : ".mlp.0", mlp2 = mlx ? ".mlp2" : ".mlp.2";
  WhisperWeights w;
  w.conv1_weight = oa_conv_weight(r, "encoder.conv1.weight", n.d, n.n_mels, naming);
  w.conv1_bias = oa_conv_bias(r, "encoder.conv1.bias", n.d, naming);
  w.conv2_weight = oa_conv_weight(r, "encoder.conv2.weight", n.d, n.d, naming);
  w.conv2_bias = oa_conv_bias(r, "encoder.conv2.bias", n.d, naming);
  w.encoder_positions = mlx ? r.place(whisper_sinusoids(n.n_audio_ctx, n.d))
                            : r.get("encoder.positional_embedding", {n.n_audio_ctx, n.d});
  for (int i = 0; i < config.n_audio_layer; ++i) {
    const std::string p = "encoder.blocks." + std::to_string(i);
    EncoderLayerWeights l;
    l.attn_ln = dotted_ln(r, p + ".attn_ln", n.d);
    l.attn_qkv = dotted_fused(r, p + ".attn", kOpenaiQkv, n.d, true);
    l.attn_out = dotted_linear(r, p + ".attn.out", n.d, n.d);
    l.mlp_ln = dotted_ln(r, p + ".mlp_ln", n.d);
    l.fc1 = dotted_linear(r, p + mlp1, n.d_ff, n.d);
    l.fc2 = dotted_linear(r, p + mlp2, n.d, n.d_ff);
    w.encoder_layers.push_back(std::move(l));
  }
  w.encoder_ln = dotted_ln(r, "encoder.ln_post", n.d);

  w.token_embedding = r.get("decoder.token_embedding.weight", {n.n_vocab, n.d});
  w.decoder_positions = r.get("decoder.positional_embedding", {n.n_text_ctx, n.d});
  for (int i = 0; i < config.n_text_layer; ++i) {
    const std::string p = "decoder.blocks." + std::to_string(i);
    DecoderLayerWeights l;
    l.self_ln = dotted_ln(r, p + ".attn_ln", n.d);
    l.self_qkv = dotted_fused(r, p + ".attn", kOpenaiQkv, n.d, true);
    l.self_out = dotted_linear(r, p + ".attn.out", n.d, n.d);
    l.cross_ln = dotted_ln(r, p + ".cross_attn_ln", n.d);
    l.cross_q = dotted_linear(r, p + ".cross_attn.query", n.d, n.d);
    l.cross_kv = dotted_fused(r, p + ".cross_attn", kOpenaiQkv, n.d, false);
    l.cross_out = dotted_linear(r, p + ".cross_attn.out", n.d, n.d);
    l.mlp_ln = dotted_ln(r, p + ".mlp_ln", n.d);
    l.fc1 = dotted_linear(r, p + mlp1, n.d_ff, n.d);
    l.fc2 = dotted_linear(r, p + mlp2, n.d, n.d_ff);
    w.decoder_layers.push_back(std::move(l));
  }
  w.decoder_ln = dotted_ln(r, "decoder.ln", n.d);
  return w;
}

}  // namespace parley
