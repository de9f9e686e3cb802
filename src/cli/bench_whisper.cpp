// `parley bench whisper`: where the time of one transcription goes, as JSON lines (one per
// stage, same style as `bench ops`): model load, log-mel, encoder per 30 s window, decoder
// per token (a fixed number of forced steps, so the figure does not depend on where the
// transcript ends; on CUDA each step makes its choice on the device under the window's
// filters, as a real greedy step does), the same at beam size N (one batched step of N rows),
// forced end-to-end runs at beam 1 and N, and the whole file end to end with its real-time factor
// and text.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <numeric>
#include <optional>
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
#include "engine/threadpool.h"
#include "whisper/beam_search.h"
#include "whisper/decoding.h"
#include "whisper/logit_filters.h"
#include "whisper/model.h"
#include "whisper/tokenizer.h"
#include "whisper/transcribe.h"

namespace parley::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct BenchWhisperOptions {
  std::string model;       // empty: the default tiny.en
  std::string audio;       // any file load_audio reads
  int runs = 3;            // repetitions of every timed stage (median reported)
  int decode_tokens = 30;  // forced decoder steps per run
  int beam_size = 5;       // rows of the beam rows (whisper_decode_beam, ..._forced_beam); 1: none
  int threads = 0;         // 0: all hardware threads
  int warmup = -1;         // untimed calls before each stage; -1: 0 on the CPU, 2 on CUDA
  DeviceFlags device;
  int audio_ctx = 0;  // LoadOptions::audio_ctx
};

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Waits for the device's queued work, so host clocks time it (CUDA runs asynchronously).
void sync(Device device) {
  if (device == Device::cuda) cuda::synchronize();
}

// Median milliseconds of `fn` over `runs` calls after `warmup` untimed ones; the device
// is synchronized before the clock starts and before it stops.
double median_ms(int runs, int warmup, Device device, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> samples;
  for (int i = 0; i < runs; ++i) {
    sync(device);
    const auto t0 = Clock::now();
    fn();
    sync(device);
    samples.push_back(ms_since(t0));
  }
  return median(samples);
}

// Median of `fn`'s own figure (a pass that times itself) over `runs` calls after `warmup`
// untimed ones.
double median_of(int runs, int warmup, const std::function<double()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> samples;
  for (int i = 0; i < runs; ++i) samples.push_back(fn());
  return median(samples);
}

// Where the token choice runs on the model's device (CUDA sessions, decoding.h
// chooses_on_device), a forced step makes it as a real greedy or beam step does:
// decode_choose with the window's logit filters in rule form (the ids suppressed at every
// position, the timestamp rules of the tokens so far), reading back only ids. Elsewhere (the
// CPU) a step takes the raw argmax of the logits on the host.
struct DeviceChoice {
  std::vector<std::unique_ptr<LogitFilter>> filters;
  std::vector<int32_t> always;
  StepRule rule;
  // Greedy steps chained on the device as decode_encoded runs them (decoder_chain.cpp;
  // PARLEY_GREEDY_PIPELINE=0: one decode_choose at a time).
  bool chain = false;
  // Beam steps after the first chained on the device as decode_encoded runs them
  // (beam_chain.cpp; PARLEY_BEAM_PIPELINE=0: one decode_choose and host update at a time).
  bool beam_chain = false;
  TimestampRuleParams grammar;
  int64_t sot_index = 0;  // <|startoftranscript|>'s position in the prefix
};

// The argmax of row `row` of f32 logits on the host (ties: the lowest id).
int32_t raw_argmax(const Tensor& logits, int64_t row) {
  const int64_t n_vocab = logits.dim(1);
  const float* p = logits.data<float>() + row * n_vocab;
  return int32_t(std::max_element(p, p + n_vocab) - p);
}

// The chain's start after `seq` (the prefix, or the prefix and the first token) under the
// window's filters.
GreedyChainStart chain_start(const DeviceChoice& choice, const std::vector<int32_t>& seq,
                             int sample_begin) {
  GreedyChainStart start;
  check(greedy_chain_start(choice.filters, seq, sample_begin, true, choice.always, choice.grammar,
                           start),
        ErrorKind::internal, "[bench] the default filters have no rule form after the sequence");
  return start;
}

