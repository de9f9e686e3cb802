// Synthetic chat-model directories: shape table, config.json, seeded weights.
#include "llm/synth.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/tensor.h"
#include "io/safetensors.h"
#include "llm/config.h"
#include "llm/families/families.h"

namespace parley {

namespace {

using nlohmann::json;

json base_config(const char* type, int64_t vocab, int64_t hidden, int64_t layers, int64_t heads,
                 int64_t kv, int64_t head_dim, int64_t inter, double theta, double eps, bool tie,
                 int64_t max_pos, int32_t bos, json eos) {
  json j;
  j["model_type"] = type;
  j["vocab_size"] = vocab;
  j["hidden_size"] = hidden;
  j["num_hidden_layers"] = layers;
  j["num_attention_heads"] = heads;
  j["num_key_value_heads"] = kv;
  j["head_dim"] = head_dim;
  j["intermediate_size"] = inter;
  j["rope_theta"] = theta;
  j["rms_norm_eps"] = eps;
  j["tie_word_embeddings"] = tie;
  j["max_position_embeddings"] = max_pos;
  j["bos_token_id"] = bos;
  j["eos_token_id"] = std::move(eos);
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  j["rope_scaling"] = nullptr;
  return j;
}

json llama3_scaling() {
  return {{"rope_type", "llama3"},
          {"factor", 32.0},
          {"low_freq_factor", 1.0},
          {"high_freq_factor", 4.0},
          {"original_max_position_embeddings", 8192}};
}

void as_arch(json& j, const char* arch) { j["architectures"] = json::array({arch}); }

json gemma_extras(json j, int64_t window, int64_t pattern, double qscalar) {
  j["hidden_activation"] = "gelu_pytorch_tanh";
  j["hidden_act"] = "gelu_pytorch_tanh";
  j["query_pre_attn_scalar"] = qscalar;
  j["sliding_window"] = window;
  j["sliding_window_pattern"] = pattern;
  j["rope_local_base_freq"] = 10000.0;
  j["final_logit_softcapping"] = nullptr;
  j["attn_logit_softcapping"] = nullptr;
  json types = json::array();
  for (int64_t l = 0; l < j["num_hidden_layers"].get<int64_t>(); ++l)
    types.push_back((l + 1) % pattern != 0 ? "sliding_attention" : "full_attention");
  j["layer_types"] = types;
  as_arch(j, "Gemma3ForCausalLM");
  return j;
}

json moe_extras(json j, int64_t experts, int64_t top_k, int64_t moe_inter, json mlp_only) {
  j["num_experts"] = experts;
  j["num_experts_per_tok"] = top_k;
  j["moe_intermediate_size"] = moe_inter;
  j["decoder_sparse_step"] = 1;
  j["norm_topk_prob"] = true;
  j["mlp_only_layers"] = std::move(mlp_only);
  as_arch(j, "Qwen3MoeForCausalLM");
  return j;
}

json shape_config(const std::string& shape) {
  const json qwen_eos = 151645, qwen_bos = 151643;
  if (shape == "qwen3-0.6b") {
    json j = base_config("qwen3", 151936, 1024, 28, 16, 8, 128, 3072, 1e6, 1e-6, true, 40960,
                         151643, 151645);
    as_arch(j, "Qwen3ForCausalLM");
    return j;
  }
  if (shape == "qwen3-1.7b") {
    json j = base_config("qwen3", 151936, 2048, 28, 16, 8, 128, 6144, 1e6, 1e-6, true, 40960,
                         151643, 151645);
    as_arch(j, "Qwen3ForCausalLM");
    return j;
  }
  if (shape == "qwen2-0.5b") {
    json j = base_config("qwen2", 151936, 896, 24, 14, 2, 64, 4864, 1e6, 1e-6, true, 32768, 151643,
                         151643);
    as_arch(j, "Qwen2ForCausalLM");
    return j;
  }
  if (shape == "llama-3.2-1b") {
    json j = base_config("llama", 128256, 2048, 16, 32, 8, 64, 8192, 500000.0, 1e-5, true, 131072,
                         128000, json::array({128001, 128008, 128009}));
    j["rope_scaling"] = llama3_scaling();
    as_arch(j, "LlamaForCausalLM");
    return j;
  }
  if (shape == "llama-3.1-8b") {
    json j = base_config("llama", 128256, 4096, 32, 32, 8, 128, 14336, 500000.0, 1e-5, false,
                         131072, 128000, json::array({128001, 128008, 128009}));
    j["rope_scaling"] = llama3_scaling();
    j["rope_scaling"]["factor"] = 8.0;  // Llama 3.1's (3.2's is 32)
    as_arch(j, "LlamaForCausalLM");
    return j;
  }
  if (shape == "gemma-3-1b") {
    json j = base_config("gemma3_text", 262144, 1152, 26, 4, 1, 256, 6912, 1e6, 1e-6, true, 32768,
                         2, json::array({1, 106}));
    return gemma_extras(j, 512, 6, 256);
  }
  if (shape == "qwen3-moe-tiny") {
    json j = base_config("qwen3_moe", 151936, 512, 4, 8, 4, 64, 1536, 1e6, 1e-6, true, 40960,
                         151643, 151645);
    return moe_extras(j, 16, 4, 256, json::array());
  }
  // Tiny shapes: vocab 2048, hidden 128; token ids 1 / 2 play BOS / EOS. Only tiny-qwen2 ties
  // its embeddings: with random weights a tied head favours the input token, and greedy
  // decoding then repeats one token, which checks little.
  if (shape == "tiny-llama") {
    json j = base_config("llama", 2048, 128, 2, 4, 2, 32, 256, 500000.0, 1e-5, false, 131072, 1, 2);
    j["rope_scaling"] = llama3_scaling();
    as_arch(j, "LlamaForCausalLM");
    return j;
  }
  if (shape == "tiny-qwen2") {
    json j = base_config("qwen2", 2048, 128, 2, 4, 2, 32, 256, 1e6, 1e-6, true, 32768, 1, 2);
    as_arch(j, "Qwen2ForCausalLM");
    return j;
  }
  if (shape == "tiny-qwen3") {
    // head_dim 64 != hidden / heads: the key is read, not derived.
    json j = base_config("qwen3", 2048, 128, 3, 4, 2, 64, 256, 1e6, 1e-6, false, 40960, 1, 2);
    as_arch(j, "Qwen3ForCausalLM");
    return j;
  }
  if (shape == "tiny-qwen3_moe" || shape == "tiny-qwen3-moe") {
    json j = base_config("qwen3_moe", 2048, 128, 3, 4, 2, 32, 256, 1e6, 1e-6, false, 40960, 1, 2);
    return moe_extras(j, 8, 2, 64, json::array({1}));
  }
  if (shape == "tiny-gemma3") {
    // 6 layers, every third global; a 64-token window (below the tests' prompts) and
    // query_pre_attn_scalar 48 != head_dim; linear scaling on the global layers.
    json j = base_config("gemma3_text", 2048, 128, 6, 4, 1, 32, 256, 1e6, 1e-6, false, 32768, 1, 2);
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
    return gemma_extras(j, 64, 3, 48);
  }
  throw Error(ErrorKind::invalid_argument, "[synth llm] unknown shape '" + shape + "'");
}

// A small deterministic generator (splitmix64): the same seed gives the same files.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  float uniform() {  // [-1, 1)
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return float(double(z >> 11) * (2.0 / 9007199254740992.0) - 1.0);
  }

