// `parley transcribe FILE... [--model DIR]`: audio files in, transcripts out. Segments are
// printed as their window finishes; with -o each file's transcript is written to
// DIR/<name>.<format>, otherwise a -f document goes to stdout after the segments.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "audio/decode.h"
#include "cli/commands.h"
#include "cli/decoding_flags.h"
#include "cli/default_model.h"
#include "cli/load_options.h"
#include "cli/vad_gate.h"
#include "engine/error.h"
#include "engine/threadpool.h"
#include "whisper/alignment_heads.h"
#include "whisper/batch_session.h"
#include "whisper/formats.h"
#include "whisper/model.h"
#include "whisper/tokenizer.h"
#include "whisper/transcribe.h"
#include "whisper/transcribe_batch.h"

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
  int batch_size = 16;  // files decoded together (transcribe_batch); 1: one at a time
  VadGateOptions vad;
  bool run_stats = false;  // print Whisper's encoder/decoder run counts to stderr
  DeviceFlags device;
  int audio_ctx = 0;  // LoadOptions::audio_ctx
  bool word_timestamps = false;
  std::optional<std::string> prepend_punctuations;
  std::optional<std::string> append_punctuations;
  std::optional<float> hallucination_silence_threshold;
  std::string alignment_heads;  // an official model name; empty: the model's own
  bool highlight_words = false;
  int max_line_width = 0;  // 0: unset
  int max_line_count = 0;
  int max_words_per_line = 0;
  DecodingFlags decoding;
};

void print_segment(std::ostream& os, const Segment& s) {
  os << "[" << format_timestamp(s.start, false, '.') << " --> "
     << format_timestamp(s.end, false, '.') << "] " << s.text << std::endl;
}

