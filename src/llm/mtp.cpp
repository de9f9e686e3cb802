#include "llm/mtp.h"

#include <cstring>

#include "engine/error.h"
#include "llm/blocks.h"

namespace parley {
namespace {

// The column halves [:, :at] and [:, at:] of a 2-D weight, on its device and in its dtype.
std::pair<Tensor, Tensor> split_columns(const Tensor& w, int64_t at) {
  const Tensor host = w.to(Device::cpu);
  const int64_t rows = w.dim(0), cols = w.dim(1);
  const size_t es = dtype_size(w.dtype());
  Tensor a = Tensor::empty({rows, at}, w.dtype()), b = Tensor::empty({rows, cols - at}, w.dtype());
  const auto* src = static_cast<const uint8_t*>(host.raw());
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(static_cast<uint8_t*>(a.raw()) + size_t(r * at) * es, src + size_t(r * cols) * es,
                size_t(at) * es);
    std::memcpy(static_cast<uint8_t*>(b.raw()) + size_t(r * (cols - at)) * es,
                src + size_t(r * cols + at) * es, size_t(cols - at) * es);
  }
  return {a.to(w.device()), b.to(w.device())};
}

}  // namespace

std::vector<MtpWeights> load_mtp(const TensorSource& src, const std::string& prefix,
                                 const LlmConfig& c, const FamilySpec& spec,
                                 const Tensor& lm_head) {
  // Each layout's tensor names under a module's prefix.
  struct Layout {
    MtpLayout layout;
    const char *proj, *norm_embed, *norm_hidden, *final_norm, *head;  // head: null (lm_head)
    bool embed_first, hidden_before_final_norm;
  };
  static constexpr Layout kDeepseek{MtpLayout::deepseek_v3, "eh_proj",          "enorm", "hnorm",
                                    "shared_head.norm",     "shared_head.head", true,    false};
  static constexpr Layout kMimo{MtpLayout::mimo,
                                "input_proj",
                                "token_layernorm",
                                "hidden_layernorm",
                                "final_layernorm",
                                nullptr,
                                false,
                                true};
  const int64_t h = c.hidden_size, v = c.vocab_size;
  std::vector<MtpWeights> out;
  // p: the module's prefix; layer: its layer index (decides MoE or dense).
  auto load = [&](const Layout& l, const std::string& p, int64_t layer) {
    check(!spec.norm_plus_one && !spec.sandwich_norms && c.sliding_window == 0,
          ErrorKind::unsupported,
          "[llm] MTP modules are read over Llama, Qwen2, Qwen3 and Qwen3-MoE bases only");
    auto get = [&](const char* name, const Shape& shape) {
      return src.get(p + name + ".weight", shape);
    };
    MtpWeights m;
    m.layout = l.layout;
    m.norm_embed = get(l.norm_embed, {h});
    m.norm_hidden = get(l.norm_hidden, {h});
    auto [first, second] = split_columns(get(l.proj, {h, 2 * h}), h);
    m.proj_embed = l.embed_first ? first : second;
    m.proj_hidden = l.embed_first ? second : first;
    m.block = load_layer_at(src, p, c, spec, layer);
    m.final_norm = get(l.final_norm, {h});
    m.head = l.head && src.has(p + l.head + ".weight") ? get(l.head, {v, h}) : lm_head;
    m.hidden_before_final_norm = l.hidden_before_final_norm;
    out.push_back(std::move(m));
  };
  // DeepSeek-V3's: model.layers.{n_layers + k}; XiaomiMiMo's: model.mtp_layers.{k}.
  for (int64_t k = 0;; ++k) {
    const std::string p = prefix + "model.layers." + std::to_string(c.n_layers + k) + ".";
    if (!src.has(p + kDeepseek.proj + ".weight")) break;
    load(kDeepseek, p, c.n_layers + k);
  }
  for (int64_t k = 0;; ++k) {
    const std::string p = prefix + "model.mtp_layers." + std::to_string(k) + ".";
    if (!src.has(p + kMimo.proj + ".weight")) break;
    load(kMimo, p, 0);
  }
  return out;
}

LlmConfig mtp_cache_config(const LlmConfig& config) {
  LlmConfig c = config;
  c.n_layers = 1;
  return c;
}

}  // namespace parley
