#include "io/model_file.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <variant>

#include "engine/error.h"
#include "io/ctranslate2.h"
#include "io/ggml_legacy.h"
#include "io/gguf.h"
#include "io/npz.h"
#include "io/onnx.h"
#include "io/safetensors.h"

namespace parley::io {

namespace fs = std::filesystem;

const char* format_name(ModelFormat f) {
  switch (f) {
    case ModelFormat::safetensors: return "safetensors";
    case ModelFormat::npz: return "npz";
    case ModelFormat::gguf: return "gguf";
    case ModelFormat::ggml_whisper: return "ggml (whisper.cpp)";
    case ModelFormat::ctranslate2: return "ctranslate2";
    case ModelFormat::onnx: return "onnx";
  }
  return "?";
}

std::string find_weights_file(const std::string& path) {
  std::error_code ec;
  check(fs::exists(path, ec), ErrorKind::not_found, "[model] " + path + " does not exist");
  if (!fs::is_directory(path, ec)) return path;
  for (const char* name :
       {"model.bin", "model.safetensors", "weights.safetensors", "weights.npz"}) {
    const fs::path p = fs::path(path) / name;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  std::vector<std::string> ggufs;
  for (const auto& e : fs::directory_iterator(path, ec))
    if (e.path().extension() == ".gguf") ggufs.push_back(e.path().string());
  if (ggufs.size() == 1) return ggufs[0];
  throw Error(ErrorKind::not_found,
              "[model] " + path +
                  ": no weights file (looked for model.bin, model.safetensors, "
                  "weights.safetensors, weights.npz, or one *.gguf)");
}

ModelFormat detect_format(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  check(bool(in), ErrorKind::not_found, "[model] cannot open " + file);
  unsigned char head[16] = {};
  in.read(reinterpret_cast<char*>(head), sizeof head);
  const auto got = size_t(in.gcount());
  const std::string ext = fs::path(file).extension().string();
  if (got >= 4 && std::memcmp(head, "GGUF", 4) == 0) return ModelFormat::gguf;
  if (got >= 4 && std::memcmp(head, "lmgg", 4) == 0) return ModelFormat::ggml_whisper;  // LE 'ggml'
  if (got >= 4 && std::memcmp(head, "PK\x03\x04", 4) == 0) return ModelFormat::npz;
  if (got >= 9 && head[8] == '{') return ModelFormat::safetensors;  // u64 length, then JSON
  if (ext == ".onnx") return ModelFormat::onnx;
  if (ext == ".bin") return ModelFormat::ctranslate2;
  throw Error(ErrorKind::unsupported,
              "[model] " + file +
                  ": not a recognized model file (safetensors, npz, gguf, whisper.cpp ggml, "
                  "CTranslate2 model.bin, onnx)");
}

namespace {

void add_tensors(ModelSummary& s, const TensorMap& tensors) {
  for (const auto& [name, t] : tensors) {
    s.tensors.push_back(
        {name, std::string(dtype_name(t.dtype())), {t.shape().begin(), t.shape().end()}});
    s.parameter_count += t.numel();
  }
}

// Integer index arrays (e.g. mlx-whisper's alignment_heads), listed as "i64".
void add_int64(ModelSummary& s, const std::map<std::string, Int64Array>& arrays) {
  for (const auto& [name, a] : arrays) {
    s.tensors.push_back({name, "i64", {a.shape.begin(), a.shape.end()}});
    s.parameter_count += a.shape.numel();
  }
}

std::string gguf_value_text(const GgufValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return x.size() > 200 ? x.substr(0, 200) + "..." : x;
        } else if constexpr (std::is_same_v<T, GgufArray>) {
          std::ostringstream os;  // not string operator+: GCC 12 -Wrestrict false positive
          os << "[" << gguf_type_name(x.type()) << " array of " << x.size() << "]";
          return os.str();
        } else if constexpr (std::is_same_v<T, bool>) {
          return x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>) {
          return std::to_string(int(x));
        } else {
          std::ostringstream os;
          os << x;
          return os.str();
        }
      },
      v);
}

