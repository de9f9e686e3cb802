// WhisperModel loading (format detection, config, weights) and WhisperSession's state.
#include "whisper/model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "audio/mel.h"
#include "engine/error.h"
#include "engine/ops/matmul.h"
#include "io/ctranslate2.h"
#include "io/ggml_legacy.h"
#include "io/npz.h"
#include "io/safetensors.h"
#include "whisper/decode_graphs.h"
#include "whisper/encoder.h"
#include "whisper/encoder_graph.h"
#include "whisper/logit_filters.h"

namespace parley {

namespace whisper {
std::atomic<uint64_t> g_encoder_runs{0};
std::atomic<uint64_t> g_encoder_graph_launches{0};
std::atomic<uint64_t> g_decoder_runs{0};
}  // namespace whisper

WhisperRunCounters whisper_run_counters() {
  return {whisper::g_encoder_runs.load(), whisper::g_decoder_runs.load(),
          whisper::g_encoder_graph_launches.load()};
}
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  check(bool(in), ErrorKind::not_found, "[whisper] cannot read " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string read_text_if_exists(const fs::path& path) {
  return fs::exists(path) ? read_text(path) : std::string();
}

// Stacks every decoder layer's cross-attention k|v projection into w.decoder_cross_kv and
// makes the layers' own weights views of their rows (no second copy).
void stack_cross_kv(WhisperWeights& w) {
  if (w.decoder_layers.empty()) return;
  const LinearWeights& first = w.decoder_layers[0].cross_kv;
  const int64_t n = int64_t(w.decoder_layers.size()), rows = first.weight.dim(0);
  LinearWeights& all = w.decoder_cross_kv;
  all.weight =
      Tensor::empty({n * rows, first.weight.dim(1)}, first.weight.dtype(), first.weight.device());
  all.bias = Tensor::empty({n * rows}, first.bias.dtype(), first.bias.device());
  for (int64_t i = 0; i < n; ++i) {
    LinearWeights& l = w.decoder_layers[size_t(i)].cross_kv;
    Tensor weight = all.weight.slice0(i * rows, (i + 1) * rows);
    Tensor bias = all.bias.slice0(i * rows, (i + 1) * rows);
    weight.copy_from(l.weight);
    bias.copy_from(l.bias);
    l.weight = weight;
    l.bias = bias;
  }
}

// The decoder's LayerNorms folded into the GEMMs after them (NormFoldWeights), where a
// decoder step can use them: CUDA with 16-bit weights (the few-row kernel folds only those).
void fold_decoder_norms(WhisperWeights& w, const LoadOptions& opt) {
  if (opt.device != Device::cuda || (opt.dtype != DType::f16 && opt.dtype != DType::bf16)) return;
  const auto fold = [](const Tensor& weight, const LayerNormWeights& ln, NormFoldWeights& out) {
    const int64_t n = weight.dim(0);
    out.w_gamma = Tensor::empty({n}, DType::f32, weight.device());
    out.w_shift = Tensor::empty({n}, DType::f32, weight.device());
    fold_layer_norm(weight, ln.gamma, ln.beta, out.w_gamma, out.w_shift);
  };
  for (DecoderLayerWeights& l : w.decoder_layers) {
    fold(l.self_qkv.weight, l.self_ln, l.self_fold);
    fold(l.cross_q.weight, l.cross_ln, l.cross_fold);
    fold(l.fc1.weight, l.mlp_ln, l.mlp_fold);
  }
  fold(w.token_embedding, w.decoder_ln, w.decoder_fold);
}

// LoadOptions::int8: q8_0 copies of the decoder's few-row GEMM weights (a decoder step reads
// every one of them: a quarter of the bytes of f32), the f32 weights kept for the rest; with
// int8_encoder also 8-bit copies of the encoder's linear weights.
void quantize_for_int8(WhisperWeights& w, const LoadOptions& opt) {
  check_arg(!opt.int8_encoder || opt.int8, "[whisper] int8_encoder needs the int8 configuration");
  if (!opt.int8) return;
  check(opt.device == Device::cpu && opt.dtype == DType::f32, ErrorKind::unsupported,
        "[whisper] int8 is a CPU configuration (f32 activations, q8_0 decoder weights)");
  for (DecoderLayerWeights& l : w.decoder_layers)
    for (LinearWeights* lw : {&l.self_qkv, &l.self_out, &l.cross_q, &l.cross_out, &l.fc1, &l.fc2})
      lw->q8 = quantize_q8_0(lw->weight);
  // LoadOptions::int8_encoder: the encoder's GEMMs (1500 rows a window, compute-bound) in
  // integers (ops/int8_matmul.h).
  if (opt.int8_encoder) {
    check(matmul_i8_native(), ErrorKind::unsupported,
          "[whisper] the int8 encoder needs parley built with oneDNN (PARLEY_GEMM_PROVIDER)");
    for (EncoderLayerWeights& l : w.encoder_layers)
      for (LinearWeights* lw : {&l.attn_qkv, &l.attn_out, &l.fc1, &l.fc2})
        lw->i8 = quantize_row_int8(lw->weight);
  }
  w.logits_q8 = quantize_q8_0(w.token_embedding);
  const QuantMatrix& q = w.logits_q8;
  const int64_t blocks = q.cols / 32;
  w.logits_max_d.assign(size_t(blocks), 0.0f);
  w.logits_max_l2.assign(size_t(blocks), 0.0f);
  for (int64_t r = 0; r < q.rows; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* blk = q.data + r * q.row_bytes() + b * 34;
      const float d = quant_f16(blk);
      int sum = 0;
      for (int i = 0; i < 32; ++i) sum += int(int8_t(blk[2 + i])) * int(int8_t(blk[2 + i]));
      w.logits_max_d[size_t(b)] = std::max(w.logits_max_d[size_t(b)], d);
      w.logits_max_l2[size_t(b)] = std::max(w.logits_max_l2[size_t(b)], d * d * float(sum));
    }
  // <|endoftext|> of the English-only vocabulary (the multilingual one's last BPE token).
  w.logits_exact_from = std::min<int64_t>(50256, q.rows);
}

}  // namespace

WhisperModel::WhisperModel(std::string dir, std::string format, WhisperConfig config,
                           WhisperWeights weights, LoadOptions opt,
                           std::vector<std::string> ggml_vocab)
    : dir_(std::move(dir)),
      format_(std::move(format)),
      config_(std::move(config)),
      weights_(std::move(weights)),
      opt_(opt),
      ggml_vocab_(std::move(ggml_vocab)),
      trained_audio_ctx_(config_.n_audio_ctx) {
  if (opt_.audio_ctx != 0) {
    check_arg(opt_.audio_ctx >= 1 && opt_.audio_ctx <= trained_audio_ctx_,
              "[whisper] audio_ctx " + std::to_string(opt_.audio_ctx) + " outside [1, " +
                  std::to_string(trained_audio_ctx_) +
                  "] (the model's encoder positions; 0 = all of them)");
    // The first N sinusoids are the N-row table's own (sinusoids(N, d) == rows 0..N-1).
    config_.n_audio_ctx = opt_.audio_ctx;
    weights_.encoder_positions = weights_.encoder_positions.slice0(0, opt_.audio_ctx);
  }
  stack_cross_kv(weights_);
  fold_decoder_norms(weights_, opt_);
  if (opt_.int8) f32_weights_ = weights_;  // before the q8_0 copies join
  quantize_for_int8(weights_, opt_);
}

int64_t whisper_window_frames(const WhisperModel& model) {
  return std::min<int64_t>(kChunkFrames, 2 * int64_t(model.config().n_audio_ctx));
}

int fitted_audio_ctx(const WhisperModel& model, int64_t content_frames) {
  // At least 15 s: with 10 s, tiny.en repeated a short turn ("10 of close. 10 of close.")
  // and the live WER rose by 1.3 points (bench/RESULTS.md, 2026-12-07).
  constexpr int64_t kStep = 250, kMargin = 100, kLeast = 750;  // 5 s, 2 s, 15 s
  const int64_t full = model.config().n_audio_ctx;
  const int64_t needed = (std::max<int64_t>(content_frames, 0) + 1) / 2 + kMargin;
  const int64_t fit = std::max(kLeast, (needed + kStep - 1) / kStep * kStep);
  return int(std::min(fit, full));
}

const char* layout_name(WhisperLayout layout) {
  switch (layout) {
    case WhisperLayout::ctranslate2: return "ctranslate2";
    case WhisperLayout::huggingface: return "huggingface";
    case WhisperLayout::mlx: return "mlx";
    case WhisperLayout::ggml: return "ggml";
  }
  return "?";
}

namespace {

bool has_ggml_magic(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  uint32_t magic = 0;
  in.read(reinterpret_cast<char*>(&magic), sizeof magic);
  return in.gcount() == sizeof magic && magic == io::kGgmlMagic;
}

// The ggml .bin files in a directory (whisper.cpp names them ggml-<model>.bin).
std::vector<fs::path> ggml_files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file(ec) && e.path().extension() == ".bin" && has_ggml_magic(e.path()))
      out.push_back(e.path());
  return out;
}

