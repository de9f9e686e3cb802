// Recognizes a model file or folder by its contents (and a folder by the files in it) and
// summarizes it in one format-independent shape: what `parley inspect` prints.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace parley::io {

enum class ModelFormat { safetensors, npz, gguf, ggml_whisper, ctranslate2, onnx };

const char* format_name(ModelFormat f);

struct TensorSummary {
  std::string name;
  std::string dtype;  // parley dtype name, or the file's own type name ("q8_0", "int16")
  std::vector<int64_t> shape;
};

struct ModelSummary {
  std::string path;  // the file that was read
  ModelFormat format;
  std::vector<std::pair<std::string, std::string>> metadata;  // key -> value as text
  std::vector<TensorSummary> tensors;
  int64_t parameter_count = 0;
};

// The weights file inside a model folder (model.bin, model.safetensors,
// weights.safetensors, weights.npz, a single *.gguf), or `path` itself when it is a file.
// Throws not_found naming what was looked for.
std::string find_weights_file(const std::string& path);

// Detects the format from the first bytes (and the name, for ONNX and CTranslate2, whose
// files have no magic number). Throws unsupported when nothing matches.
ModelFormat detect_format(const std::string& file);

ModelSummary summarize_model(const std::string& path);

}  // namespace parley::io
