// whisper.cpp timed on the same work as `parley bench whisper` (issue 7's side-by-side
// anchors), through whisper.h's public API only, as JSON lines on stdout:
//   whisper_mel            whisper_pcm_to_mel of the whole file (CPU), ms
//   whisper_encoder        whisper_encode of one 30 s window, ms per window
//   whisper_decode         single-token whisper_decode steps after the sot prefix, ms per token
//   whisper_e2e_forced     read the WAV + mel + encode + prefix + exactly --tokens greedy steps
//                          (argmax of the raw logits on the host, eot included), ms
//   whisper_full_greedy /  whisper_full() with eot banned by a logits filter and max_tokens =
//   whisper_full_beam5     --tokens, so its own pipeline (mel, sampling, beam bookkeeping) runs
//                          the prefix + exactly --tokens decoder steps; ms
//   whisper_full_beam5_step  (beam5(T) - beam5(T/3)) / (T - T/3): one beam step of 5 rows, ms
//   (and whisper_full_greedy_step the same at beam 1)
//   whisper_full_greedy_decode_call / whisper_full_beam5_decode_call  whisper.cpp's own
//                          decoder timings (whisper_get_timings) of one such run: ms per
//                          decoder call of 1 / 5 rows, sampling excluded
//   whisper_transcribe     --transcribe: whisper_full with its defaults (greedy, language en,
//                          timestamps, fallback), ms and text: the check that a real model's
//                          conversion reads right
// Medians of --runs timed calls after --warmup untimed ones. whisper.cpp's GPU calls return
// after their graph has run and the logits are on the host, so host clocks time them.
//
//   whispercpp_forced -m ggml-model.bin --audio jfk.wav [--runs 10] [--warmup 2]
//                     [--tokens 30] [--threads 16] [--no-gpu] [--label turbo-synth-f16]
//                     [--transcribe]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "whisper.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string model;
  std::string audio;
  std::string label;  // the "model" field of every row
  int runs = 10;
  int warmup = 2;
  int tokens = 30;  // forced decoder steps after the prefix
  int threads = int(std::min(16u, std::max(1u, std::thread::hardware_concurrency())));
  bool use_gpu = true;
  bool transcribe = false;  // also whisper_transcribe: a plain whisper_full (real models)
};

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median_ms(int runs, int warmup, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> v;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = Clock::now();
    fn();
    v.push_back(ms_since(t0));
  }
  std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
  return v[v.size() / 2];
}

uint32_t le32(const unsigned char* p) {
  return p[0] | p[1] << 8 | p[2] << 16 | uint32_t(p[3]) << 24;
}
uint16_t le16(const unsigned char* p) { return uint16_t(p[0] | p[1] << 8); }

// A 16 kHz mono 16-bit PCM WAV (jfk.wav) as float samples in [-1, 1).
std::vector<float> read_wav(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<unsigned char> b((std::istreambuf_iterator<char>(f)), {});
  if (b.size() < 12 || std::memcmp(b.data(), "RIFF", 4) || std::memcmp(b.data() + 8, "WAVE", 4))
    throw std::runtime_error("[wav] " + path + " is not a RIFF/WAVE file");
  bool fmt_ok = false;
  for (size_t at = 12; at + 8 <= b.size();) {
    const uint32_t size = le32(&b[at + 4]);
    const unsigned char* body = &b[at + 8];
    if (!std::memcmp(&b[at], "fmt ", 4)) {
      fmt_ok = le16(body) == 1 && le16(body + 2) == 1 && le32(body + 4) == WHISPER_SAMPLE_RATE &&
               le16(body + 14) == 16;
    } else if (!std::memcmp(&b[at], "data", 4)) {
      if (!fmt_ok) throw std::runtime_error("[wav] " + path + ": want PCM16 mono 16 kHz");
      const size_t n = std::min<size_t>(size, b.size() - at - 8) / 2;
      std::vector<float> s(n);
      for (size_t i = 0; i < n; ++i) s[i] = float(int16_t(le16(body + 2 * i))) / 32768.0f;
      return s;
    }
    at += 8 + size + (size & 1);
  }
  throw std::runtime_error("[wav] " + path + " has no data chunk");
}

