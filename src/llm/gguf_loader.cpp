// GGUF chat models: metadata -> LlmConfig, llama.cpp tensor names -> the weight roles of
// blocks.cpp (through a TensorSource under Hugging Face names), tokenizer and template.
#include "llm/gguf_loader.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <variant>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/ops/quant_matmul.h"
#include "io/mapped_file.h"
#include "llm/families/families.h"

namespace parley {

namespace fs = std::filesystem;

namespace {

const std::string kTag = "[llm gguf] ";

bool ends_with_gguf(const std::string& p) {
  return p.size() > 5 && p.compare(p.size() - 5, 5, ".gguf") == 0;
}

std::vector<std::string> gguf_files_in(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && ends_with_gguf(e.path().filename().string()))
      out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Integer metadata of any integer type; nullopt when absent.
std::optional<int64_t> opt_int(const io::GgufFile& f, const std::string& key) {
  const io::GgufValue* v = f.find(key);
  if (!v) return std::nullopt;
  return std::visit(
      [&](const auto& x) -> int64_t {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_integral_v<T>) {
          return int64_t(x);
        } else {
          throw Error(ErrorKind::invalid_argument,
                      kTag + f.source() + ": metadata '" + key + "' is " +
                          io::gguf_type_name(io::gguf_type_of(*v)) + ", not an integer");
        }
      },
      *v);
}

int64_t req_int(const io::GgufFile& f, const std::string& key) {
  const auto v = opt_int(f, key);
  check(v.has_value(), ErrorKind::not_found,
        kTag + f.source() + ": metadata '" + key + "' is missing");
  return *v;
}

std::optional<double> opt_float(const io::GgufFile& f, const std::string& key) {
  const io::GgufValue* v = f.find(key);
  if (!v) return std::nullopt;
  if (const float* p = std::get_if<float>(v)) return double(*p);
  if (const double* p = std::get_if<double>(v)) return *p;
  return double(*opt_int(f, key));  // integers are accepted; other types throw there
}

std::string arch_model_type(const std::string& arch, LlmFamily& family) {
  static const std::map<std::string, std::pair<std::string, LlmFamily>> known = {
      {"llama", {"llama", LlmFamily::llama}},
      {"qwen2", {"qwen2", LlmFamily::qwen2}},
      {"qwen3", {"qwen3", LlmFamily::qwen3}},
      {"qwen3moe", {"qwen3_moe", LlmFamily::qwen3_moe}},
      {"gemma3", {"gemma3_text", LlmFamily::gemma3}},
  };
  auto it = known.find(arch);
  check(it != known.end(), ErrorKind::unsupported,
        kTag + "general.architecture '" + arch +
            "' is not supported (llama, qwen2, qwen3, qwen3moe, gemma3)");
  family = it->second.second;
  return it->second.first;
}

bool has_tensor(const io::GgufFile& f, const std::string& name) {
  for (const auto& t : f.tensors())
    if (t.name == name) return true;
  return false;
}

// The f32 contents of a tensor of any plain or block-quantized type.
Tensor tensor_f32(const io::GgufFile& f, const io::GgufTensorInfo& info) {
  if (io::ggml_type_dtype(info.type)) {
    const Tensor t = f.tensor(info.name);
    check(is_float(t.dtype()), ErrorKind::unsupported,
          kTag + f.source() + ": tensor '" + info.name + "' is " + io::ggml_type_name(info.type) +
              ", not a float type");
    return t.dtype() == DType::f32 ? t : t.cast(DType::f32);
  }
  return io::dequantize_ggml(info.type, f.raw(info.name), info.shape);
}

// Undoes llama.cpp's permute for llama's Q / K: GGUF row h*D + 2j + s holds transformers'
// row h*D + s*D/2 + j (j < D/2, s in {0, 1}). Works on weights [heads*D, in] and biases.
Tensor unpermute_rows(const Tensor& t, int64_t heads, const std::string& what) {
  const int64_t rows = t.dim(0), in = t.numel() / rows;
  check_arg(heads > 0 && rows % (2 * heads) == 0,
            kTag + what + ": " + std::to_string(rows) + " rows do not split into " +
                std::to_string(heads) + " heads of even size");
  const int64_t d = rows / heads, half = d / 2;
  Tensor out = Tensor::empty(t.shape(), DType::f32);
  const float* src = t.data<float>();
  float* dst = out.data<float>();
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < half; ++j)
      for (int64_t s = 0; s < 2; ++s)
        std::memcpy(dst + (h * d + s * half + j) * in, src + (h * d + 2 * j + s) * in,
                    size_t(in) * sizeof(float));
  return out;
}

