// `parley bench batch`: throughput of batched transcription (WhisperBatchSession,
// transcribe_batch) in seconds of audio per second of wall time, as JSON lines in the style
// of `bench whisper`. Inputs: audio files, or --synthetic-files N --seconds S built from them
// (file i is the clips concatenated from clip i mod count on, repeated, cut at S seconds).
// Two modes:
//   --forced-tokens K: every 30 s window of every file decodes exactly K greedy tokens (argmax
//     of the raw logits on the device, no logit filters, no <|endoftext|> stop, no fallback;
//     the log-mel on the model's device too), so the work is
//     fixed whatever the weights say (random-weight synthetic models); windows of any files
//     share batches.
//   otherwise: transcribe_batch with the default temperature ladder (real models), each file's
//     windows in order.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "audio/decode.h"
#include "audio/mel.h"
#include "audio/mel_device.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/load_options.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/ops/spectral.h"
#include "engine/threadpool.h"
#include "whisper/batch_session.h"
#include "whisper/decoding.h"
#include "whisper/model.h"
#include "whisper/tokenizer.h"
#include "whisper/transcribe.h"
#include "whisper/transcribe_batch.h"

namespace parley::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchBatchOptions {
  std::string model;  // empty: the default tiny.en
  std::vector<std::string> files;
  int synthetic_files = 0;  // > 0: build this many inputs from `files`
  double seconds = 60.0;    // length of each synthetic input
  int batch_size = 16;
  int forced_tokens = 0;  // > 0: forced mode
  std::string language = "en";
  int runs = 1;
  int warmup = -1;  // untimed passes over one batch first; -1: 0 on the CPU, 1 on CUDA
  int threads = 0;
  DeviceFlags device;
};

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void sync(Device device) {
  if (device == Device::cuda) cuda::synchronize();
}

std::vector<std::vector<float>> build_inputs(const BenchBatchOptions& opt) {
  std::vector<std::vector<float>> clips;
  for (const auto& f : opt.files) clips.push_back(load_audio(f));
  if (opt.synthetic_files <= 0) return clips;
  const auto total = size_t(opt.seconds * kWhisperSampleRate);
  std::vector<std::vector<float>> out;
  for (int i = 0; i < opt.synthetic_files; ++i) {
    std::vector<float> s;
    s.reserve(total);
    for (size_t k = size_t(i); s.size() < total; ++k) {
      const auto& clip = clips[k % clips.size()];
      s.insert(s.end(), clip.begin(),
               clip.begin() + int64_t(std::min(clip.size(), total - s.size())));
    }
    out.push_back(std::move(s));
  }
  return out;
}

struct RunFigures {
  double wall_ms = 0, mel_ms = 0, encoder_ms = 0, decode_ms = 0, fallback_ms = 0;
  int64_t windows = 0, tokens = 0, steps = 0, fallbacks = 0;
};

