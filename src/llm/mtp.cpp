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
  std::vector<MtpWeights> out;
  const int64_t h = c.hidden_size, v = c.vocab_size;
  auto check_base = [&] {
    check(!spec.norm_plus_one && !spec.sandwich_norms && c.sliding_window == 0,
          ErrorKind::unsupported,
          "[llm] MTP modules are read over Llama, Qwen2, Qwen3 and Qwen3-MoE bases only");
  };
  // DeepSeek-V3's: model.layers.{n_layers + k}.
  for (int64_t k = 0;; ++k) {
    const std::string p = prefix + "model.layers." + std::to_string(c.n_layers + k) + ".";
    if (!src.has(p + "eh_proj.weight")) break;
    check_base();
    MtpWeights m;
    m.layout = MtpLayout::deepseek_v3;
    m.norm_embed = src.get(p + "enorm.weight", {h});
    m.norm_hidden = src.get(p + "hnorm.weight", {h});
    std::tie(m.proj_embed, m.proj_hidden) =
        split_columns(src.get(p + "eh_proj.weight", {h, 2 * h}), h);
    m.block = load_layer_at(src, p, c, spec, c.n_layers + k);
    m.final_norm = src.get(p + "shared_head.norm.weight", {h});
    m.head = src.has(p + "shared_head.head.weight") ? src.get(p + "shared_head.head.weight", {v, h})
                                                    : lm_head;
    m.hidden_before_final_norm = false;
    out.push_back(std::move(m));
  }
  // XiaomiMiMo's: model.mtp_layers.{k}.
  for (int64_t k = 0;; ++k) {
    const std::string p = prefix + "model.mtp_layers." + std::to_string(k) + ".";
    if (!src.has(p + "input_proj.weight")) break;
    check_base();
    MtpWeights m;
    m.layout = MtpLayout::mimo;
    m.norm_embed = src.get(p + "token_layernorm.weight", {h});
    m.norm_hidden = src.get(p + "hidden_layernorm.weight", {h});
    std::tie(m.proj_hidden, m.proj_embed) =
        split_columns(src.get(p + "input_proj.weight", {h, 2 * h}), h);
    m.block = load_layer_at(src, p, c, spec, 0);
    m.final_norm = src.get(p + "final_layernorm.weight", {h});
    m.head = lm_head;
    m.hidden_before_final_norm = true;
    out.push_back(std::move(m));
  }
  return out;
}

LlmConfig mtp_cache_config(const LlmConfig& config) {
  LlmConfig c = config;
  c.n_layers = 1;
  return c;
}

}  // namespace parley