// The same for a block-quantized weight: its rows (whole blocks each) copied in the
// restored order into memory the new matrix owns.
QuantMatrix unpermute_rows(const QuantMatrix& m, int64_t heads, const std::string& what) {
  check_arg(heads > 0 && m.rows % (2 * heads) == 0,
            kTag + what + ": " + std::to_string(m.rows) + " rows do not split into " +
                std::to_string(heads) + " heads of even size");
  const int64_t d = m.rows / heads, half = d / 2, rb = m.row_bytes();
  auto buf = std::make_shared<std::vector<uint8_t>>(size_t(m.nbytes()));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < half; ++j)
      for (int64_t s = 0; s < 2; ++s)
        std::memcpy(buf->data() + (h * d + s * half + j) * rb, m.data + (h * d + 2 * j + s) * rb,
                    size_t(rb));
  const uint8_t* data = buf->data();
  return quant_matrix(m.type, m.rows, m.cols, data, m.nbytes(), std::move(buf), Device::cpu, what);
}

// Layer tensors that are linear weights (matmul_quant takes them in their blocks).
bool is_linear(const std::string& base) {
  for (const char* b : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                        "ffn_down", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"})
    if (base == b) return true;
  return false;
}

// Transformers' name of a llama.cpp layer tensor base ("attn_q" -> "self_attn.q_proj"),
// empty for names this loader does not use.
std::string layer_role(const std::string& base, const FamilySpec& spec) {
  static const std::map<std::string, std::string> names = {
      {"attn_norm", "input_layernorm"},
      {"attn_q", "self_attn.q_proj"},
      {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"},
      {"attn_q_norm", "self_attn.q_norm"},
      {"attn_k_norm", "self_attn.k_norm"},
      {"post_attention_norm", "post_attention_layernorm"},
      {"post_ffw_norm", "post_feedforward_layernorm"},
      {"ffn_gate", "mlp.gate_proj"},
      {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
      {"ffn_gate_inp", "mlp.gate"},
      {"ffn_gate_exps", "mlp.switch_mlp.gate_proj"},
      {"ffn_up_exps", "mlp.switch_mlp.up_proj"},
      {"ffn_down_exps", "mlp.switch_mlp.down_proj"},
  };
  if (base == "ffn_norm") return spec.mlp_norm;
  auto it = names.find(base);
  return it == names.end() ? std::string() : it->second;
}

// The inverse of the mapping above: the GGUF name of a transformers tensor name.
std::string gguf_name_of(const std::string& role, const FamilySpec& spec) {
  if (role == "model.embed_tokens.weight") return "token_embd.weight";
  if (role == "model.norm.weight") return "output_norm.weight";
  if (role == "lm_head.weight") return "output.weight";
  const std::string pre = "model.layers.";
  if (role.rfind(pre, 0) != 0) return role;
  const size_t dot = role.find('.', pre.size());
  const size_t last = role.rfind('.');
  if (dot == std::string::npos || last <= dot) return role;
  const std::string mapped = role.substr(dot + 1, last - dot - 1);
  for (const char* base :
       {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm",
        "post_attention_norm", "post_ffw_norm", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down",
        "ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"})
    if (layer_role(base, spec) == mapped)
      return "blk." + role.substr(pre.size(), dot - pre.size()) + "." + base + role.substr(last);
  return role;
}

}  // namespace

bool is_gguf_model(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    return !fs::exists(fs::path(path) / "config.json") && !gguf_files_in(path).empty();
  return ends_with_gguf(path);
}

bool is_llm_model(const std::string& path) {
  if (is_gguf_model(path)) return true;
  std::ifstream in(fs::path(path) / "config.json");
  if (!in) return false;
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("model_type") && j["model_type"].is_string() &&
         j["model_type"] != "whisper";
}

std::string gguf_model_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    check(fs::exists(path), ErrorKind::not_found, kTag + path + " does not exist");
    return path;
  }
  const std::vector<std::string> files = gguf_files_in(path);
  check(!files.empty(), ErrorKind::not_found, kTag + path + " holds no .gguf file");
  check_arg(files.size() == 1,
            kTag + path + " holds " + std::to_string(files.size()) + " .gguf files; name one");
  return files.front();
}