// Forced mode over `inputs` (at most `max_windows` windows; < 0: all).
RunFigures forced_run(WhisperBatchSession& batch, const WhisperTokenizer& tokenizer,
                      const std::vector<std::vector<float>>& inputs, const BenchBatchOptions& opt,
                      int64_t max_windows) {
  const WhisperConfig& c = batch.model().config();
  const Device dev = batch.model().device();
  RunFigures fig;
  const auto t_all = Clock::now();
  // Every window of every file: the log-mel of each file (with 30 s of padding), then 30 s
  // windows at seeks 0, 3000, ... while there is content.
  auto t0 = Clock::now();
  std::vector<Tensor> windows;
  for (const auto& s : inputs) {
    // On the model's device (mel_device.h), as transcribe() computes it.
    const Tensor mel = log_mel_spectrogram_for(dev, s, c.n_mels, kChunkSamples);
    const int64_t content = mel.dim(1) - kChunkFrames;
    for (int64_t seek = 0; seek < content; seek += kChunkFrames) {
      if (max_windows >= 0 && int64_t(windows.size()) >= max_windows) break;
      Tensor w = Tensor::empty({c.n_mels, kChunkFrames}, DType::f32, dev);
      copy_columns(mel, seek, kChunkFrames, w);
      windows.push_back(std::move(w));
    }
  }
  fig.mel_ms = ms_since(t0);
  DecodingOptions d;
  d.language = opt.language;
  const std::vector<int32_t> initial = initial_tokens(tokenizer, d, opt.language, c.n_text_ctx);
  check_arg(int(initial.size()) + opt.forced_tokens <= c.n_text_ctx,
            "[bench] --forced-tokens " + std::to_string(opt.forced_tokens) +
                " does not fit the decoder's " + std::to_string(c.n_text_ctx) + " positions");
  std::vector<int32_t> slots, next;
  for (size_t b0 = 0; b0 < windows.size(); b0 += size_t(opt.batch_size)) {
    const int64_t n = std::min<int64_t>(opt.batch_size, int64_t(windows.size() - b0));
    Tensor mels = Tensor::empty({n, c.n_mels, kChunkFrames}, DType::f32, dev);
    slots.resize(size_t(n));
    next.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) {
      slots[size_t(i)] = int32_t(i);
      mels.slice0(i, i + 1).reshape({c.n_mels, kChunkFrames}).copy_from(windows[b0 + size_t(i)]);
    }
    sync(dev);
    t0 = Clock::now();
    batch.encode(slots, mels);
    sync(dev);
    fig.encoder_ms += ms_since(t0);
    t0 = Clock::now();
    // Every window starts from the same initial tokens: one prefill pass for the batch.
    std::vector<int32_t> all;
    for (int64_t i = 0; i < n; ++i) all.insert(all.end(), initial.begin(), initial.end());
    const int64_t t = int64_t(initial.size());
    const Tensor first = batch.prefill_batch(slots, all, std::vector<int64_t>{t - 1});
    const int64_t n_vocab = first.dim(1);
    for (int64_t i = 0; i < n; ++i) {
      const float* row = first.data<float>() + i * n_vocab;
      next[size_t(i)] = int32_t(std::max_element(row, row + n_vocab) - row);
    }
    for (int k = 1; k < opt.forced_tokens; ++k) {
      next = batch.step_argmax(slots, next);  // on the device: n ids cross to the host
      fig.steps += 1;
    }
    fig.decode_ms += ms_since(t0);
    fig.windows += n;
    fig.tokens += n * opt.forced_tokens;
  }
  sync(dev);
  fig.wall_ms = ms_since(t_all);
  return fig;
}

RunFigures transcribe_run(WhisperBatchSession& batch, WhisperSession& fallback,
                          const WhisperTokenizer& tokenizer,
                          const std::vector<std::vector<float>>& inputs,
                          const BenchBatchOptions& opt) {
  RunFigures fig;
  TranscribeOptions o;
  if (tokenizer.multilingual()) o.language = opt.language;
  const auto t_all = Clock::now();
  const auto t0 = Clock::now();
  std::vector<Tensor> mels;
  for (const auto& s : inputs)
    mels.push_back(log_mel_spectrogram(s, batch.model().config().n_mels, kChunkSamples));
  fig.mel_ms = ms_since(t0);
  BatchTranscribeStats st;
  transcribe_batch(batch, fallback, tokenizer, mels, o, &st);
  sync(batch.model().device());
  fig.wall_ms = ms_since(t_all);
  fig.encoder_ms = st.encode_ms;
  fig.decode_ms = st.decode_ms;
  fig.fallback_ms = st.fallback_ms;
  fig.windows = st.windows;
  fig.tokens = st.tokens;
  fig.steps = st.steps;
  fig.fallbacks = st.fallbacks;
  return fig;
}

