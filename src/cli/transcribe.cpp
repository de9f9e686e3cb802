// `parley transcribe FILE... [--model DIR]`: audio files in, transcripts out. Segments are
// printed as their window finishes; with -o each file's transcript is written to
// DIR/<name>.<format>, otherwise a -f document goes to stdout after the segments.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "audio/decode.h"
#include "cli/commands.h"
#include "cli/decoding_flags.h"
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
  DecodingFlags decoding;
};

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
  apply_decoding_flags(opt.decoding, t);
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
  add_decoding_flags(cmd, opt->decoding);
  cmd->callback([opt] { run_transcribe(*opt); });
}

}  // namespace parley::cli
