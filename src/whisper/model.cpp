// WhisperModel loading (format detection, config, weights) and WhisperSession's state.
#include "whisper/model.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/error.h"
#include "io/ctranslate2.h"
#include "whisper/decode_graphs.h"
#include "whisper/encoder.h"

namespace parley {

namespace whisper {
std::atomic<uint64_t> g_encoder_runs{0};
std::atomic<uint64_t> g_decoder_runs{0};
}  // namespace whisper

WhisperRunCounters whisper_run_counters() {
  return {whisper::g_encoder_runs.load(), whisper::g_decoder_runs.load()};
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

}  // namespace

WhisperModel::WhisperModel(std::string dir, std::string format, WhisperConfig config,
                           WhisperWeights weights, LoadOptions opt)
    : dir_(std::move(dir)),
      format_(std::move(format)),
      config_(std::move(config)),
      weights_(std::move(weights)),
      opt_(opt) {}

std::shared_ptr<const WhisperModel> WhisperModel::load(const std::string& dir,
                                                       const LoadOptions& opt) {
  check_arg(is_float(opt.dtype), "[whisper] " + dir + ": dtype " +
                                     std::string(dtype_name(opt.dtype)) + " is not a float type");
  check(opt.device != Device::cuda || cuda_available(), ErrorKind::unsupported,
        "[whisper] " + dir + ": CUDA requested but not available");
  const fs::path root(dir);
  const WeightsOptions wopt{opt.device, opt.dtype};
  if (fs::exists(root / "model.bin")) {
    const io::Ct2Model ct2 = io::read_ctranslate2((root / "model.bin").string());
    WhisperConfig config =
        config_from_ctranslate2(ct2, read_text_if_exists(root / "config.json"), dir);
    WhisperWeights weights = load_ctranslate2_weights(ct2, config, wopt, dir);
    return std::make_shared<const WhisperModel>(dir, "ctranslate2", std::move(config),
                                                std::move(weights), opt);
  }
  if (fs::exists(root / "model.safetensors") && fs::exists(root / "config.json")) {
    WhisperConfig config = config_from_huggingface(read_text(root / "config.json"), dir);
    if (config.alignment_heads.empty()) {
      // transformers keeps the alignment heads in generation_config.json.
      const std::string gen = read_text_if_exists(root / "generation_config.json");
      if (!gen.empty()) config.alignment_heads = alignment_heads_from_json(gen, dir);
      validate(config, dir);
    }
    WhisperWeights weights =
        load_huggingface_weights((root / "model.safetensors").string(), config, wopt);
    return std::make_shared<const WhisperModel>(dir, "huggingface", std::move(config),
                                                std::move(weights), opt);
  }
  throw Error(ErrorKind::not_found, "[whisper] " + dir +
                                        ": no model.bin (CTranslate2) or config.json + "
                                        "model.safetensors (Hugging Face) in the directory");
}

WhisperSession::WhisperSession(std::shared_ptr<const WhisperModel> model)
    : model_(std::move(model)), pool_(model_->device()), host_pool_(Device::cpu) {
  check_arg(model_ != nullptr, "[whisper] session: null model");
  const WhisperConfig& c = model_->config();
  const int64_t d = c.n_text_state, h = c.n_text_head, dh = d / h;
  const Device dev = model_->device();
  const DType dt = model_->dtype();
  audio_features_ = Tensor::empty({c.n_audio_ctx, c.n_audio_state}, dt, dev);
  cache_.resize(size_t(c.n_text_layer));
  for (LayerCache& l : cache_) {
    l.self_k = Tensor::empty({c.n_text_ctx, d}, dt, dev);
    l.self_v = Tensor::empty({c.n_text_ctx, d}, dt, dev);
    l.cross_kv = Tensor::empty({2, h, c.n_audio_ctx, dh}, dt, dev);
  }
  if (dev == Device::cuda) {
    // Op temporaries (conv1d's im2col columns, the split attention's partials) fit in
    // this, so the scratch buffer never moves under captured decoder-step graphs.
    constexpr size_t kScratchBytes = size_t(64) << 20;
    cuda::reserve_scratch(kScratchBytes);
    if (whisper::DecodeGraphs::enabled())
      graphs_ = std::make_shared<whisper::DecodeGraphs>(c.n_text_ctx);
  }
}

void WhisperSession::truncate(int n) {
  check_arg(n >= 0 && n <= n_cached_, "[whisper] truncate(" + std::to_string(n) +
                                          "): outside [0, " + std::to_string(n_cached_) + "]");
  n_cached_ = n;
}

WhisperTokenizer load_tokenizer(const WhisperModel& model) {
  const std::filesystem::path json = std::filesystem::path(model.dir()) / "tokenizer.json";
  check(std::filesystem::exists(json), ErrorKind::not_found,
        "[whisper] " + model.dir() + ": no tokenizer.json beside the weights");
  return WhisperTokenizer::from_hf_json(json.string(), model.config().n_vocab);
}

}  // namespace parley