std::shared_ptr<const WhisperModel> load_mlx(const std::string& dir, const fs::path& weights_file,
                                             const LoadOptions& opt) {
  WhisperConfig config = config_from_mlx(read_text(fs::path(dir) / "config.json"), dir);
  io::TensorMap tensors;
  std::map<std::string, io::Int64Array> int64;
  if (weights_file.extension() == ".npz") {
    io::NpzOptions npz;
    npz.int64_arrays = &int64;
    tensors = io::read_npz(weights_file.string(), npz);
  } else {
    io::SafetensorsFile f = io::read_safetensors(weights_file.string());
    tensors = std::move(f.tensors);
    int64 = std::move(f.int64_tensors);
  }
  // mlx-whisper keeps the alignment heads as a parameter: int64 [n, 2] (layer, head)
  // pairs (mlx_whisper/whisper.py Whisper.alignment_heads; convert.py saves every
  // parameter). Files written without it use our default.
  if (auto it = int64.find("alignment_heads"); it != int64.end()) {
    const io::Int64Array& a = it->second;
    check_arg(a.shape.ndim() == 2 && a.shape[1] == 2, "[whisper] " + weights_file.string() +
                                                          ": alignment_heads has shape " +
                                                          a.shape.str() + ", expected [n, 2]");
    for (int64_t i = 0; i < a.shape[0]; ++i)
      config.alignment_heads.emplace_back(int(a.values[size_t(2 * i)]),
                                          int(a.values[size_t(2 * i + 1)]));
    validate(config, dir);
  }
  WhisperWeights weights = load_openai_named_weights(
      tensors, OpenaiNaming::mlx, config, {opt.device, opt.dtype}, weights_file.string());
  return std::make_shared<const WhisperModel>(dir, "mlx", std::move(config), std::move(weights),
                                              opt);
}