LlmConfig gguf_llm_config(const io::GgufFile& f) {
  const std::string arch = f.get<std::string>("general.architecture");
  LlmConfig c;
  c.model_type = arch_model_type(arch, c.family);
  const std::string a = arch + ".";
  auto need = [&](const std::string& k) { return req_int(f, a + k); };
  c.hidden_size = need("embedding_length");
  c.n_layers = need("block_count");
  c.n_heads = need("attention.head_count");
  c.n_kv_heads = opt_int(f, a + "attention.head_count_kv").value_or(c.n_heads);
  check_arg(c.hidden_size > 0 && c.n_layers > 0 && c.n_heads > 0 && c.n_kv_heads > 0,
            kTag + f.source() + ": sizes must be positive");
  c.head_dim = opt_int(f, a + "attention.key_length").value_or(c.hidden_size / c.n_heads);
  c.intermediate_size = opt_int(f, a + "feed_forward_length").value_or(0);
  c.max_position_embeddings = opt_int(f, a + "context_length").value_or(0);
  c.rms_norm_eps = float(opt_float(f, a + "attention.layer_norm_rms_epsilon").value_or(1e-6));
  c.rope_theta = opt_float(f, a + "rope.freq_base").value_or(10000.0);
  if (const io::GgufValue* t = f.find(a + "rope.scaling.type")) {
    const std::string* type = std::get_if<std::string>(t);
    check_arg(type != nullptr, kTag + f.source() + ": " + a + "rope.scaling.type is not a string");
    if (*type == "linear") {
      c.rope_scaling.type = "linear";
      c.rope_scaling.factor = float(opt_float(f, a + "rope.scaling.factor").value_or(1.0));
    } else {
      check(*type == "none", ErrorKind::unsupported,
            kTag + f.source() + ": rope.scaling.type '" + *type + "' is not supported");
    }
  }
  // Tensors settle what the metadata may leave out.
  const io::GgufTensorInfo& embd = f.info("token_embd.weight");
  check_arg(embd.shape.ndim() == 2 && embd.shape[1] == c.hidden_size,
            kTag + f.source() + ": token_embd.weight has shape " + embd.shape.str() +
                ", embedding_length is " + std::to_string(c.hidden_size));
  c.vocab_size = embd.shape[0];
  c.tie_word_embeddings = !has_tensor(f, "output.weight");
  c.attention_bias = c.family == LlmFamily::qwen2 || has_tensor(f, "blk.0.attn_q.bias");
  if (c.family == LlmFamily::qwen3_moe) {
    c.num_experts = need("expert_count");
    c.num_experts_per_tok = need("expert_used_count");
    c.moe_intermediate_size = need("expert_feed_forward_length");
    // llama.cpp renormalizes Qwen3-MoE's top-k weights unless the file says otherwise.
    const io::GgufValue* norm = f.find(a + "expert_weights_norm");
    c.norm_topk_prob = norm == nullptr || (std::get_if<bool>(norm) && *std::get_if<bool>(norm));
    // A layer without a router is dense (Hugging Face's mlp_only_layers).
    for (int64_t l = 0; l < c.n_layers; ++l)
      if (!has_tensor(f, "blk." + std::to_string(l) + ".ffn_gate_inp.weight"))
        c.mlp_only_layers.push_back(l);
  }
  if (c.family == LlmFamily::gemma3) {
    // llama.cpp scales Gemma 3's scores by key_length^-1/2 (query_pre_attn_scalar = head_dim
    // for every size but 27B, whose GGUF then differs from transformers here).
    // attention.scale, when written, is the score scale itself.
    c.query_pre_attn_scalar = float(c.head_dim);
    if (auto scale = opt_float(f, a + "attention.scale")) {
      check_arg(*scale > 0, kTag + f.source() + ": " + a + "attention.scale must be positive");
      c.query_pre_attn_scalar = float(1.0 / (*scale * *scale));
    }
    c.sliding_window = opt_int(f, a + "attention.sliding_window").value_or(0);
    c.rope_local_base_freq = 10000.0;
    c.layer_sliding.assign(size_t(c.n_layers), false);
    const io::GgufValue* pat = f.find(a + "attention.sliding_window_pattern");
    const io::GgufArray* arr = pat ? std::get_if<io::GgufArray>(pat) : nullptr;
    if (arr && arr->type() == io::GgufType::boolean) {
      const auto& v = std::get<std::vector<bool>>(arr->items);
      check_arg(int64_t(v.size()) == c.n_layers,
                kTag + f.source() + ": sliding_window_pattern has " + std::to_string(v.size()) +
                    " entries for " + std::to_string(c.n_layers) + " layers");
      for (size_t l = 0; l < v.size(); ++l) c.layer_sliding[l] = v[l];
    } else {
      const int64_t period = pat ? req_int(f, a + "attention.sliding_window_pattern") : 6;
      check_arg(period > 0, kTag + f.source() + ": sliding_window_pattern must be positive");
      for (int64_t l = 0; l < c.n_layers; ++l) c.layer_sliding[size_t(l)] = (l + 1) % period != 0;
    }
    c.final_logit_softcapping = float(opt_float(f, a + "final_logit_softcapping").value_or(0));
    c.attn_logit_softcapping = float(opt_float(f, a + "attn_logit_softcapping").value_or(0));
  }
  if (auto bos = opt_int(f, "tokenizer.ggml.bos_token_id")) c.bos_token_id = int32_t(*bos);
  for (const char* k : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"})
    if (auto e = opt_int(f, k))
      if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), int32_t(*e)) ==
          c.eos_token_ids.end())
        c.eos_token_ids.push_back(int32_t(*e));
  return c;
}