// `steps` chained steps from the chain's start (session.n_cached()): step t + 1 is queued
// before step t's token is read, as decode_encoded runs them. initial_unread: the chain began
// at the window's initial pass, whose token is read after the first step is queued.
void run_chain(WhisperSession& session, int steps, bool initial_unread = false) {
  const int begin = session.n_cached();
  for (int i = 0; i < steps; ++i) {
    session.chain_launch();
    if (i > 0 || initial_unread) session.chain_result(begin + i - 1);
  }
  session.chain_result(begin + steps - 1);
}

// Milliseconds per decoder step over `steps` single-token steps after the sot sequence
// (the prefill is not counted). Each step feeds the previous step's choice, eot included, so
// exactly `steps` steps run whatever the audio says. whole_window (the end-to-end figure,
// which ignores the result): the chained first step is queued before the prefix's token is
// read, as decode_encoded does, instead of waiting for it to start the clock.
double forced_decode_ms_per_token(WhisperSession& session, const std::vector<int32_t>& prefix,
                                  int steps, DeviceChoice* choice, bool whole_window = false) {
  session.reset();
  const int sample_begin = int(prefix.size());
  if (choice && choice->chain && initial_choice_enabled()) {
    // As decode_encoded: the prefix's pass is the chain's first step and chooses the first
    // token on the device; every later step's token and rule row come from the step before
    // it there; the host reads ids one step behind. The clock starts once the first token is
    // read (the prefix's pass is not counted).
    session.chain_begin_initial(prefix, choice->sot_index,
                                chain_start(*choice, prefix, sample_begin));
    if (whole_window) {
      run_chain(session, steps, true);
      return 0.0;
    }
    session.chain_result(session.n_cached() - 1);
    const auto t0 = Clock::now();
    run_chain(session, steps);
    return ms_since(t0) / steps;
  }
  const int64_t last_row = int64_t(prefix.size()) - 1;
  Tensor logits = session.decode(prefix, std::span<const int64_t>(&last_row, 1));
  const auto t0 = Clock::now();
  std::vector<int32_t> seq = prefix;
  int32_t next = raw_argmax(logits, 0);
  if (choice && choice->chain) {
    // PARLEY_INITIAL_CHOICE=0: the first token from the host, then the chain as above.
    seq.push_back(next);
    session.chain_begin(chain_start(*choice, seq, sample_begin));
    run_chain(session, steps);
    return ms_since(t0) / steps;
  }
  for (int i = 0; i < steps; ++i) {
    seq.push_back(next);
    if (choice && step_rule(choice->filters, seq, choice->rule)) {
      next = session.decode_choose({&next, 1}, choice->always, choice->rule.v, 1).ids[0];
    } else {
      logits = session.decode(std::span<const int32_t>(&next, 1));
      next = raw_argmax(logits, 0);
    }
  }
  return ms_since(t0) / steps;
}

// One step of the rows: each row's pick into `best` (its best under the filters with `choice`
// and `rules` when `chosen`, from the top beam + 1 the device returns; else the argmax of the
// raw row on the host). `best` may be `tokens`: they are read before it is written.
void pick_rows(WhisperSession& session, const std::vector<int32_t>& tokens,
               const DeviceChoice* choice, const std::vector<int32_t>& rules, bool chosen,
               std::vector<int32_t>& best) {
  const int beam = int(tokens.size());
  if (chosen) {
    const int k = beam + 1;
    const auto& c = session.decode_choose(tokens, choice->always, rules, k);
    for (int r = 0; r < beam; ++r) best[size_t(r)] = c.ids[size_t(r * k)];
  } else {
    const Tensor logits = session.decode_rows(tokens);  // [beam, n_vocab] on the CPU
    for (int r = 0; r < beam; ++r) best[size_t(r)] = raw_argmax(logits, r);
  }
}

