// Micro-benchmark of the host's share of a window's first token in batched transcription
// (transcribe_batch.cpp prefill): WindowSearch::first over a round of 64 windows (the
// no-speech probability, the logit filters at the first sampled position, the first token
// and its log-probability: a few passes over the 51 864-entry vocabulary per window), one
// window after another and spread over cpu_threads(). Random logits; the English tokenizer
// from the shared test data.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "engine/threadpool.h"
#include "whisper/decoding.h"
#include "whisper/tokenizer.h"

namespace parley {
namespace {

constexpr int kWindows = 64;

void run_first(benchmark::State& state, bool parallel) {
  static const WhisperTokenizer tok = WhisperTokenizer::from_tiktoken(
      std::string(PARLEY_TEST_DATA) + "/whisper/gpt2.tiktoken", false, 51864);
  const int64_t v = tok.n_vocab();
  std::vector<float> logits(size_t(2 * kWindows * v));
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (float& x : logits) x = dist(rng);
  DecodingOptions options;
  options.language = "en";
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<WindowSearch> searches;
    for (int i = 0; i < kWindows; ++i) searches.emplace_back(tok, options, 448);
    state.ResumeTiming();
    const auto first = [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        const float* at_sot = logits.data() + 2 * k * v;
        searches[size_t(k)].first({at_sot, size_t(v)}, {at_sot + v, size_t(v)});
      }
    };
    if (parallel)
      cpu_threads().parallel_for(kWindows, 1, first);
    else
      first(0, kWindows);
  }
  state.counters["windows"] = kWindows;
  state.counters["threads"] = parallel ? cpu_threads().size() : 1;
}

void BM_WindowFirstSerial(benchmark::State& state) { run_first(state, false); }
void BM_WindowFirstThreads(benchmark::State& state) { run_first(state, true); }
BENCHMARK(BM_WindowFirstSerial)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_WindowFirstThreads)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace parley