LlmModel load_gguf_llm(const std::string& path, const LlmLoadOptions& options) {
  const std::string file = gguf_model_file(path);
  const io::GgufFile f = io::read_gguf(file);
  LlmConfig config = gguf_llm_config(f);
  const FamilySpec spec = family_spec(config);
  const bool unpermute = config.family == LlmFamily::llama;
  std::map<std::string, Tensor> tensors;
  std::map<std::string, QuantMatrix> quant;  // linear weights left in their blocks
  // On the CPU, a weight in the layout the kernels read fastest (q4_K: 8-row groups, whole
  // groups per stacked expert). A packed one is a copy: the file's pages are released once
  // nothing reads them any more.
  auto cpu_layout = [&](QuantMatrix m, const Shape& shape) {
    if (options.device != Device::cpu || (shape.ndim() >= 3 && shape[-2] % kQ4kX8Rows != 0))
      return m;
    return matmul_quant_layout(m);
  };
  Tensor rope_freqs;
  for (const io::GgufTensorInfo& info : f.tensors()) {
    const std::string& n = info.name;
    std::string role, base;
    if (n == "token_embd.weight") {
      role = "model.embed_tokens.weight";
    } else if (n == "output_norm.weight") {
      role = "model.norm.weight";
    } else if (n == "output.weight") {
      role = "lm_head.weight";
    } else if (n == "rope_freqs.weight") {
      rope_freqs = tensor_f32(f, info);
      continue;
    } else if (n.rfind("blk.", 0) == 0) {
      const size_t dot = n.find('.', 4);
      const size_t last = n.rfind('.');
      if (dot == std::string::npos || last <= dot) continue;
      const std::string layer = n.substr(4, dot - 4);
      base = n.substr(dot + 1, last - dot - 1);
      const std::string mapped = layer_role(base, spec);
      if (mapped.empty()) continue;
      role = "model.layers." + layer + "." + mapped + n.substr(last);
    } else {
      continue;
    }
    // The output head in its blocks (a tied one is the embedding's blocks; the embedding is
    // also widened below for the row gather): the largest matrix of a small model, read
    // every step.
    const bool head = n == "output.weight" || n == "token_embd.weight";
    const std::span<const uint8_t> raw = f.raw(n);
    bool copied = false;  // the blocks live on in a packed copy of their own
    if (head && quant_type_from_ggml(info.type)) {
      // The tied embedding's rows are widened below, so its blocks serve the head only.
      QuantMatrix q =
          cpu_layout(io::ggml_quant_matrix(info.type, info.shape, raw, f.owner()), info.shape);
      copied = q.packed;
      quant.emplace(role, std::move(q));
      if (n == "output.weight") {
        if (copied) io::release_pages(raw);
        continue;
      }
    }
    const bool q_or_k = unpermute && (base == "attn_q" || base == "attn_k");
    const int64_t heads = base == "attn_q" ? config.n_heads : config.n_kv_heads;
    const std::string what = file + " " + n;
    if (is_linear(base) && n.compare(n.size() - 7, 7, ".weight") == 0 &&
        quant_type_from_ggml(info.type)) {
      QuantMatrix m = io::ggml_quant_matrix(info.type, info.shape, raw, f.owner());
      if (q_or_k) m = unpermute_rows(m, heads, what);
      m = cpu_layout(std::move(m), info.shape);
      if (m.packed) io::release_pages(raw);
      quant.emplace(role, std::move(m));
      continue;
    }
    Tensor t = tensor_f32(f, info);
    if (copied) io::release_pages(raw);  // widened too: the file's blocks are read no more
    if (q_or_k) t = unpermute_rows(t, heads, what);
    tensors.emplace(role, std::move(t));
  }
  TensorSource src(std::move(tensors), file);
  src.set_quant(std::move(quant));
  src.set_file_names([spec](const std::string& role) { return gguf_name_of(role, spec); });
  // Gemma's converter stores its norms as 1 + w already.
  src.set_norms_plus_one_stored(spec.norm_plus_one);
  src.set_target(options.device, options.dtype);
  if (rope_freqs.defined() && rope_freqs.numel() > 0)
    check_arg(rope_freqs.numel() == config.head_dim / 2,
              kTag + file + ": rope_freqs.weight has " + std::to_string(rope_freqs.numel()) +
                  " values, head_dim / 2 is " + std::to_string(config.head_dim / 2));
  return LlmModel::from_source(std::move(config), src, rope_freqs);
}