 private:
  uint64_t s_;
};

class Writer {
 public:
  Writer(uint64_t seed, DType dtype) : rng_(seed), dtype_(dtype) {}
  // U(center +- half)
  void add(const std::string& name, const Shape& shape, float center, float half) {
    Tensor t = Tensor::empty(shape, DType::f32);
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = center + half * rng_.uniform();
    map_.insert("[synth llm]", name, dtype_ == DType::f32 ? t : t.cast(dtype_));
  }
  void linear(const std::string& name, int64_t out, int64_t in) {
    add(name, {out, in}, 0.0f, std::sqrt(3.0f / float(in)));
  }
  const io::TensorMap& map() const { return map_; }

 private:
  Rng rng_;
  DType dtype_;
  io::TensorMap map_;
};

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  check(bool(out), ErrorKind::not_found, "[synth llm] cannot write " + path.string());
  out << text;
}

}  // namespace

std::vector<std::string> llm_synth_shape_names() {
  return {"qwen3-0.6b",     "qwen3-1.7b",     "llama-3.2-1b", "llama-3.1-8b", "gemma-3-1b",
          "qwen3-moe-tiny", "qwen2-0.5b",     "tiny-llama",   "tiny-qwen2",   "tiny-qwen3",
          "tiny-qwen3_moe", "tiny-qwen3-moe", "tiny-gemma3"};
}

std::string llm_synth_config_json(const std::string& shape, int64_t layers) {
  json j = shape_config(shape);
  if (layers > 0) {
    j["num_hidden_layers"] = layers;
    if (j.contains("layer_types")) {
      const int64_t pattern = j["sliding_window_pattern"].get<int64_t>();
      json types = json::array();
      for (int64_t l = 0; l < layers; ++l)
        types.push_back((l + 1) % pattern != 0 ? "sliding_attention" : "full_attention");
      j["layer_types"] = types;
    }
  }
  return j.dump(2) + "\n";
}

