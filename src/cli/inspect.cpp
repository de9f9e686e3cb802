// `parley inspect [PATH]`: what a model file or folder holds (format, metadata, tensors),
// as text or JSON. Without PATH it reads the built-in default model.
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "engine/error.h"
#include "io/gguf.h"
#include "io/model_file.h"
#include "llm/config.h"
#include "llm/gguf_loader.h"
#include "llm/gguf_template.h"
#include "text/jinja/chat_template.h"
#include "text/tokenizer.h"
#include "whisper/model.h"

namespace parley::cli {
namespace {

struct InspectOptions {
  std::string path;
  bool json = false;
  int limit = 20;  // tensors listed in text output; 0 = all
};

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// A chat model's summary when PATH is a folder whose config.json names a chat family, or a
// GGUF whose general.architecture is one (null otherwise): the resolved hyper-parameters,
// the tokenizer and the template.
nlohmann::json chat_model_summary(const std::string& path) {
  if (!is_llm_model(path)) return nullptr;
  LlmConfig c;
  if (is_gguf_model(path)) {
    try {
      c = gguf_llm_config(io::read_gguf(gguf_model_file(path)));
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::unsupported) return nullptr;  // not a chat architecture
      throw;
    }
  } else {
    c = load_llm_config(path);
  }
  nlohmann::json j = {{"family", family_name(c.family)},
                      {"model_type", c.model_type},
                      {"layers", c.n_layers},
                      {"hidden_size", c.hidden_size},
                      {"heads", c.n_heads},
                      {"kv_heads", c.n_kv_heads},
                      {"head_dim", c.head_dim},
                      {"intermediate_size", c.intermediate_size},
                      {"vocab_size", c.vocab_size},
                      {"context", c.max_position_embeddings},
                      {"rope_theta", c.rope_theta},
                      {"tied_embeddings", c.tie_word_embeddings}};
  if (c.num_experts > 0)
    j["experts"] = {{"count", c.num_experts}, {"per_token", c.num_experts_per_tok}};
  if (c.sliding_window > 0) j["sliding_window"] = c.sliding_window;
  try {
    const Tokenizer tok = load_llm_tokenizer(path);
    j["tokenizer"] = {
        {"vocab_size", tok.vocab_size()}, {"bos_id", tok.bos_id()}, {"eos_ids", tok.eos_ids()}};
  } catch (const Error& e) {
    j["tokenizer"] = std::string("none: ") + e.what();
  }
  try {
    const LoadedChatTemplate t = load_llm_chat_template(path);
    j["chat_template"] = {{"name", t.tmpl.name()}, {"bytes", t.tmpl.source().size()}};
  } catch (const Error& e) {
    j["chat_template"] = std::string("none: ") + e.what();
  }
  return j;
}

void run_inspect(const InspectOptions& opt) {
  const std::string path = opt.path.empty() ? default_model_dir() : opt.path;
  const io::ModelSummary s = io::summarize_model(path);
  // The Whisper layout WhisperModel::load would read (file names and magic only).
  const nlohmann::json chat = chat_model_summary(path);
  // A chat folder has a Hugging Face config.json too: it is no Whisper model.
  const auto whisper = chat.is_null() ? detect_whisper_layout(path) : std::nullopt;
  const std::string layout = whisper ? layout_name(whisper->layout) : "";
  if (opt.json) {
    nlohmann::json j = {{"path", s.path},
                        {"format", io::format_name(s.format)},
                        {"whisper_layout", whisper ? nlohmann::json(layout) : nlohmann::json()},
                        {"parameters", s.parameter_count},
                        {"chat_model", chat},
                        {"metadata", nlohmann::json::object()},
                        {"tensors", nlohmann::json::array()}};
    for (const auto& [k, v] : s.metadata) j["metadata"][k] = v;
    for (const auto& t : s.tensors)
      j["tensors"].push_back({{"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape}});
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << s.path << "\n"
            << "format: " << io::format_name(s.format) << "\n";
  if (whisper) std::cout << "whisper layout: " << layout << "\n";
  if (!chat.is_null()) {
    std::cout << "chat model:";
    const char* sep = " ";
    for (const auto& [k, v] : chat.items()) {
      std::cout << sep << k << " " << v.dump();
      sep = ", ";
    }
    std::cout << "\n";
  }
  std::cout << "tensors: " << s.tensors.size() << ", parameters: " << s.parameter_count << "\n";
  for (const auto& [k, v] : s.metadata) std::cout << "  " << k << ": " << v << "\n";
  size_t shown = 0;
  for (const auto& t : s.tensors) {
    if (opt.limit > 0 && shown == size_t(opt.limit)) {
      std::cout << "  ... " << s.tensors.size() - shown << " more (--limit 0 lists all)\n";
      break;
    }
    std::cout << "  " << t.name << "  " << t.dtype << shape_text(t.shape) << "\n";
    ++shown;
  }
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto opt = std::make_shared<InspectOptions>();
  auto* cmd = app.add_subcommand(
      "inspect", "List a model's format, metadata and tensors (default: the built-in tiny.en)");
  cmd->add_option(
      "path", opt->path,
      "Model folder or file: safetensors, npz, gguf, whisper.cpp ggml, CTranslate2, onnx");
  cmd->add_flag("--json", opt->json, "Print JSON");
  cmd->add_option("--limit", opt->limit, "Tensors to list in text output (0: all)")
      ->capture_default_str();
  cmd->callback([opt] { run_inspect(*opt); });
}

}  // namespace parley::cli