LlmModel load_llm_model(const std::string& path, const LlmLoadOptions& options) {
  return LlmModel::load(path, options);
}

Tokenizer load_llm_tokenizer(const std::string& path) {
  if (!is_gguf_model(path)) return Tokenizer::from_dir(path);
  return Tokenizer::from_gguf(io::read_gguf(gguf_model_file(path)));
}

GgufChatTemplateText gguf_chat_template_text(const std::string& path) {
  const std::string file = gguf_model_file(path);
  const io::GgufFile f = io::read_gguf(file);
  GgufChatTemplateText t;
  const io::GgufValue* v = f.find("tokenizer.chat_template");
  check(v != nullptr, ErrorKind::not_found, kTag + file + ": no tokenizer.chat_template");
  t.source = f.get<std::string>("tokenizer.chat_template");
  const io::GgufValue* tok = f.find("tokenizer.ggml.tokens");
  const io::GgufArray* arr = tok ? std::get_if<io::GgufArray>(tok) : nullptr;
  if (arr && arr->type() == io::GgufType::string) {
    const auto& names = std::get<std::vector<std::string>>(arr->items);
    auto token = [&](const char* key) {
      const auto id = opt_int(f, key);
      return id && *id >= 0 && size_t(*id) < names.size() ? names[size_t(*id)] : std::string();
    };
    t.bos_token = token("tokenizer.ggml.bos_token_id");
    t.eos_token = token("tokenizer.ggml.eos_token_id");
  }
  return t;
}

}  // namespace parley
