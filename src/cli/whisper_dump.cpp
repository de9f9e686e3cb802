// `parley whisper dump --what mel|encoder|logits`: writes one intermediate of the first
// 30 s window as .npy, exactly as transcribe() produces it, for debugging and parity
// checks against the Python reference (np.load the file and compare).
//   mel:     f32 [n_mels, 3000], the decoder's window (content frames, zero-padded)
//   encoder: [n_audio_ctx, d] audio features of that window (the model's dtype)
//   logits:  f32 [steps, n_vocab], the decoder's raw row at every greedy step, before the
//            logit filters (row 0 is the one at the last initial token)
#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "audio/decode.h"
#include "audio/mel.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "engine/error.h"
#include "engine/threadpool.h"
#include "io/npy.h"
#include "whisper/decoding.h"
#include "whisper/model.h"
#include "whisper/tokenizer.h"
#include "whisper/transcribe.h"

namespace parley::cli {
namespace {

namespace fs = std::filesystem;

struct DumpOptions {
  std::string model;     // empty: the default tiny.en
  std::string audio;     // any file load_audio reads
  std::string what;      // mel | encoder | logits
  std::string out;       // .npy path
  std::string language;  // empty: "en" on English-only models, else detected
  int steps = 0;         // logits: most sampled tokens; 0 = the decoder's default (224)
  int threads = 0;       // 0: all hardware threads
};

// Forwards to another LogitsSource and keeps the last row of every decode() result: the
// logits a greedy step samples from, before any filter touches them.
class RecordingLogitsSource : public LogitsSource {
 public:
  explicit RecordingLogitsSource(LogitsSource& inner) : inner_(inner) {}
  void encode(const Tensor& mel) override { inner_.encode(mel); }
  Tensor decode(std::span<const int32_t> tokens) override {
    Tensor logits = inner_.decode(tokens);
    const int64_t n_vocab = logits.dim(1);
    const float* last = logits.data<float>() + (logits.dim(0) - 1) * n_vocab;
    rows_.emplace_back(last, last + n_vocab);
    return logits;
  }
  void reset() override { inner_.reset(); }
  int n_text_ctx() const override { return inner_.n_text_ctx(); }
  int n_mels() const override { return inner_.n_mels(); }

  // f32 [rows, n_vocab] of every recorded row, in order.
  Tensor rows() const {
    check(!rows_.empty(), ErrorKind::internal, "[whisper dump] the decoder produced no logits");
    const int64_t n_vocab = int64_t(rows_.front().size());
    Tensor out = Tensor::empty({int64_t(rows_.size()), n_vocab}, DType::f32);
    float* dst = out.data<float>();
    for (const auto& r : rows_) dst = std::copy(r.begin(), r.end(), dst);
    return out;
  }

 private:
  LogitsSource& inner_;
  std::vector<std::vector<float>> rows_;
};

// The first window as transcribe_mel() cuts it: mel[:, 0 : min(3000, content)] padded
// with zeros to 3000 frames in the log-mel domain (transcribe.cpp's file-local
// mel_window(mel, 0, frames), rebuilt from the public pad_or_trim_frames).
Tensor first_window(const Tensor& padded_mel) {
  const int64_t content = padded_mel.dim(1) - kChunkFrames;
  return pad_or_trim_frames(pad_or_trim_frames(padded_mel, std::min(content, kChunkFrames)),
                            kChunkFrames);
}

void run_dump(const DumpOptions& opt) {
  if (opt.threads > 0) set_cpu_threads(opt.threads);
  check_arg(opt.steps >= 0, "[whisper dump] --steps must be >= 0");
  const auto model = WhisperModel::load(opt.model.empty() ? default_model_dir() : opt.model);
  const std::vector<float> samples = load_audio(opt.audio);
  // transcribe(): log-mel of the audio plus 30 s of zeros, f32 [n_mels, content + 3000].
  const Tensor padded_mel = log_mel_spectrogram(samples, model->config().n_mels, kChunkSamples);
  const Tensor window = first_window(padded_mel);
  if (opt.what == "mel") {
    io::write_npy(opt.out, window);
    return;
  }

  WhisperSession session(model);
  SessionLogitsSource source(session);
  if (opt.what == "encoder") {
    source.encode(window);
    io::write_npy(opt.out, session.audio_features());
    return;
  }

  const WhisperTokenizer tokenizer = load_tokenizer(*model);
  // The first window's DecodingOptions as transcribe_mel() fills them from the default
  // TranscribeOptions (no prompt yet).
  DecodingOptions d = window_decoding_options(TranscribeOptions{}, tokenizer, "");
  if (opt.steps > 0) d.sample_len = opt.steps;
  if (!opt.language.empty()) {
    d.language = opt.language;
  } else if (!tokenizer.multilingual()) {
    d.language = "en";
  } else {
    // transcribe_mel() detects from the first 30 s of the padded mel, not the window; done
    // before recording so the detection step's row is not among the dumped ones.
    source.encode(pad_or_trim_frames(padded_mel, kChunkFrames));
    d.language = detect_language(source, tokenizer).code;
  }
  RecordingLogitsSource recorder(source);
  decode_window(recorder, tokenizer, window, d);
  io::write_npy(opt.out, recorder.rows());
}

}  // namespace

void add_whisper_command(CLI::App& app) {
  auto* whisper = app.add_subcommand("whisper", "Whisper tools for debugging and parity checks");
  whisper->require_subcommand(1);
  auto opt = std::make_shared<DumpOptions>();
  auto* dump = whisper->add_subcommand(
      "dump", "Write the first window's mel, encoder output or per-step logits as .npy");
  dump->add_option("-m,--model", opt->model, "Model folder (default: the built-in tiny.en)");
  dump->add_option("--audio", opt->audio, "Audio file")->required();
  dump->add_option("--what", opt->what, "mel, encoder or logits")
      ->required()
      ->check(CLI::IsMember({"mel", "encoder", "logits"}));
  dump->add_option("--out", opt->out, "Output .npy path")->required();
  dump->add_option("-l,--language", opt->language, "Language code (default: en or detect)");
  dump->add_option("--steps", opt->steps, "logits: most sampled tokens (default: 224)");
  dump->add_option("--threads", opt->threads, "CPU threads (default: all)");
  dump->callback([opt] { run_dump(*opt); });
}

}  // namespace parley::cli