// whisper.cpp stores the 80 (or 128) x 201 mel filters it computes the log-mel with; ours
// are computed in code (audio/mel.h). A file whose filters differ would be run with
// different features than whisper.cpp uses, so it is refused.
void check_ggml_mel_filters(const Tensor& filters, int n_mels, const std::string& source) {
  const Tensor ours = mel_filters(n_mels);
  check_arg(filters.shape() == ours.shape(), "[whisper] " + source + ": mel filters " +
                                                 filters.shape().str() + ", expected " +
                                                 ours.shape().str());
  const Tensor theirs = filters.dtype() == DType::f32 ? filters : filters.cast(DType::f32);
  float max_diff = 0.0f;
  for (int64_t i = 0; i < ours.numel(); ++i)
    max_diff = std::max(max_diff, std::abs(ours.data<float>()[i] - theirs.data<float>()[i]));
  // The reference's own filters (mel_filters.npz) and ours agree to float rounding.
  check(max_diff <= 1e-6f, ErrorKind::unsupported,
        "[whisper] " + source + ": mel filters differ from Whisper's by up to " +
            std::to_string(max_diff));
}

std::shared_ptr<const WhisperModel> load_ggml(const std::string& dir, const fs::path& file,
                                              const LoadOptions& opt) {
  io::GgmlWhisperFile g = io::read_ggml_whisper(file.string());
  const std::string source = file.string();
  // ftype: 0 f32, 1 f16 (convert-pt-to-ggml.py's use_f16); + 1000 * qnt version when
  // quantized (whisper.cpp GGML_QNT_VERSION_FACTOR).
  check(g.hparams.ftype == 0 || g.hparams.ftype == 1, ErrorKind::unsupported,
        "[whisper] " + source + ": ggml ftype " + std::to_string(g.hparams.ftype) +
            " (quantized) is not supported; use an F16 or F32 file");
  WhisperConfig config = config_from_ggml(g.hparams, source);
  check_ggml_mel_filters(g.mel_filters, config.n_mels, source);
  check_arg(!g.vocab.empty() && g.vocab.size() <= size_t(config.n_vocab),
            "[whisper] " + source + ": vocabulary of " + std::to_string(g.vocab.size()) +
                " tokens for n_vocab " + std::to_string(config.n_vocab));
  WhisperWeights weights = load_openai_named_weights(g.tensors, OpenaiNaming::ggml, config,
                                                     {opt.device, opt.dtype}, source);
  return std::make_shared<const WhisperModel>(dir, "ggml", std::move(config), std::move(weights),
                                              opt, std::move(g.vocab));
}

}  // namespace