// The chained form of forced_beam_ms_per_step: as decode_encoded's beam search on a device,
// the prefix's pass, the fork and the search's first step run on the device (the pass's top
// beam + 1 ranked by beam_step), then the steps chain there (beam_step ranks the candidates
// and moves the rows) and the host follows each record one step behind (BeamSearch::apply).
// <|endoftext|> is suppressed at every position, so no sequence finishes and exactly `steps`
// steps run after the first. Milliseconds per step from the first step's record;
// whole_window: queued as decode_encoded queues it, the result ignored (0).
double forced_beam_chain_ms_per_step(WhisperSession& session, const std::vector<int32_t>& prefix,
                                     int beam, int steps, const DeviceChoice& choice,
                                     bool whole_window) {
  session.reset();
  const int sample_begin = int(prefix.size());
  std::vector<int32_t> always = choice.always;
  always.push_back(choice.grammar.eot);
  std::sort(always.begin(), always.end());
  always.erase(std::unique(always.begin(), always.end()), always.end());
  BeamSearch search(beam, choice.grammar.eot, std::nullopt);
  std::vector<std::vector<int32_t>> rows(size_t(beam), prefix);
  std::vector<float> sums(size_t(beam), 0.0f);
  BeamChainStart start;
  check(beam_chain_start(choice.filters, std::span(rows).first(1), std::span(sums).first(1),
                         sample_begin, true, always, choice.grammar, 0, search.max_candidates(),
                         start),
        ErrorKind::internal, "[bench] the default filters have no rule form after the prefix");
  session.beam_chain_begin_initial(prefix, choice.sot_index, beam, start);
  const int begin = session.n_cached() - 1;  // the first step's offset
  auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i) {
    session.beam_chain_launch();
    search.apply(rows, session.beam_chain_result(begin + i), sums);
    if (i == 0) t0 = Clock::now();  // the clock starts once the first step is read
  }
  search.apply(rows, session.beam_chain_result(begin + steps), sums);
  const double ms = ms_since(t0) / steps;
  session.beam_chain_end();
  return whole_window ? 0.0 : ms;
}

// Milliseconds per beam step over `steps` steps of `beam` rows after the sot sequence (the
// prefill and fork are not counted). A step is what beam search does per token: one
// decoder pass of every row, each row's pick of its next token (its best under the filters
// with `choice`, from the top beam + 1 the device returns; else the argmax of the raw row on
// the host; eot included, so exactly `steps` steps run) and reorder_rows with row 0 taken
// twice (source {0, 1, .., beam - 2, 0}: one row's positions copied per step, as when one
// hypothesis spawns two successors).
double forced_beam_ms_per_step(WhisperSession& session, const std::vector<int32_t>& prefix,
                               int beam, int steps, DeviceChoice* choice,
                               bool whole_window = false) {
  if (choice && choice->beam_chain && initial_choice_enabled() && beam <= kBeamChainMaxRows)
    return forced_beam_chain_ms_per_step(session, prefix, beam, steps, *choice, whole_window);
  session.reset();
  std::vector<int32_t> tokens;  // the first step's top `beam` tokens
  StepRule first_rule;
  if (choice && initial_choice_enabled() && step_rule(choice->filters, prefix, first_rule)) {
    // As decode_encoded: the prefix's pass chooses beam + 1 candidates on the device under
    // the first sampled position's rule row; only they and the <|startoftranscript|> row
    // come back.
    Tensor at_sot;
    const auto& c = session.decode_initial_choose(prefix, choice->sot_index, choice->always,
                                                  first_rule.v, beam + 1, at_sot);
    tokens.assign(c.ids.begin(), c.ids.begin() + beam);
  } else {
    const Tensor first = session.decode(prefix);
    const int64_t n_vocab = first.dim(1);
    const float* last = first.data<float>() + (first.dim(0) - 1) * n_vocab;
    std::vector<int32_t> order(static_cast<size_t>(n_vocab));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + beam, order.end(),
                      [&](int32_t a, int32_t b) { return last[a] > last[b]; });
    tokens.assign(order.begin(), order.begin() + beam);
  }
  std::vector<int32_t> source(static_cast<size_t>(beam));
  std::iota(source.begin(), source.end(), 0);
  source.back() = 0;
  std::vector<int32_t> best(static_cast<size_t>(beam)), rules;
  std::vector<std::vector<int32_t>> seqs(size_t(beam), prefix), next_seqs = seqs;
  session.fork(beam);
  const auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i) {
    if (choice)
      for (int r = 0; r < beam; ++r) seqs[size_t(r)].push_back(tokens[size_t(r)]);
    const bool chosen = choice && step_rules(choice->filters, seqs, rules);
    pick_rows(session, tokens, choice, rules, chosen, best);
    session.reorder_rows(source);
    for (int r = 0; r < beam; ++r) {
      tokens[size_t(r)] = best[size_t(source[size_t(r)])];
      if (choice) next_seqs[size_t(r)] = seqs[size_t(source[size_t(r)])];  // reuses capacity
    }
    if (choice) seqs.swap(next_seqs);
  }
  return ms_since(t0) / steps;
}