void run_bench_batch(const BenchBatchOptions& opt) {
  check_arg(!opt.files.empty(), "[bench] batch: give at least one audio file");
  check_arg(opt.batch_size >= 1, "[bench] --batch-size must be >= 1");
  check_arg(opt.runs >= 1, "[bench] --runs must be >= 1");
  check_arg(opt.forced_tokens >= 0, "[bench] --forced-tokens must be >= 0");
  check_arg(opt.synthetic_files >= 0 && (opt.synthetic_files == 0 || opt.seconds > 0),
            "[bench] --synthetic-files needs --seconds > 0");
  if (opt.threads > 0) set_cpu_threads(opt.threads);
  const std::string dir = opt.model.empty() ? default_model_dir() : opt.model;
  const auto model = WhisperModel::load(dir, load_options(opt.device));
  const auto tokenizer = load_tokenizer(*model);
  const Device dev = model->device();
  const int warmup = opt.warmup >= 0 ? opt.warmup : (dev == Device::cuda ? 1 : 0);

  const std::vector<std::vector<float>> inputs = build_inputs(opt);
  double audio_seconds = 0;
  for (const auto& s : inputs) audio_seconds += double(s.size()) / kWhisperSampleRate;

  WhisperBatchSession batch(model, opt.batch_size);
  WhisperSession fallback(model);
  const bool forced = opt.forced_tokens > 0;
  // Warm-up: one batch of windows (pools, GEMM handles, kernels), untimed.
  for (int i = 0; i < warmup; ++i) {
    if (forced) {
      forced_run(batch, tokenizer, inputs, opt, opt.batch_size);
    } else {
      const std::vector<std::vector<float>> some(
          inputs.begin(),
          inputs.begin() + std::min<int64_t>(opt.batch_size, int64_t(inputs.size())));
      transcribe_run(batch, fallback, tokenizer, some, opt);
    }
  }
  const char* omp_wait_policy = std::getenv("OMP_WAIT_POLICY");
  for (int run = 0; run < opt.runs; ++run) {
    const RunFigures f = forced ? forced_run(batch, tokenizer, inputs, opt, -1)
                                : transcribe_run(batch, fallback, tokenizer, inputs, opt);
    nlohmann::json j = {
        {"bench", "whisper_batch"},
        {"mode", forced ? "forced" : "transcribe"},
        {"run", run},
        {"files", inputs.size()},
        {"audio_seconds", audio_seconds},
        {"wall_seconds", f.wall_ms / 1000.0},
        {"x_real_time", audio_seconds / (f.wall_ms / 1000.0)},
        {"windows", f.windows},
        {"tokens", f.tokens},
        {"steps", f.steps},
        {"mel_ms", f.mel_ms},
        {"encoder_ms", f.encoder_ms},
        {"decode_ms", f.decode_ms},
        {"batch_size", opt.batch_size},
        {"model", dir},
        {"device", std::string(device_name(dev))},
        {"dtype", std::string(dtype_name(model->dtype()))},
        {"device_label", dev == Device::cuda ? std::string(cuda::device_label()) : "cpu"},
        {"warmup", warmup},
        {"threads", cpu_threads().size()},
        {"omp_wait_policy", omp_wait_policy ? omp_wait_policy : ""}};
    if (forced) {
      j["forced_tokens"] = opt.forced_tokens;
    } else {
      j["fallbacks"] = f.fallbacks;
      j["fallback_ms"] = f.fallback_ms;
    }
    std::cout << j.dump() << std::endl;
  }
}

}  // namespace

void add_bench_batch_subcommand(CLI::App& bench) {
  auto opt = std::make_shared<BenchBatchOptions>();
  auto* cmd = bench.add_subcommand(
      "batch", "Batched transcription throughput (seconds of audio per second), JSON lines");
  cmd->add_option("files", opt->files,
                  "Audio files (the inputs, or the clips of --synthetic-files)")
      ->required();
  cmd->add_option("-m,--model", opt->model, "Model folder (default: the built-in tiny.en)");
  cmd->add_option("--synthetic-files", opt->synthetic_files,
                  "Build this many inputs of --seconds each from the given clips");
  cmd->add_option("--seconds", opt->seconds, "Length of each synthetic input")
      ->capture_default_str();
  cmd->add_option("--batch-size", opt->batch_size, "Windows per encoder call and decoder step")
      ->capture_default_str();
  cmd->add_option("--forced-tokens", opt->forced_tokens,
                  "Forced mode: exactly this many greedy tokens per window, no filters, no "
                  "end-of-text stop, no fallback (0: full transcription)")
      ->capture_default_str();
  cmd->add_option("-l,--language", opt->language, "Language of multilingual models")
      ->capture_default_str();
  cmd->add_option("--runs", opt->runs, "Timed runs (one JSON line each)")->capture_default_str();
  cmd->add_option("--warmup", opt->warmup,
                  "Untimed passes over one batch (default: 0 CPU, 1 CUDA)");
  cmd->add_option("--threads", opt->threads, "CPU threads (default: all)");
  add_device_flags(cmd, opt->device);
  cmd->callback([opt] { run_bench_batch(*opt); });
}

}  // namespace parley::cli