std::optional<DetectedLayout> detect_whisper_layout(const std::string& path) {
  const fs::path root(path);
  std::error_code ec;
  if (fs::is_regular_file(root, ec)) {
    if (has_ggml_magic(root)) return DetectedLayout{WhisperLayout::ggml, root.string()};
    return std::nullopt;
  }
  if (!fs::is_directory(root, ec)) return std::nullopt;
  auto file = [&](const char* name) { return fs::is_regular_file(root / name, ec); };
  if (file("model.bin") && !has_ggml_magic(root / "model.bin"))
    return DetectedLayout{WhisperLayout::ctranslate2, (root / "model.bin").string()};
  if (file("config.json")) {
    if (file("model.safetensors"))
      return DetectedLayout{WhisperLayout::huggingface, (root / "model.safetensors").string()};
    // mlx-whisper's load_model prefers weights.safetensors over weights.npz.
    for (const char* name : {"weights.safetensors", "weights.npz"})
      if (file(name)) return DetectedLayout{WhisperLayout::mlx, (root / name).string()};
  }
  const std::vector<fs::path> ggml = ggml_files_in(root);
  if (ggml.size() == 1) return DetectedLayout{WhisperLayout::ggml, ggml[0].string()};
  return std::nullopt;
}

std::shared_ptr<const WhisperModel> WhisperModel::load(const std::string& dir,
                                                       const LoadOptions& opt) {
  check_arg(is_float(opt.dtype), "[whisper] " + dir + ": dtype " +
                                     std::string(dtype_name(opt.dtype)) + " is not a float type");
  check(opt.device != Device::cuda || cuda_available(), ErrorKind::unsupported,
        "[whisper] " + dir + ": CUDA requested but not available");
  const fs::path root(dir);
  const WeightsOptions wopt{opt.device, opt.dtype};
  const std::optional<DetectedLayout> found = detect_whisper_layout(dir);
  check(found.has_value(), ErrorKind::not_found,
        "[whisper] " + dir +
            ": not a Whisper model (looked for model.bin (CTranslate2), config.json + "
            "model.safetensors (Hugging Face), config.json + weights.safetensors or "
            "weights.npz (mlx), a whisper.cpp ggml .bin)");
  switch (found->layout) {
    case WhisperLayout::ctranslate2: {
      const io::Ct2Model ct2 = io::read_ctranslate2(found->weights);
      WhisperConfig config =
          config_from_ctranslate2(ct2, read_text_if_exists(root / "config.json"), dir);
      WhisperWeights weights = load_ctranslate2_weights(ct2, config, wopt, dir);
      return std::make_shared<const WhisperModel>(dir, "ctranslate2", std::move(config),
                                                  std::move(weights), opt);
    }
    case WhisperLayout::huggingface: {
      WhisperConfig config = config_from_huggingface(read_text(root / "config.json"), dir);
      if (config.alignment_heads.empty()) {
        // transformers keeps the alignment heads in generation_config.json.
        const std::string gen = read_text_if_exists(root / "generation_config.json");
        if (!gen.empty()) config.alignment_heads = alignment_heads_from_json(gen, dir);
        validate(config, dir);
      }
      WhisperWeights weights = load_huggingface_weights(found->weights, config, wopt);
      return std::make_shared<const WhisperModel>(dir, "huggingface", std::move(config),
                                                  std::move(weights), opt);
    }
    case WhisperLayout::mlx: return load_mlx(dir, found->weights, opt);
    case WhisperLayout::ggml: return load_ggml(dir, found->weights, opt);
  }
  throw Error(ErrorKind::internal, "[whisper] " + dir + ": unknown layout");
}