void write_synth_llm(const LlmSynthOptions& o, const std::string& dir) {
  check_arg(o.dtype == DType::f32 || o.dtype == DType::bf16,
            "[synth llm] dtype must be f32 or bf16");
  json j = json::parse(llm_synth_config_json(o.shape, o.layers));
  j["torch_dtype"] = o.dtype == DType::f32 ? "float32" : "bfloat16";
  if (!o.mtp.empty()) j["num_nextn_predict_layers"] = 1;
  const std::string text = j.dump(2) + "\n";
  const LlmConfig c = parse_llm_config(text, "synth " + o.shape);
  const FamilySpec spec = family_spec(c);
  const int64_t h = c.hidden_size, d = c.head_dim, qd = c.n_heads * d, kvd = c.n_kv_heads * d;
  const float norm_center = spec.norm_plus_one ? 0.0f : 1.0f;
  const float embed_half = 3.0f * std::sqrt(3.0f) / std::sqrt(float(h));  // std 3/sqrt(h)
  Writer w(o.seed, o.dtype);
  w.add("model.embed_tokens.weight", {c.vocab_size, h}, 0.0f, embed_half);
  w.add("model.norm.weight", {h}, norm_center, 0.1f);
  if (!c.tie_word_embeddings) w.add("lm_head.weight", {c.vocab_size, h}, 0.0f, embed_half);
  // A decoder layer under prefix p (layer l decides MoE or dense).
  auto layer = [&](const std::string& p, int64_t l) {
    auto norm = [&](const std::string& name, int64_t n) {
      w.add(p + name + ".weight", {n}, norm_center, 0.1f);
    };
    norm("input_layernorm", h);
    w.linear(p + "self_attn.q_proj.weight", qd, h);
    w.linear(p + "self_attn.k_proj.weight", kvd, h);
    w.linear(p + "self_attn.v_proj.weight", kvd, h);
    w.linear(p + "self_attn.o_proj.weight", h, qd);
    if (spec.qkv_bias) {
      w.add(p + "self_attn.q_proj.bias", {qd}, 0.0f, 0.5f);
      w.add(p + "self_attn.k_proj.bias", {kvd}, 0.0f, 0.5f);
      w.add(p + "self_attn.v_proj.bias", {kvd}, 0.0f, 0.5f);
    }
    if (spec.o_bias) w.add(p + "self_attn.o_proj.bias", {h}, 0.0f, 0.1f);
    if (spec.qk_norm) {
      norm("self_attn.q_norm", d);
      norm("self_attn.k_norm", d);
    }
    norm(spec.mlp_norm, h);
    if (spec.sandwich_norms) norm("post_feedforward_layernorm", h);
    if (!c.is_moe_layer(l)) {
      w.linear(p + "mlp.gate_proj.weight", c.intermediate_size, h);
      w.linear(p + "mlp.up_proj.weight", c.intermediate_size, h);
      w.linear(p + "mlp.down_proj.weight", h, c.intermediate_size);
      return;
    }
    w.linear(p + "mlp.gate.weight", c.num_experts, h);
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const std::string q = p + "mlp.experts." + std::to_string(e) + ".";
      w.linear(q + "gate_proj.weight", c.moe_intermediate_size, h);
      w.linear(q + "up_proj.weight", c.moe_intermediate_size, h);
      w.linear(q + "down_proj.weight", h, c.moe_intermediate_size);
    }
  };
  for (int64_t l = 0; l < c.n_layers; ++l) layer("model.layers." + std::to_string(l) + ".", l);
  // An MTP module (llm/mtp.h) in DeepSeek-V3's or MiMo's layout.
  if (o.mtp == "deepseek_v3") {
    const std::string p = "model.layers." + std::to_string(c.n_layers) + ".";
    layer(p, c.n_layers);
    w.add(p + "enorm.weight", {h}, 1.0f, 0.1f);
    w.add(p + "hnorm.weight", {h}, 1.0f, 0.1f);
    w.linear(p + "eh_proj.weight", h, 2 * h);
    w.add(p + "shared_head.norm.weight", {h}, 1.0f, 0.1f);
    w.add(p + "shared_head.head.weight", {c.vocab_size, h}, 0.0f, embed_half);
  } else if (o.mtp == "mimo") {
    const std::string p = "model.mtp_layers.0.";
    layer(p, 0);
    w.add(p + "token_layernorm.weight", {h}, 1.0f, 0.1f);
    w.add(p + "hidden_layernorm.weight", {h}, 1.0f, 0.1f);
    w.linear(p + "input_proj.weight", h, 2 * h);
    w.add(p + "final_layernorm.weight", {h}, 1.0f, 0.1f);
  } else {
    check_arg(o.mtp.empty(), "[synth llm] --mtp must be deepseek_v3 or mimo, not " + o.mtp);
  }
  // Gemma's post_attention_layernorm is the sandwich norm (its MLP norm is
  // pre_feedforward_layernorm), so add it when the family has both.
  if (spec.sandwich_norms)
    for (int64_t l = 0; l < c.n_layers; ++l)
      w.add("model.layers." + std::to_string(l) + ".post_attention_layernorm.weight", {h},
            norm_center, 0.1f);
  const std::filesystem::path root(dir);
  std::filesystem::create_directories(root);
  write_text(root / "config.json", text);
  json gen;
  gen["bos_token_id"] = c.bos_token_id;
  gen["eos_token_id"] =
      c.eos_token_ids.size() == 1 ? json(c.eos_token_ids[0]) : json(c.eos_token_ids);
  gen["do_sample"] = false;
  write_text(root / "generation_config.json", gen.dump(2) + "\n");
  io::write_safetensors((root / "model.safetensors").string(), w.map(), {{"format", "pt"}});
}

}  // namespace parley