void check(int rc, const char* what) {
  if (rc != 0)
    throw std::runtime_error(std::string("[whisper.cpp] ") + what + " returned " +
                             std::to_string(rc));
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += char(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o += char(c);
    }
  }
  return o;
}

class Bench {
 public:
  Bench(const Options& opt, whisper_context* ctx) : opt_(opt), ctx_(ctx) {
    n_vocab_ = whisper_n_vocab(ctx);
    prefix_ = {whisper_token_sot(ctx)};
    if (whisper_is_multilingual(ctx)) {
      prefix_.push_back(whisper_token_lang(ctx, whisper_lang_id("en")));
      prefix_.push_back(whisper_token_transcribe(ctx));
    }
  }

  // One row: {"system":"whisper.cpp","bench":...,"ms":...,<extra>,<common fields>}.
  void emit(const std::string& bench, double ms, std::string extra = "") const {
    if (extra.find("\"unit\"") == std::string::npos)
      extra = "\"unit\":\"run\"" + std::string(extra.empty() ? "" : ",") + extra;
    std::printf(
        "{\"system\":\"whisper.cpp\",\"bench\":\"%s\",\"ms\":%.4f%s%s,\"model\":\"%s\","
        "\"device\":\"%s\",\"dtype\":\"ggml-f16\",\"threads\":%d,\"runs\":%d,\"warmup\":%d,"
        "\"flash_attn\":true,\"version\":\"%s\"}\n",
        bench.c_str(), ms, extra.empty() ? "" : ",", extra.c_str(), json_escape(opt_.label).c_str(),
        opt_.use_gpu ? "cuda" : "cpu", opt_.threads, opt_.runs, opt_.warmup, whisper_version());
    std::fflush(stdout);
  }

  // The sot prefix, then `steps` single-token steps each feeding the argmax of the last
  // logits (eot included); returns the greedy tokens (steps + 1 of them).
  std::vector<whisper_token> forced_decode(int steps, std::vector<double>* step_ms = nullptr) {
    check(whisper_decode(ctx_, prefix_.data(), int(prefix_.size()), 0, opt_.threads),
          "whisper_decode(prefix)");
    std::vector<whisper_token> out{argmax()};
    for (int i = 0; i < steps; ++i) {
      const auto t0 = Clock::now();
      check(whisper_decode(ctx_, &out.back(), 1, int(prefix_.size()) + i, opt_.threads),
            "whisper_decode");
      out.push_back(argmax());
      if (step_ms) step_ms->push_back(ms_since(t0));
    }
    return out;
  }

  // The text tokens before the first eot (timestamps and other specials skipped).
  std::string text_until_eot(const std::vector<whisper_token>& tokens) const {
    std::string s;
    for (whisper_token t : tokens) {
      if (t == whisper_token_eot(ctx_)) break;
      if (t < whisper_token_eot(ctx_)) s += whisper_token_to_str(ctx_, t);  // text, not timestamps
    }
    return s;
  }