WhisperSession::WhisperSession(std::shared_ptr<const WhisperModel> model)
    : model_(std::move(model)), pool_(model_->device()), host_pool_(Device::cpu) {
  check_arg(model_ != nullptr, "[whisper] session: null model");
  const WhisperConfig& c = model_->config();
  const int64_t d = c.n_text_state;
  const Device dev = model_->device();
  const DType dt = model_->dtype();
  audio_features_ = Tensor::empty({c.n_audio_ctx, c.n_audio_state}, dt, dev);
  cache_.resize(size_t(c.n_text_layer));
  for (LayerCache& l : cache_) l.self_qkv = Tensor::empty({c.n_text_ctx, 3 * d}, dt, dev);
  cross_kv_ = Tensor::empty({c.n_audio_ctx, c.n_text_layer * 2 * d}, dt, dev);
  if (dev == Device::cuda) {
    // Op temporaries (conv1d's im2col columns, the split attention's partials) fit in
    // this, so the scratch buffer never moves under captured decoder-step graphs.
    constexpr size_t kScratchBytes = size_t(64) << 20;
    cuda::reserve_scratch(kScratchBytes);
    if (whisper::DecodeGraphs::enabled())
      graphs_ = std::make_shared<whisper::DecodeGraphs>(c.n_text_ctx, kRuleWidth);
    if (whisper::EncoderGraph::enabled())
      encoder_graph_ = std::make_shared<whisper::EncoderGraph>(
          Shape{1, c.n_mels, 2 * int64_t(c.n_audio_ctx)}, dt);
  }
}

void WhisperSession::truncate(int n) {
  check_arg(n >= 0 && n <= n_cached_, "[whisper] truncate(" + std::to_string(n) +
                                          "): outside [0, " + std::to_string(n_cached_) + "]");
  n_cached_ = n;
  chain_next_ = -1;
  if (beam_chain_active_) {  // the rows' slots are on the device: the rows end here
    beam_chain_active_ = false;
    n_rows_ = 0;
  }
}

std::vector<std::string> default_vocab_dirs() {
  std::vector<std::string> dirs;
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v && *v ? v : "";
  };
  if (std::string v = env("PARLEY_VOCAB_DIR"); !v.empty()) dirs.push_back(v);
  if (std::string home = env("PARLEY_HOME"); !home.empty())
    dirs.push_back(home + "/whisper");
  else if (std::string xdg = env("XDG_DATA_HOME"); !xdg.empty())
    dirs.push_back(xdg + "/parley/whisper");
  else if (std::string h = env("HOME"); !h.empty())
    dirs.push_back(h + "/.local/share/parley/whisper");
  dirs.push_back(PARLEY_WHISPER_VOCAB_DIR);
  return dirs;
}

WhisperTokenizer load_tokenizer(const WhisperModel& model,
                                const std::vector<std::string>& vocab_dirs) {
  const WhisperConfig& c = model.config();
  if (model.format() == "ggml")
    return WhisperTokenizer::from_ggml_vocab(model.ggml_vocab(), c.multilingual(), c.n_vocab,
                                             model.dir());
  const fs::path json = fs::path(model.dir()) / "tokenizer.json";
  if (fs::exists(json)) return WhisperTokenizer::from_hf_json(json.string(), c.n_vocab);
  // openai-whisper's get_encoding: "multilingual" or "gpt2" (English-only) ranks.
  const std::string name = c.multilingual() ? "multilingual.tiktoken" : "gpt2.tiktoken";
  std::vector<std::string> looked = {json.string(), (fs::path(model.dir()) / name).string()};
  for (const std::string& d : vocab_dirs) looked.push_back((fs::path(d) / name).string());
  for (size_t i = 1; i < looked.size(); ++i)
    if (fs::is_regular_file(looked[i]))
      return WhisperTokenizer::from_tiktoken(looked[i], c.multilingual(), c.n_vocab);
  std::string where;
  for (const std::string& l : looked) where += (where.empty() ? "" : ", ") + l;
  throw Error(ErrorKind::not_found, "[whisper] " + model.dir() + ": no tokenizer (looked for " +
                                        where + "; set PARLEY_VOCAB_DIR to a folder with " + name +
                                        ")");
}

WhisperTokenizer load_tokenizer(const WhisperModel& model) {
  return load_tokenizer(model, default_vocab_dirs());
}

}  // namespace parley
