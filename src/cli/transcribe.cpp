// `parley transcribe FILE... [--model DIR]`: audio files in, transcripts out. Segments are
// printed as their window finishes; with -o each file's transcript is written to
// DIR/<name>.<format>, otherwise a -f document goes to stdout after the segments.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "audio/decode.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "engine/threadpool.h"
#include "whisper/formats.h"
#include "whisper/model.h"
#include "whisper/tokenizer.h"
#include "whisper/transcribe.h"

namespace parley::cli {
namespace {

namespace fs = std::filesystem;

struct TranscribeCliOptions {
  std::vector<std::string> files;
  std::string model;
  std::string language;  // empty: detect (multilingual) or "en"
  std::string task = "transcribe";
  std::string format;  // empty: segments only (txt when writing files)
  std::string output_dir;
  bool no_timestamps = false;
  int threads = 0;
  // Decoding (openai-whisper's CLI names with dashes; "none" turns a threshold off).
  float temperature = 0.0f;
  std::string temperature_increment = "0.2";
  int best_of = 0;
  int beam_size = 0;
  std::string patience;
  std::string length_penalty;
  uint64_t seed = 0;
  std::string compression_ratio_threshold = "2.4";
  std::string logprob_threshold = "-1.0";
  std::string no_speech_threshold = "0.6";
  bool condition_on_previous_text = true;
  std::string initial_prompt;
  bool carry_initial_prompt = false;
  std::string prefix;
  std::string hotwords;
  std::string suppress_tokens = "-1";
  bool suppress_blank = true;
  float max_initial_timestamp = 1.0f;
  int sample_len = 0;
  std::string clip_timestamps = "0";
};

// A number, or nullopt for "none" / "" (the reference CLI's optional_float).
std::optional<float> optional_float(const std::string& name, const std::string& text) {
  if (text.empty() || text == "none" || text == "None") return std::nullopt;
  size_t used = 0;
  float v = 0;
  try {
    v = std::stof(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  check_arg(used == text.size() && std::isfinite(v),
            "[transcribe] --" + name + ": expected a number or 'none', got '" + text + "'");
  return v;
}

// --temperature T --temperature-increment-on-fallback INC: T, T + INC, ... up to 1.0
// (np.arange(T, 1.0 + 1e-6, INC) in the reference), or just T when INC is none.
std::vector<float> temperature_ladder(float start, const std::string& increment) {
  const std::optional<float> inc = optional_float("temperature-increment-on-fallback", increment);
  check_arg(start >= 0.0f, "[transcribe] --temperature must be >= 0");
  if (!inc) return {start};
  check_arg(*inc > 0.0f, "[transcribe] --temperature-increment-on-fallback must be > 0 or none");
  std::vector<float> out;
  const double stop = 1.0 + 1e-6;
  const auto n = int64_t(std::ceil((stop - double(start)) / double(*inc)));
  for (int64_t i = 0; i < n; ++i) out.push_back(float(double(start) + double(i) * double(*inc)));
  if (out.empty()) out.push_back(start);  // a start above 1.0: that one temperature
  return out;
}

void print_segment(std::ostream& os, const Segment& s) {
  os << "[" << format_timestamp(s.start, false, '.') << " --> "
     << format_timestamp(s.end, false, '.') << "] " << s.text << std::endl;
}

void run_transcribe(const TranscribeCliOptions& opt) {
  if (opt.threads > 0) set_cpu_threads(opt.threads);
  const std::string dir = opt.model.empty() ? default_model_dir() : opt.model;
  const auto model = WhisperModel::load(dir);
  const WhisperTokenizer tokenizer = load_tokenizer(*model);
  WhisperSession session(model);

  const bool to_files = !opt.output_dir.empty();
  const bool document = !opt.format.empty();
  const OutputFormat format = parse_output_format(document ? opt.format : "txt");
  if (to_files) fs::create_directories(opt.output_dir);
  // Progress goes to stderr when stdout carries a document.
  std::ostream& progress = (document && !to_files) ? std::cerr : std::cout;

  TranscribeOptions t;
  if (!opt.language.empty()) t.language = opt.language;
  t.task = opt.task;
  t.without_timestamps = opt.no_timestamps;
  t.temperatures = temperature_ladder(opt.temperature, opt.temperature_increment);
  t.best_of = opt.best_of;
  t.beam_size = opt.beam_size;
  t.patience = optional_float("patience", opt.patience);
  t.length_penalty = optional_float("length-penalty", opt.length_penalty);
  t.seed = opt.seed;
  t.compression_ratio_threshold =
      optional_float("compression-ratio-threshold", opt.compression_ratio_threshold);
  t.logprob_threshold = optional_float("logprob-threshold", opt.logprob_threshold);
  t.no_speech_threshold = optional_float("no-speech-threshold", opt.no_speech_threshold);
  t.condition_on_previous_text = opt.condition_on_previous_text;
  if (!opt.initial_prompt.empty()) t.initial_prompt = opt.initial_prompt;
  t.carry_initial_prompt = opt.carry_initial_prompt;
  if (!opt.prefix.empty()) t.prefix = opt.prefix;
  if (!opt.hotwords.empty()) t.hotwords = opt.hotwords;
  t.suppress_tokens = opt.suppress_tokens;
  t.suppress_blank = opt.suppress_blank;
  t.max_initial_timestamp = opt.max_initial_timestamp;
  t.sample_len = opt.sample_len;
  t.clip_timestamps = parse_clip_timestamps(opt.clip_timestamps);
  t.on_segment = [&](const Segment& s) { print_segment(progress, s); };

  for (const auto& file : opt.files) {
    const std::vector<float> samples = load_audio(file);
    if (opt.files.size() > 1) progress << "== " << file << std::endl;
    const TranscribeResult result = transcribe(session, tokenizer, samples, t);
    const TranscriptInfo info{opt.task, double(samples.size()) / 16000.0};
    const std::string text = format_transcript(result, format, info);
    if (to_files) {
      const fs::path out = fs::path(opt.output_dir) /
                           (fs::path(file).stem().string() + "." + output_extension(format));
      std::ofstream f(out, std::ios::binary);
      f << text;
      check(bool(f), ErrorKind::not_found, "[transcribe] cannot write " + out.string());
    } else if (document) {
      std::cout << text << std::flush;
    }
  }
}

}  // namespace

void add_transcribe_command(CLI::App& app) {
  auto opt = std::make_shared<TranscribeCliOptions>();
  auto* cmd =
      app.add_subcommand("transcribe", "Transcribe (or translate) audio files with Whisper");
  cmd->add_option("files", opt->files, "Audio files (any container FFmpeg reads)")->required();
  cmd->add_option("-m,--model", opt->model, "Model folder (default: the built-in tiny.en)");
  cmd->add_option("-l,--language", opt->language, "Language code (default: detect)");
  cmd->add_option("--task", opt->task, "transcribe or translate (into English)")
      ->check(CLI::IsMember({"transcribe", "translate"}))
      ->capture_default_str();
  cmd->add_option("-f,--format", opt->format, "txt, json, verbose_json, srt or vtt")
      ->check(CLI::IsMember({"txt", "text", "json", "verbose_json", "srt", "vtt"}));
  cmd->add_option("-o,--output-dir", opt->output_dir, "Write <file>.<format> here");
  cmd->add_flag("--no-timestamps", opt->no_timestamps, "Decode without timestamps");
  cmd->add_option("--threads", opt->threads, "CPU threads (default: all)");
  // Decoding options; docs/DECODING.md says what each does and how it matches openai-whisper.
  cmd->add_option("--temperature", opt->temperature, "First sampling temperature (0: greedy)")
      ->capture_default_str();
  cmd->add_option("--temperature-increment-on-fallback", opt->temperature_increment,
                  "Temperature step of the fallback, up to 1.0 ('none': no fallback)")
      ->capture_default_str();
  cmd->add_option("--best-of", opt->best_of,
                  "Candidates sampled at a temperature > 0 (0: one, the API default)");
  cmd->add_option("--beam-size", opt->beam_size,
                  "Beams of a beam search at temperature 0 (0: greedy)");
  cmd->add_option("--patience", opt->patience, "Beam search patience (default 1.0)");
  cmd->add_option("--length-penalty", opt->length_penalty,
                  "Ranking length penalty alpha in [0, 1] (default: divide by the length)");
  cmd->add_option("--seed", opt->seed, "Seed of the sampling at temperatures > 0")
      ->capture_default_str();
  cmd->add_option("--compression-ratio-threshold", opt->compression_ratio_threshold,
                  "Retry above this gzip compression ratio ('none': never)")
      ->capture_default_str();
  cmd->add_option("--logprob-threshold", opt->logprob_threshold,
                  "Retry below this average log-probability ('none': never)")
      ->capture_default_str();
  cmd->add_option("--no-speech-threshold", opt->no_speech_threshold,
                  "Skip a window as silence above this no-speech probability ('none': never)")
      ->capture_default_str();
  cmd->add_option("--condition-on-previous-text", opt->condition_on_previous_text,
                  "Give the previous text as the prompt (true/false)")
      ->capture_default_str();
  cmd->add_option("--initial-prompt", opt->initial_prompt, "Text before the first window's prompt");
  cmd->add_option("--carry-initial-prompt", opt->carry_initial_prompt,
                  "Put the initial prompt before every window's prompt (true/false)")
      ->capture_default_str();
  cmd->add_option("--prefix", opt->prefix, "Text every window's transcript starts with");
  cmd->add_option("--hotwords", opt->hotwords,
                  "Vocabulary hints given to every window, e.g. \"ComfyUI, Kubernetes\"");
  cmd->add_option("--suppress-tokens", opt->suppress_tokens,
                  "Comma-separated token ids never sampled; -1: the non-speech symbols")
      ->capture_default_str();
  cmd->add_option("--suppress-blank", opt->suppress_blank,
                  "Suppress a blank or <|endoftext|> first token (true/false)")
      ->capture_default_str();
  cmd->add_option("--max-initial-timestamp", opt->max_initial_timestamp,
                  "Latest first timestamp in seconds (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--sample-len", opt->sample_len, "Most tokens per window (0: 224)");
  cmd->add_option("--clip-timestamps", opt->clip_timestamps,
                  "start,end,start,end,... seconds to transcribe (the last end: the audio's)")
      ->capture_default_str();
  cmd->callback([opt] { run_transcribe(*opt); });
}

}  // namespace parley::cli