  // whisper_full on `samples` with eot banned and max_tokens = steps: its prefix call plus
  // exactly `steps` decoder steps (it stops once token index `steps` is sampled).
  std::string full(const std::vector<float>& samples, int beam, int steps) {
    whisper_full_params p = whisper_full_default_params(beam > 1 ? WHISPER_SAMPLING_BEAM_SEARCH
                                                                 : WHISPER_SAMPLING_GREEDY);
    p.n_threads = opt_.threads;
    p.language = "en";
    p.no_context = true;
    p.no_timestamps = true;  // one segment per window; timestamps cannot end it early
    p.single_segment = true;
    p.max_tokens = steps;
    p.temperature_inc = 0.0f;  // one temperature: no fallback re-decodes
    p.print_progress = p.print_realtime = p.print_timestamps = p.print_special = false;
    p.beam_search.beam_size = beam;
    p.greedy.best_of = 1;
    p.logits_filter_callback = [](whisper_context* ctx, whisper_state*, const whisper_token_data*,
                                  int, float* logits, void*) {
      // eot and every special / timestamp token after it: only text tokens can be sampled
      for (int t = whisper_token_eot(ctx); t < whisper_n_vocab(ctx); ++t) logits[t] = -INFINITY;
    };
    check(whisper_full(ctx_, p, samples.data(), int(samples.size())), "whisper_full");
    std::string s;
    for (int i = 0; i < whisper_full_n_segments(ctx_); ++i)
      s += whisper_full_get_segment_text(ctx_, i);
    return s;
  }

  void run() {
    const int r = opt_.runs, w = opt_.warmup, t = opt_.tokens;
    std::vector<float> samples = read_wav(opt_.audio);
    const double audio_s = double(samples.size()) / WHISPER_SAMPLE_RATE;

    const double mel_ms = median_ms(r, w, [&] {
      check(whisper_pcm_to_mel(ctx_, samples.data(), int(samples.size()), opt_.threads), "mel");
    });
    emit("whisper_mel", mel_ms);

    const double enc_ms =
        median_ms(r, w, [&] { check(whisper_encode(ctx_, 0, opt_.threads), "whisper_encode"); });
    emit("whisper_encoder", enc_ms, "\"unit\":\"window\"");

    std::vector<double> per_token;
    for (int i = 0; i < w + r; ++i) {
      std::vector<double> steps;
      forced_decode(t, &steps);
      if (i >= w) per_token.push_back(std::accumulate(steps.begin(), steps.end(), 0.0) / t);
    }
    std::nth_element(per_token.begin(), per_token.begin() + long(per_token.size() / 2),
                     per_token.end());
    emit("whisper_decode", per_token[per_token.size() / 2],
         "\"unit\":\"token\",\"beam\":1,\"decode_tokens\":" + std::to_string(t));

    std::vector<whisper_token> tokens;
    const double e2e_ms = median_ms(r, w, [&] {
      const std::vector<float> s = read_wav(opt_.audio);
      check(whisper_pcm_to_mel(ctx_, s.data(), int(s.size()), opt_.threads), "mel");
      check(whisper_encode(ctx_, 0, opt_.threads), "whisper_encode");
      tokens = forced_decode(t);
    });
    emit("whisper_e2e_forced", e2e_ms,
         "\"unit\":\"run\",\"beam\":1,\"decode_tokens\":" + std::to_string(t) +
             ",\"audio_seconds\":" + std::to_string(audio_s) + ",\"text\":\"" +
             json_escape(text_until_eot(tokens)) + "\"");

    for (int beam : {1, 5}) {
      std::string text;
      const double full_ms = median_ms(r, w, [&] {
        const std::vector<float> s = read_wav(opt_.audio);
        text = full(s, beam, t);
      });
      const std::string common = "\"unit\":\"run\",\"beam\":" + std::to_string(beam) +
                                 ",\"decode_tokens\":" + std::to_string(t);
      emit(beam == 1 ? "whisper_full_greedy" : "whisper_full_beam5", full_ms,
           common + ",\"text\":\"" + json_escape(text) + "\"");
      // The same call with fewer steps: the difference is the cost of one more step.
      const int t_short = t / 3;
      const double short_ms = median_ms(r, w, [&] {
        const std::vector<float> s = read_wav(opt_.audio);
        full(s, beam, t_short);
      });
      emit(beam == 1 ? "whisper_full_greedy_step" : "whisper_full_beam5_step",
           (full_ms - short_ms) / (t - t_short),
           "\"unit\":\"step\",\"beam\":" + std::to_string(beam) + ",\"from_tokens\":[" +
               std::to_string(t_short) + "," + std::to_string(t) + "]");
    }

    // whisper.cpp's own decoder timings of one more call of each: per single-token call
    // (greedy) and per call of 5 rows (beam 5); the prefix call (P = 2 or 4 tokens, counted
    // with the 5-row calls by whisper.cpp) is taken as one more such call.
    for (int beam : {1, 5}) {
      const std::vector<float> s = read_wav(opt_.audio);
      whisper_reset_timings(ctx_);
      full(s, beam, t);
      const std::unique_ptr<whisper_timings> tm(whisper_get_timings(ctx_));
      const int n_prefix = int(prefix_.size()) + 1;  // + <|notimestamps|>
      const double ms =
          beam == 1 ? tm->decode_ms : tm->batchd_ms * double(n_prefix + beam * t) / double(t + 1);
      emit(beam == 1 ? "whisper_full_greedy_decode_call" : "whisper_full_beam5_decode_call", ms,
           "\"unit\":\"step\",\"beam\":" + std::to_string(beam) +
               ",\"source\":\"whisper_get_timings, one run\",\"sample_ms_per_token\":" +
               std::to_string(tm->sample_ms));
    }

    if (opt_.transcribe) {
      std::string text;
      const double ms = median_ms(r, w, [&] {
        const std::vector<float> s = read_wav(opt_.audio);
        whisper_full_params p = whisper_full_default_params(WHISPER_SAMPLING_GREEDY);
        p.n_threads = opt_.threads;
        p.language = "en";
        p.print_progress = p.print_realtime = p.print_timestamps = false;
        check(whisper_full(ctx_, p, s.data(), int(s.size())), "whisper_full");
        text.clear();
        for (int i = 0; i < whisper_full_n_segments(ctx_); ++i)
          text += whisper_full_get_segment_text(ctx_, i);
      });
      emit("whisper_transcribe", ms,
           "\"unit\":\"run\",\"audio_seconds\":" + std::to_string(audio_s) + ",\"text\":\"" +
               json_escape(text) + "\"");
    }
  }

