// `parley vad FILE [--json] [--probs]`: Silero VAD over an audio file: the speech segments
// (as silero-vad's get_speech_timestamps cuts them), optionally every chunk's speech
// probability, and how long it took (the timing block is the VAD benchmark's output:
// median wall and thread-CPU milliseconds of --runs passes, and real-time factors).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "audio/decode.h"
#include "cli/commands.h"
#include "cli/vad_gate.h"
#include "engine/error.h"
#include "vad/segments.h"
#include "vad/silero.h"

namespace parley::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct VadCliOptions {
  std::string file;
  std::string model;  // empty: default_vad_model_path()
  int sample_rate = 16000;
  bool json = false;
  bool probs = false;
  bool events = false;  // also run the streaming iterator and report its events
  int runs = 1;         // timed repetitions of the network pass (median reported)
  vad::SpeechOptions speech;
  double neg_threshold = -1.0;  // < 0: the reference's default
};

// CPU time of this thread: on a shared machine the wall clock also counts other processes.
double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string seconds(int64_t samples, int rate) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", double(samples) / rate);
  return buf;
}

void run_vad(VadCliOptions opt) {
  if (opt.neg_threshold >= 0.0) opt.speech.neg_threshold = opt.neg_threshold;
  const std::string path = opt.model.empty() ? default_vad_model_path() : opt.model;
  auto t0 = Clock::now();
  const auto model = vad::SileroModel::load(path);
  const double load_ms = ms_since(t0);
  check_arg(model->supports(opt.sample_rate),
            "[vad] " + path + " has no " + std::to_string(opt.sample_rate) + " Hz network");

  t0 = Clock::now();
  const std::vector<float> samples = load_audio(opt.file, opt.sample_rate);
  const double decode_ms = ms_since(t0);

  std::vector<float> probs;
  std::vector<double> times, cpu_times;
  for (int r = 0; r < std::max(1, opt.runs); ++r) {
    t0 = Clock::now();
    const double c0 = thread_cpu_ms();
    probs = model->probabilities(samples, opt.sample_rate);
    cpu_times.push_back(thread_cpu_ms() - c0);
    times.push_back(ms_since(t0));
  }
  std::sort(times.begin(), times.end());
  std::sort(cpu_times.begin(), cpu_times.end());
  const double vad_ms = times[times.size() / 2];
  const double vad_cpu_ms = cpu_times[cpu_times.size() / 2];
  const auto segments =
      vad::speech_segments_from_probs(probs, int64_t(samples.size()), opt.sample_rate, opt.speech);
  const double duration_s = double(samples.size()) / opt.sample_rate;

  // The streaming iterator, fed in 1000-sample blocks (not a multiple of the chunk, so
  // its buffering is exercised); a fresh model state, so it sees the same probabilities.
  nlohmann::json events = nlohmann::json::array();
  if (opt.events) {
    vad::VadIterator it(model, opt.sample_rate, opt.speech);
    for (size_t i = 0; i < samples.size(); i += 1000) {
      const size_t n = std::min<size_t>(1000, samples.size() - i);
      for (const auto& e : it.push(std::span<const float>(samples.data() + i, n))) {
        events.push_back({{"kind", e.kind == vad::VadEvent::Kind::start ? "start" : "end"},
                          {"sample", e.sample}});
      }
    }
  }

  if (opt.json) {
    nlohmann::json segs = nlohmann::json::array();
    for (const auto& s : segments) {
      segs.push_back({{"start", s.start},
                      {"end", s.end},
                      {"start_s", double(s.start) / opt.sample_rate},
                      {"end_s", double(s.end) / opt.sample_rate}});
    }
    nlohmann::json j = {{"file", opt.file},
                        {"model", path},
                        {"model_format", model->format()},
                        {"sample_rate", opt.sample_rate},
                        {"samples", samples.size()},
                        {"duration_s", duration_s},
                        {"chunk_samples", vad::chunk_samples(opt.sample_rate)},
                        {"segments", segs}};
    if (opt.probs) j["probs"] = probs;
    if (opt.events) j["events"] = events;
    j["timing"] = {
        {"load_ms", load_ms},
        {"decode_ms", decode_ms},
        {"vad_ms", vad_ms},
        {"vad_cpu_ms", vad_cpu_ms},
        {"runs", times.size()},
        {"threads", 1},
        {"real_time_factor", duration_s > 0 ? vad_ms / 1000.0 / duration_s : 0.0},
        {"real_time_factor_cpu", duration_s > 0 ? vad_cpu_ms / 1000.0 / duration_s : 0.0}};
    std::cout << j.dump() << std::endl;
    return;
  }
  for (const auto& s : segments) {
    std::cout << seconds(s.start, opt.sample_rate) << " " << seconds(s.end, opt.sample_rate)
              << "\n";
  }
  if (opt.probs) {
    const int n = vad::chunk_samples(opt.sample_rate);
    for (size_t k = 0; k < probs.size(); ++k) {
      std::cout << "chunk " << k << " " << seconds(int64_t(k) * n, opt.sample_rate) << " "
                << probs[k] << "\n";
    }
  }
  std::cout << std::flush;
}

}  // namespace

void add_vad_command(CLI::App& app) {
  auto opt = std::make_shared<VadCliOptions>();
  auto* cmd = app.add_subcommand(
      "vad", "Speech segments (Silero VAD) of an audio file, and per-chunk probabilities");
  cmd->add_option("file", opt->file, "Audio file (any container FFmpeg reads)")->required();
  cmd->add_option("-m,--model", opt->model,
                  "Silero VAD .onnx or .safetensors (default: " + default_vad_model_path() + ")");
  cmd->add_option("--sample-rate", opt->sample_rate, "Run the 16000 or 8000 Hz network")
      ->check(CLI::IsMember({16000, 8000}))
      ->capture_default_str();
  cmd->add_flag("--json", opt->json, "One JSON document: segments, timing (and probs)");
  cmd->add_flag("--probs", opt->probs, "Also print every chunk's speech probability");
  cmd->add_flag("--events", opt->events,
                "JSON: also the streaming iterator's speech start/end events");
  cmd->add_option("--runs", opt->runs, "Timed repetitions of the network (median)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--threshold", opt->speech.threshold, "Speech threshold")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--neg-threshold", opt->neg_threshold,
                  "End-of-speech threshold (default: max(threshold - 0.15, 0.01))")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-speech-ms", opt->speech.min_speech_duration_ms)->capture_default_str();
  cmd->add_option("--min-silence-ms", opt->speech.min_silence_duration_ms)->capture_default_str();
  cmd->add_option("--speech-pad-ms", opt->speech.speech_pad_ms)->capture_default_str();
  cmd->add_option("--max-speech-s", opt->speech.max_speech_duration_s,
                  "Split longer segments (default: never)");
  cmd->callback([opt] { run_vad(*opt); });
}

}  // namespace parley::cli
