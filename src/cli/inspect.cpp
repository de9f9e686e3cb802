// `parley inspect [PATH]`: what a model file or folder holds (format, metadata, tensors),
// as text or JSON. Without PATH it reads the built-in default model.
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "io/model_file.h"
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

void run_inspect(const InspectOptions& opt) {
  const std::string path = opt.path.empty() ? default_model_dir() : opt.path;
  const io::ModelSummary s = io::summarize_model(path);
  // The Whisper layout WhisperModel::load would read (file names and magic only).
  const auto whisper = detect_whisper_layout(path);
  const std::string layout = whisper ? layout_name(whisper->layout) : "";
  if (opt.json) {
    nlohmann::json j = {{"path", s.path},
                        {"format", io::format_name(s.format)},
                        {"whisper_layout", whisper ? nlohmann::json(layout) : nlohmann::json()},
                        {"parameters", s.parameter_count},
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