 private:
  whisper_token argmax() const {
    const float* l = whisper_get_logits(ctx_);
    return whisper_token(std::max_element(l, l + n_vocab_) - l);
  }

  const Options& opt_;
  whisper_context* ctx_;
  int n_vocab_ = 0;
  std::vector<whisper_token> prefix_;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("[args] " + a + " needs a value");
      return argv[++i];
    };
    if (a == "-m" || a == "--model")
      o.model = value();
    else if (a == "--audio")
      o.audio = value();
    else if (a == "--label")
      o.label = value();
    else if (a == "--runs")
      o.runs = std::stoi(value());
    else if (a == "--warmup")
      o.warmup = std::stoi(value());
    else if (a == "--tokens")
      o.tokens = std::stoi(value());
    else if (a == "-t" || a == "--threads")
      o.threads = std::stoi(value());
    else if (a == "--no-gpu")
      o.use_gpu = false;
    else if (a == "--transcribe")
      o.transcribe = true;
    else
      throw std::runtime_error("[args] unknown argument " + a);
  }
  if (o.model.empty() || o.audio.empty()) throw std::runtime_error("[args] need -m and --audio");
  if (o.runs < 1 || o.tokens < 3)
    throw std::runtime_error("[args] need --runs >= 1, --tokens >= 3");
  if (o.label.empty()) o.label = o.model;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options opt = parse(argc, argv);
    ggml_backend_load_all();
    whisper_context_params cp = whisper_context_default_params();
    cp.use_gpu = opt.use_gpu;
    cp.flash_attn = true;
    const auto t0 = Clock::now();
    whisper_context* ctx = whisper_init_from_file_with_params(opt.model.c_str(), cp);
    if (!ctx) throw std::runtime_error("[whisper.cpp] cannot load " + opt.model);
    Bench bench(opt, ctx);
    bench.emit("whisper_load", ms_since(t0));
    bench.run();
    whisper_free(ctx);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "whispercpp_forced: %s\n", e.what());
    return 1;
  }
}