void run_transcribe(const TranscribeCliOptions& opt) {
  if (opt.threads > 0) set_cpu_threads(opt.threads);
  const bool word_options = opt.prepend_punctuations || opt.append_punctuations ||
                            opt.hallucination_silence_threshold || !opt.alignment_heads.empty() ||
                            opt.highlight_words || opt.max_line_width > 0 ||
                            opt.max_line_count > 0 || opt.max_words_per_line > 0;
  check_arg(opt.word_timestamps || !word_options,
            "[transcribe] --prepend-punctuations, --append-punctuations, --alignment-heads, "
            "--hallucination-silence-threshold, --highlight-words, --max-line-width, "
            "--max-line-count and --max-words-per-line need --word-timestamps");
  const std::string dir = opt.model.empty() ? default_model_dir() : opt.model;
  // Whisper loads at the first file that needs it: with --vad, audio without speech
  // never loads or runs it.
  std::shared_ptr<const WhisperModel> model;
  std::optional<WhisperTokenizer> tokenizer;
  std::unique_ptr<WhisperSession> session;
  const std::unique_ptr<VadGate> gate =
      (opt.vad.enabled || opt.vad.filter) ? std::make_unique<VadGate>(opt.vad) : nullptr;

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
  // --vad-filter: times in the collected speech -> times in the file.
  auto restore = [](Segment s, const std::optional<vad::SpeechTimeMap>& time_map) {
    if (time_map) {
      s.start = time_map->original_time(s.start);
      s.end = time_map->original_time(s.end, true);
      for (Word& w : s.words) {
        w.start = time_map->original_time(w.start);
        w.end = time_map->original_time(w.end, true);
      }
    }
    return s;
  };
  t.word_timestamps = opt.word_timestamps;
  if (opt.prepend_punctuations) t.word_options.prepend_punctuations = *opt.prepend_punctuations;
  if (opt.append_punctuations) t.word_options.append_punctuations = *opt.append_punctuations;
  t.hallucination_silence_threshold = opt.hallucination_silence_threshold;
  auto ensure_model = [&] {
    if (model) return;
    model = WhisperModel::load(dir, load_options(opt.device, opt.audio_ctx));
    tokenizer.emplace(load_tokenizer(*model));
    session = std::make_unique<WhisperSession>(model);
    if (!opt.alignment_heads.empty()) {
      t.word_options.alignment_heads =
          resolve_alignment_heads(model->config(), opt.alignment_heads);
    }
  };

  // One input file: its audio, what the VAD gate made of it, and then its transcript.
  struct Input {
    std::string file;
    double duration = 0;
    bool no_speech = false;  // the gate found none: not transcribed
    std::optional<vad::SpeechTimeMap> time_map;
    std::vector<float> samples;  // what Whisper transcribes (the collected speech with a map)
  };
  auto prepare = [&](const std::string& file) {
    Input in;
    in.file = file;
    in.samples = load_audio(file);
    in.duration = double(in.samples.size()) / 16000.0;
    const auto speech = gate ? gate->speech(in.samples) : std::vector<vad::SpeechSegment>{};
    if (gate && speech.empty()) {
      in.no_speech = true;
      in.samples.clear();
    } else if (gate && gate->filter()) {
      in.time_map.emplace(speech, 16000);
      in.samples = vad::collect_speech(in.samples, speech);
    }
    return in;
  };
  auto write_output = [&](const Input& in, const TranscribeResult& result) {
    TranscriptInfo info;
    info.task = opt.task;
    info.duration = in.duration;
    info.words = opt.word_timestamps;
    info.highlight_words = opt.highlight_words;
    info.max_line_width = opt.max_line_width;
    info.max_line_count = opt.max_line_count;
    info.max_words_per_line = opt.max_words_per_line;
    const std::string text = format_transcript(result, format, info);
    if (to_files) {
      const fs::path out = fs::path(opt.output_dir) /
                           (fs::path(in.file).stem().string() + "." + output_extension(format));
      std::ofstream f(out, std::ios::binary);
      f << text;
      check(bool(f), ErrorKind::not_found, "[transcribe] cannot write " + out.string());
    } else if (document) {
      std::cout << text << std::flush;
    }
  };
  const bool several = opt.files.size() > 1;

  // Batched (transcribe_batch.h): several files, --batch-size > 1 and options it supports. The
  // files go in groups of 4 batches (their audio in memory at once); each file's segments,
  // document and output file come after its group, the same text the per-file path prints.
  bool batched = several && opt.batch_size > 1;
  std::unique_ptr<WhisperBatchSession> batch;
  size_t next_file = 0;
  while (batched && next_file < opt.files.size()) {
    const size_t group_end = std::min(opt.files.size(), next_file + size_t(opt.batch_size) * 4);
    std::vector<Input> inputs;
    for (size_t i = next_file; i < group_end; ++i) inputs.push_back(prepare(opt.files[i]));
    std::vector<std::vector<float>> audio;
    for (Input& in : inputs) {
      if (!in.no_speech) audio.push_back(std::move(in.samples));
    }
    std::vector<TranscribeResult> results;
    if (!audio.empty()) {
      ensure_model();
      if (batch_unsupported(t, *tokenizer)) {
        batched = false;  // the per-file path below takes these files again
        break;
      }
      if (!batch) batch = std::make_unique<WhisperBatchSession>(model, opt.batch_size);
      results = transcribe_batch(*batch, *session, *tokenizer, audio, t);
    }
    size_t k = 0;
    for (const Input& in : inputs) {
      progress << "== " << in.file << std::endl;
      TranscribeResult result;
      if (in.no_speech) {
        std::cerr << "[vad] " << in.file << ": no speech" << std::endl;
      } else {
        result = std::move(results[k++]);
        for (auto& s : result.segments) {
          s = restore(s, in.time_map);
          print_segment(progress, s);
        }
      }
      write_output(in, result);
    }
    next_file = group_end;
  }

  // One file at a time; segments are printed as their window finishes.
  std::optional<vad::SpeechTimeMap> time_map;
  t.on_segment = [&](const Segment& s) { print_segment(progress, restore(s, time_map)); };
  for (size_t i = next_file; i < opt.files.size(); ++i) {
    const Input in = prepare(opt.files[i]);
    if (several) progress << "== " << in.file << std::endl;
    TranscribeResult result;
    if (in.no_speech) {
      std::cerr << "[vad] " << in.file << ": no speech" << std::endl;
    } else {
      ensure_model();
      time_map = in.time_map;
      result = transcribe(*session, *tokenizer, in.samples, t);
      for (auto& s : result.segments) s = restore(s, time_map);
    }
    write_output(in, result);
  }
  if (opt.run_stats) {
    const WhisperRunCounters runs = whisper_run_counters();
    std::cerr << "whisper runs: encoder " << runs.encoder_runs << ", decoder " << runs.decoder_runs
              << std::endl;
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
  cmd->add_option("--batch-size", opt->batch_size,
                  "With several files: windows of this many files per encoder call and decoder "
                  "step (1: one file at a time; beam search, best_of and word timestamps "
                  "always run one file at a time)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_vad_gate_options(cmd, opt->vad);
  cmd->add_flag("--run-stats", opt->run_stats,
                "Print how many times Whisper's encoder and decoder ran (stderr)");
  add_device_flags(cmd, opt->device);
  add_whisper_load_flags(cmd, opt->device, opt->audio_ctx);
  cmd->add_flag("--word-timestamps", opt->word_timestamps,
                "Word-level timestamps (cross-attention + DTW); verbose_json gets \"words\"");
  cmd->add_option(
      "--prepend-punctuations", opt->prepend_punctuations,
      "With --word-timestamps: merge these into the next word (default \"'\u201c\u00bf([{-)");
  cmd->add_option("--append-punctuations", opt->append_punctuations,
                  "With --word-timestamps: merge these into the previous word (default "
                  "\"'.\u3002,\uff0c!\uff01?\uff1f:\uff1a\u201d)]}\u3001)");
  cmd->add_option("--alignment-heads", opt->alignment_heads,
                  "With --word-timestamps: use this official model's alignment heads (tiny.en, "
                  "large-v3-turbo, ...) when the model files name none (default: the files', "
                  "else every head of the later half of the decoder layers)");
  cmd->add_flag("--highlight-words", opt->highlight_words,
                "With --word-timestamps: srt/vtt underline each word as it is spoken");
  cmd->add_option("--max-line-width", opt->max_line_width,
                  "With --word-timestamps: srt/vtt characters per line before a break")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-line-count", opt->max_line_count,
                  "With --word-timestamps: srt/vtt lines per subtitle")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-words-per-line", opt->max_words_per_line,
                  "With --word-timestamps: srt/vtt words per line (no effect with "
                  "--max-line-width)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--hallucination-silence-threshold", opt->hallucination_silence_threshold,
                  "With --word-timestamps: skip silences longer than this many seconds around "
                  "a possible hallucination");
  add_decoding_flags(cmd, opt->decoding);
  cmd->callback([opt] { run_transcribe(*opt); });
}

}  // namespace parley::cli