// Milliseconds per step of `beam` rows without beam search's host work: the first step's
// rule rows kept, each row fed its own pick, no reorder_rows. What is left of a beam step is
// the device's step and its round trip (upload, graph replay, the choices read back);
// forced_beam_ms_per_step minus this is the host's rules and the reorder's copies.
double rows_step_ms(WhisperSession& session, const std::vector<int32_t>& prefix, int beam,
                    int steps, DeviceChoice* choice) {
  session.reset();
  session.decode(prefix);
  std::vector<int32_t> tokens(static_cast<size_t>(beam), prefix.back()), rules;
  std::vector<std::vector<int32_t>> seqs(size_t(beam), prefix);
  const bool chosen = choice && step_rules(choice->filters, seqs, rules);
  session.fork(beam);
  const auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i) pick_rows(session, tokens, choice, rules, chosen, tokens);
  return ms_since(t0) / steps;
}

void run_bench_whisper(const BenchWhisperOptions& opt) {
  check_arg(opt.runs >= 1, "[bench] --runs must be >= 1");
  check_arg(opt.decode_tokens >= 1, "[bench] --decode-tokens must be >= 1");
  check_arg(opt.beam_size >= 1, "[bench] --beam-size must be >= 1");
  if (opt.threads > 0) set_cpu_threads(opt.threads);
  const std::string dir = opt.model.empty() ? default_model_dir() : opt.model;

  const auto t_load = Clock::now();
  const LoadOptions load = load_options(opt.device, opt.audio_ctx);
  const auto model = WhisperModel::load(dir, load);
  const auto tokenizer = load_tokenizer(*model);
  const double load_ms = ms_since(t_load);
  WhisperSession session(model);
  const Device dev = model->device();
  const int warmup = opt.warmup >= 0 ? opt.warmup : (dev == Device::cuda ? 2 : 0);

  const char* omp_wait_policy = std::getenv("OMP_WAIT_POLICY");
  const nlohmann::json common = {
      {"model", dir},
      {"device", std::string(device_name(model->device()))},
      {"dtype", model->int8() ? std::string("int8") : std::string(dtype_name(model->dtype()))},
      {"device_label",
       dev == Device::cuda ? std::string(cuda::device_label()) : std::string("cpu")},
      {"warmup", warmup},
      {"audio_ctx", model->config().n_audio_ctx},  // encoder positions (--audio-ctx)
      {"threads", cpu_threads().size()},
      // oneDNN's OpenMP threads spin between GEMMs unless this
      // is "passive"; on few cores that costs 10x per token.
      {"omp_wait_policy", omp_wait_policy ? omp_wait_policy : ""}};
  auto emit = [&](nlohmann::json j) {
    j.update(common);
    std::cout << j.dump() << std::endl;
  };
  emit({{"bench", "whisper_load"}, {"ms", load_ms}});

  std::vector<float> samples;
  const double audio_ms =
      median_ms(opt.runs, warmup, dev, [&] { samples = load_audio(opt.audio); });
  const double audio_seconds = double(samples.size()) / kWhisperSampleRate;
  emit({{"bench", "whisper_audio_decode"}, {"ms", audio_ms}, {"audio_seconds", audio_seconds}});

  // The log-mel of the whole file as transcribe() computes it (with 30 s of padding, on
  // the model's device).
  const int n_mels = model->config().n_mels;
  Tensor mel;
  const double mel_ms = median_ms(opt.runs, warmup, dev, [&] {
    mel = log_mel_spectrogram_for(dev, samples, n_mels, kChunkSamples);
  });
  emit({{"bench", "whisper_mel"}, {"ms", mel_ms}, {"frames", mel.dim(1)}});

  const Tensor window = pad_or_trim_frames(mel, kChunkFrames);  // encoder cost is shape-only
  const double enc_ms = median_ms(opt.runs, warmup, dev, [&] { session.encode(window); });
  emit({{"bench", "whisper_encoder"}, {"ms_per_window", enc_ms}});

  // The sot sequence of an English transcription (no prompt), as the first window starts.
  const std::vector<int32_t> prefix =
      initial_tokens(tokenizer, DecodingOptions{}, "en", model->config().n_text_ctx);
  // The default filters of that window, for steps that choose on the device.
  std::unique_ptr<DeviceChoice> choice;
  if (SessionLogitsSource(session).chooses_on_device()) {
    choice = std::make_unique<DeviceChoice>();
    choice->filters = make_logit_filters(tokenizer, LogitFilterSettings{}, int(prefix.size()));
    choice->always = always_masked(choice->filters);
    choice->chain = SessionLogitsSource(session).chains_greedy();
    choice->beam_chain = SessionLogitsSource(session).chains_beam();
    choice->grammar = {tokenizer.eot(), tokenizer.timestamp_begin()};
    choice->sot_index = std::find(prefix.begin(), prefix.end(), tokenizer.sot()) - prefix.begin();
  }
  check_arg(int(prefix.size()) + opt.decode_tokens <= model->config().n_text_ctx,
            "[bench] --decode-tokens " + std::to_string(opt.decode_tokens) +
                " does not fit the decoder's " + std::to_string(model->config().n_text_ctx) +
                " positions");
  // The pass over that prefix as each window's decode begins: its last row's logits, on
  // the host (the e2e figure below includes it once).
  const int64_t last_prefix_row = int64_t(prefix.size()) - 1;
  const double prefix_ms = median_ms(opt.runs, warmup, dev, [&] {
    session.reset();
    session.decode(prefix, std::span<const int64_t>(&last_prefix_row, 1));
  });
  emit({{"bench", "whisper_prefix"}, {"ms", prefix_ms}, {"tokens", int(prefix.size())}});
  const double tok_ms = median_of(opt.runs, warmup, [&] {
    return forced_decode_ms_per_token(session, prefix, opt.decode_tokens, choice.get());
  });
  const std::string choice_at = choice ? "device" : "host";
  emit({{"bench", "whisper_decode"},
        {"ms_per_token", tok_ms},
        {"choice", choice_at},
        {"chained", choice && choice->chain},
        {"tokens_per_second", 1000.0 / tok_ms},
        {"decode_tokens", opt.decode_tokens}});

  // The end-to-end figure: audio decode, log-mel, one encoder window, the sot
  // prefix and exactly --decode-tokens greedy steps (the choice made where a real step
  // makes it), whatever the audio says, so every system can be made to do the same work.
  const double forced_ms = median_ms(opt.runs, warmup, dev, [&] {
    const std::vector<float> s = load_audio(opt.audio);
    const Tensor m = log_mel_spectrogram_for(dev, s, n_mels, kChunkSamples);
    session.encode(pad_or_trim_frames(m, kChunkFrames));
    forced_decode_ms_per_token(session, prefix, opt.decode_tokens, choice.get(), true);
  });
  emit({{"bench", "whisper_e2e_forced"},
        {"ms", forced_ms},
        {"choice", choice_at},
        {"chained", choice && choice->chain},
        {"decode_tokens", opt.decode_tokens},
        {"audio_seconds", audio_seconds}});

  // End to end, as `parley transcribe` does it: decode the file, log-mel, every window;
  // greedy at temperature 0 only, so a synthetic model (whose windows fail the fallback
  // thresholds) is timed on the same one decode per window as a real one.
  TranscribeOptions greedy;
  greedy.temperatures = {0.0f};
  TranscribeResult result;
  const double e2e_ms = median_ms(opt.runs, warmup, dev, [&] {
    const std::vector<float> s = load_audio(opt.audio);
    result = transcribe(session, tokenizer, s, greedy);
  });
  emit({{"bench", "whisper_transcribe"},
        {"ms", e2e_ms},
        {"audio_seconds", audio_seconds},
        {"rtf", e2e_ms / 1000.0 / audio_seconds},
        {"segments", result.segments.size()},
        {"text", result.text}});

  // Beam rows last: the rows above stand whatever happens in them.
  if (const int beam = opt.beam_size; beam > 1) {
    const double step_ms = median_of(opt.runs, warmup, [&] {
      return forced_beam_ms_per_step(session, prefix, beam, opt.decode_tokens, choice.get());
    });
    emit({{"bench", "whisper_decode_beam"},
          {"beam", beam},
          {"choice", choice_at},
          {"ms_per_step", step_ms},  // one step: every row's token (decode_rows + pick + reorder)
          {"ms_per_beam_token", step_ms / beam},
          {"decode_steps", opt.decode_tokens},
          {"chained", choice && choice->beam_chain},
          {"reorder", choice && choice->beam_chain
                          ? "beam search's own (on the device), <|endoftext|> suppressed"
                          : "source {0..beam-2, 0} each step: one row copied"}});
    const double rows_ms = median_of(opt.runs, warmup, [&] {
      return rows_step_ms(session, prefix, beam, opt.decode_tokens, choice.get());
    });
    emit({{"bench", "whisper_decode_rows"},
          {"rows", beam},
          {"choice", choice_at},
          {"ms_per_step", rows_ms},  // the beam step without host rules and reorder
          {"decode_steps", opt.decode_tokens}});

    // Forced end to end at beam size `beam`: audio, mel, encoder, the prefix, fork and
    // exactly --decode-tokens beam steps.
    const double beam_ms = median_ms(opt.runs, warmup, dev, [&] {
      const std::vector<float> s = load_audio(opt.audio);
      const Tensor m = log_mel_spectrogram_for(dev, s, n_mels, kChunkSamples);
      session.encode(pad_or_trim_frames(m, kChunkFrames));
      forced_beam_ms_per_step(session, prefix, beam, opt.decode_tokens, choice.get(), true);
    });
    emit({{"bench", "whisper_e2e_forced_beam"},
          {"ms", beam_ms},
          {"choice", choice_at},
          {"chained", choice && choice->beam_chain},
          {"beam", beam},
          {"decode_steps", opt.decode_tokens},
          {"audio_seconds", audio_seconds}});
  }
}

}  // namespace

void add_bench_whisper_subcommand(CLI::App& bench) {
  auto opt = std::make_shared<BenchWhisperOptions>();
  auto* cmd = bench.add_subcommand(
      "whisper", "Load, mel, encoder, per-token decoder and end-to-end times of a transcription");
  cmd->add_option("-m,--model", opt->model, "Model folder (default: the built-in tiny.en)");
  cmd->add_option("--audio", opt->audio, "Audio file")->required();
  cmd->add_option("--runs", opt->runs, "Repetitions per stage (median)")->capture_default_str();
  cmd->add_option("--decode-tokens", opt->decode_tokens, "Forced decoder steps per run")
      ->capture_default_str();
  cmd->add_option("--beam-size", opt->beam_size,
                  "Rows of the beam-search rows (decode step and forced end to end); 1: skip them")
      ->capture_default_str();
  cmd->add_option("--threads", opt->threads, "CPU threads (default: all)");
  cmd->add_option("--warmup", opt->warmup, "Untimed calls per stage (default: 0 CPU, 2 CUDA)");
  add_device_flags(cmd, opt->device);
  add_whisper_load_flags(cmd, opt->device, opt->audio_ctx);
  cmd->callback([opt] { run_bench_whisper(*opt); });
}

}  // namespace parley::cli
