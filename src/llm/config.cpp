// config.json -> LlmConfig, with each family's transformers defaults.
#include "llm/config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/error.h"

namespace parley {

namespace {

using nlohmann::json;

struct Reader {
  const json& j;
  std::string source;

  [[noreturn]] void bad(const std::string& key, const std::string& why) const {
    throw Error(ErrorKind::invalid_argument, "[llm config] " + source + ": '" + key + "' " + why);
  }
  bool has(const char* key) const { return j.contains(key) && !j.at(key).is_null(); }
  int64_t integer(const char* key) const {
    if (!has(key)) bad(key, "is missing");
    if (!j.at(key).is_number_integer()) bad(key, "must be an integer");
    return j.at(key).get<int64_t>();
  }
  int64_t integer(const char* key, int64_t dflt) const { return has(key) ? integer(key) : dflt; }
  double number(const char* key, double dflt) const {
    if (!has(key)) return dflt;
    if (!j.at(key).is_number()) bad(key, "must be a number");
    return j.at(key).get<double>();
  }
  bool boolean(const char* key, bool dflt) const {
    if (!has(key)) return dflt;
    if (!j.at(key).is_boolean()) bad(key, "must be true or false");
    return j.at(key).get<bool>();
  }
  std::string string(const char* key, const std::string& dflt) const {
    if (!has(key)) return dflt;
    if (!j.at(key).is_string()) bad(key, "must be a string");
    return j.at(key).get<std::string>();
  }
  int64_t positive(const char* key) const {
    const int64_t v = integer(key);
    if (v <= 0) bad(key, "must be positive, got " + std::to_string(v));
    return v;
  }
};

LlmFamily family_of(const std::string& model_type, const std::string& source) {
  if (model_type == "llama" || model_type == "mistral") return LlmFamily::llama;
  if (model_type == "qwen2") return LlmFamily::qwen2;
  if (model_type == "qwen3") return LlmFamily::qwen3;
  if (model_type == "qwen3_moe") return LlmFamily::qwen3_moe;
  if (model_type == "gemma3_text") return LlmFamily::gemma3;
  throw Error(ErrorKind::unsupported,
              "[llm config] " + source + ": model_type '" + model_type +
                  "' is not supported (llama, mistral, qwen2, qwen3, qwen3_moe, gemma3_text, "
                  "gemma3)");
}

// `key` of r: a rope_scaling object (or null), or a transformers 5 rope_parameters entry.
RopeScaling parse_rope_scaling(const Reader& r, const char* key) {
  RopeScaling s;
  if (!r.has(key)) return s;
  const json& rs = r.j.at(key);
  if (!rs.is_object()) r.bad(key, "must be an object or null");
  Reader q{rs, r.source};
  s.type = q.string("rope_type", q.string("type", "default"));
  if (s.type == "default") return s;
  if (s.type != "linear" && s.type != "llama3")
    throw Error(ErrorKind::unsupported, "[llm config] " + r.source + ": rope_scaling type '" +
                                            s.type +
                                            "' is not supported yet (default, linear, llama3)");
  s.factor = float(q.number("factor", 0.0));
  if (!(s.factor > 0)) q.bad("factor", "must be a positive number");
  s.low_freq_factor = float(q.number("low_freq_factor", 1.0));
  s.high_freq_factor = float(q.number("high_freq_factor", 4.0));
  s.original_max_position_embeddings = float(q.number("original_max_position_embeddings", 8192));
  if (s.type == "llama3" && !(s.high_freq_factor > s.low_freq_factor))
    q.bad("high_freq_factor", "must exceed low_freq_factor");
  return s;
}

std::vector<int32_t> token_ids(const Reader& r, const char* key) {
  std::vector<int32_t> ids;
  if (!r.has(key)) return ids;
  const json& v = r.j.at(key);
  if (v.is_number_integer()) {
    ids.push_back(v.get<int32_t>());
  } else if (v.is_array()) {
    for (const json& e : v) {
      if (!e.is_number_integer()) r.bad(key, "must be an integer or a list of integers");
      ids.push_back(e.get<int32_t>());
    }
  } else {
    r.bad(key, "must be an integer or a list of integers");
  }
  return ids;
}

// transformers 5 writes rope_theta and the scaling into rope_parameters; Gemma 3 keeps one
// entry per layer type there (full_attention, sliding_attention).
void parse_rope_parameters(const Reader& r, LlmConfig& c) {
  const json& rp = r.j.at("rope_parameters");
  if (!rp.is_object()) r.bad("rope_parameters", "must be an object");
  const bool per_type = rp.contains("full_attention");
  Reader top{rp, r.source};
  const Reader global = per_type ? Reader{rp.at("full_attention"), r.source} : top;
  if (!global.j.is_object()) r.bad("rope_parameters", "entries must be objects");
  c.rope_theta = global.number("rope_theta", c.rope_theta);
  const json wrapped = {{"rope_scaling", global.j}};
  c.rope_scaling = parse_rope_scaling(Reader{wrapped, r.source}, "rope_scaling");
  if (per_type && rp.contains("sliding_attention") && rp.at("sliding_attention").is_object())
    c.rope_local_base_freq =
        Reader{rp.at("sliding_attention"), r.source}.number("rope_theta", c.rope_local_base_freq);
}

void parse_gemma3(const Reader& r, LlmConfig& c) {
  c.query_pre_attn_scalar = float(r.number("query_pre_attn_scalar", 256));
  c.sliding_window = r.integer("sliding_window", 4096);
  if (c.sliding_window <= 0) r.bad("sliding_window", "must be positive");
  c.rope_local_base_freq = r.number("rope_local_base_freq", c.rope_local_base_freq);
  c.final_logit_softcapping = float(r.number("final_logit_softcapping", 0.0));
  c.attn_logit_softcapping = float(r.number("attn_logit_softcapping", 0.0));
  const std::string act =
      r.string("hidden_activation", r.string("hidden_act", "gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh" && act != "gelu_tanh")
    throw Error(ErrorKind::unsupported, "[llm config] " + r.source + ": Gemma 3 activation '" +
                                            act + "' is not supported (gelu_pytorch_tanh)");
  c.layer_sliding.assign(size_t(c.n_layers), false);
  if (r.has("layer_types")) {
    const json& lt = r.j.at("layer_types");
    if (!lt.is_array() || int64_t(lt.size()) != c.n_layers)
      r.bad("layer_types", "must list one type per layer (" + std::to_string(c.n_layers) + ")");
    for (size_t i = 0; i < lt.size(); ++i) {
      const std::string t = lt[i].is_string() ? lt[i].get<std::string>() : "";
      if (t != "sliding_attention" && t != "full_attention")
        r.bad("layer_types", "entries must be sliding_attention or full_attention");
      c.layer_sliding[i] = t == "sliding_attention";
    }
  } else {
    const int64_t pattern = r.integer("sliding_window_pattern", 6);
    if (pattern <= 0) r.bad("sliding_window_pattern", "must be positive");
    for (int64_t l = 0; l < c.n_layers; ++l) c.layer_sliding[size_t(l)] = (l + 1) % pattern != 0;
  }
}

void parse_moe(const Reader& r, LlmConfig& c) {
  c.num_experts = r.positive("num_experts");
  c.num_experts_per_tok = r.positive("num_experts_per_tok");
  if (c.num_experts_per_tok > c.num_experts) r.bad("num_experts_per_tok", "exceeds num_experts");
  c.moe_intermediate_size = r.positive("moe_intermediate_size");
  c.decoder_sparse_step = r.integer("decoder_sparse_step", 1);
  if (c.decoder_sparse_step <= 0) r.bad("decoder_sparse_step", "must be positive");
  c.norm_topk_prob = r.boolean("norm_topk_prob", false);
  if (r.has("mlp_only_layers")) {
    for (const json& e : r.j.at("mlp_only_layers")) {
      if (!e.is_number_integer()) r.bad("mlp_only_layers", "must list layer indices");
      c.mlp_only_layers.push_back(e.get<int64_t>());
    }
  }
}

}  // namespace

const char* family_name(LlmFamily f) {
  switch (f) {
    case LlmFamily::llama: return "llama";
    case LlmFamily::qwen2: return "qwen2";
    case LlmFamily::qwen3: return "qwen3";
    case LlmFamily::qwen3_moe: return "qwen3_moe";
    case LlmFamily::gemma3: return "gemma3";
  }
  return "?";
}

bool LlmConfig::is_moe_layer(int64_t layer) const {
  if (num_experts <= 0) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end())
    return false;
  return (layer + 1) % decoder_sparse_step == 0;
}

LlmConfig parse_llm_config(const std::string& json_text, const std::string& source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    throw Error(ErrorKind::invalid_argument, "[llm config] " + source + ": " + e.what());
  }
  if (!root.is_object())
    throw Error(ErrorKind::invalid_argument, "[llm config] " + source + ": not a JSON object");
  Reader top{root, source};
  std::string model_type = top.string("model_type", "");
  if (model_type.empty()) top.bad("model_type", "is missing");
  // A multimodal Gemma 3 config keeps the text model's keys under text_config.
  const json* body = &root;
  if (model_type == "gemma3") {
    if (!top.has("text_config") || !root.at("text_config").is_object())
      top.bad("text_config", "is missing (model_type gemma3)");
    body = &root.at("text_config");
    model_type = "gemma3_text";
  }
  Reader r{*body, source};
  LlmConfig c;
  c.model_type = model_type;
  c.family = family_of(model_type, source);
  const bool gemma = c.family == LlmFamily::gemma3;
  c.vocab_size = gemma && !r.has("vocab_size") ? 262208 : r.positive("vocab_size");
  c.hidden_size = r.positive("hidden_size");
  c.n_layers = r.positive("num_hidden_layers");
  c.n_heads = r.positive("num_attention_heads");
  c.n_kv_heads = r.integer("num_key_value_heads", c.n_heads);
  if (c.n_kv_heads <= 0 || c.n_heads % c.n_kv_heads != 0)
    r.bad("num_key_value_heads", "must divide num_attention_heads");
  c.head_dim = r.integer("head_dim", c.hidden_size / c.n_heads);
  if (c.head_dim <= 0 || c.head_dim % 2 != 0) r.bad("head_dim", "must be positive and even");
  c.intermediate_size = r.positive("intermediate_size");
  c.rms_norm_eps = float(r.number("rms_norm_eps", gemma ? 1e-6 : 1e-6));
  c.rope_theta = r.number("rope_theta", gemma ? 1e6 : 10000.0);
  c.rope_scaling = parse_rope_scaling(r, "rope_scaling");
  if (!r.has("rope_theta") && r.has("rope_parameters")) parse_rope_parameters(r, c);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", gemma);
  c.attention_bias = c.family == LlmFamily::qwen2 || r.boolean("attention_bias", false);
  c.max_position_embeddings = r.integer("max_position_embeddings", 0);
  if (c.family == LlmFamily::llama) {
    const std::string act = r.string("hidden_act", "silu");
    if (act != "silu")
      throw Error(ErrorKind::unsupported,
                  "[llm config] " + source + ": hidden_act '" + act + "' is not supported (silu)");
    if (r.boolean("mlp_bias", false))
      throw Error(ErrorKind::unsupported, "[llm config] " + source + ": mlp_bias is not supported");
    if (model_type == "mistral" && r.has("sliding_window"))
      throw Error(ErrorKind::unsupported,
                  "[llm config] " + source + ": Mistral's sliding_window is not supported yet");
  }
  if (c.family == LlmFamily::qwen3_moe) parse_moe(r, c);
  if (gemma) parse_gemma3(r, c);
  const std::vector<int32_t> bos = token_ids(top.has("bos_token_id") ? top : r, "bos_token_id");
  if (!bos.empty()) c.bos_token_id = bos.front();
  c.eos_token_ids = token_ids(top.has("eos_token_id") ? top : r, "eos_token_id");
  return c;
}

LlmConfig load_llm_config(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  std::ifstream in(path);
  check(bool(in), ErrorKind::not_found, "[llm config] cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_llm_config(ss.str(), path);
}

}  // namespace parley