void summarize_ctranslate2(ModelSummary& s) {
  const Ct2Model m = read_ctranslate2(s.path);
  s.metadata = {{"binary_version", std::to_string(m.binary_version)},
                {"spec", m.spec_name},
                {"spec_revision", std::to_string(m.spec_revision)},
                {"aliases", std::to_string(m.aliases.size())}};
  for (const auto& [name, v] : m.variables) {
    s.tensors.push_back(
        {name, std::string(ct2_type_name(v.type)), {v.shape.begin(), v.shape.end()}});
    s.parameter_count += v.shape.numel();
  }
}

void summarize_gguf(ModelSummary& s) {
  const GgufFile g = read_gguf(s.path);
  s.metadata.push_back({"version", std::to_string(g.version())});
  for (const auto& [key, value] : g.metadata()) s.metadata.push_back({key, gguf_value_text(value)});
  for (const auto& t : g.tensors()) {
    s.tensors.push_back({t.name, ggml_type_name(t.type), {t.shape.begin(), t.shape.end()}});
    s.parameter_count += t.shape.numel();
  }
}

void summarize_ggml(ModelSummary& s) {
  const GgmlWhisperFile g = read_ggml_whisper(s.path);
  const auto& h = g.hparams;
  s.metadata = {{"n_vocab", std::to_string(h.n_vocab)},
                {"n_audio_ctx", std::to_string(h.n_audio_ctx)},
                {"n_audio_state", std::to_string(h.n_audio_state)},
                {"n_audio_head", std::to_string(h.n_audio_head)},
                {"n_audio_layer", std::to_string(h.n_audio_layer)},
                {"n_text_ctx", std::to_string(h.n_text_ctx)},
                {"n_text_state", std::to_string(h.n_text_state)},
                {"n_text_head", std::to_string(h.n_text_head)},
                {"n_text_layer", std::to_string(h.n_text_layer)},
                {"n_mels", std::to_string(h.n_mels)},
                {"ftype", std::to_string(h.ftype)},
                {"mel_filters", g.mel_filters.shape().str()},
                {"vocab_tokens", std::to_string(g.vocab.size())}};
  add_tensors(s, g.tensors);
}

void summarize_onnx(ModelSummary& s) {
  const OnnxModel m = read_onnx(s.path);
  s.metadata = {{"ir_version", std::to_string(m.ir_version)},
                {"opset", std::to_string(m.opset())},
                {"producer", m.producer_name + " " + m.producer_version},
                {"graph", m.graph_name}};
  for (const auto& [k, v] : m.metadata) s.metadata.push_back({k, v});
  add_tensors(s, m.tensors);
  for (const auto& [name, t] : m.int64_tensors)
    s.tensors.push_back({name, "i64", {t.shape.begin(), t.shape.end()}});
}

}  // namespace

ModelSummary summarize_model(const std::string& path) {
  ModelSummary s;
  s.path = find_weights_file(path);
  s.format = detect_format(s.path);
  switch (s.format) {
    case ModelFormat::safetensors: {
      const SafetensorsFile f = read_safetensors(s.path);
      for (const auto& [k, v] : f.metadata) s.metadata.push_back({k, v});
      add_tensors(s, f.tensors);
      add_int64(s, f.int64_tensors);
      break;
    }
    case ModelFormat::npz: {
      std::map<std::string, Int64Array> int64;
      NpzOptions options;
      options.int64_arrays = &int64;
      add_tensors(s, read_npz(s.path, options));
      add_int64(s, int64);
      break;
    }
    case ModelFormat::gguf: summarize_gguf(s); break;
    case ModelFormat::ggml_whisper: summarize_ggml(s); break;
    case ModelFormat::ctranslate2: summarize_ctranslate2(s); break;
    case ModelFormat::onnx: summarize_onnx(s); break;
  }
  return s;
}

}  // namespace parley::io
