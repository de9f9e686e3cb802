// `parley bench llm --model DIR`: the chat model's forward pass timed as the engine runs it,
// as JSON lines: load time, prefill tokens/s at each --prompt-tokens length (one row, one
// call per chunk of --chunk tokens), and decode ms per step at each --batch size (rows of a
// short prompt, then --decode-tokens steps of one token per row, the KV paged). With
// --verify-tokens N (N > 1), also ms per step of speculative verify rows: each row N new
// tokens with logits for all N, as the verifier runs a row's last token and N - 1 drafts
// (the cost side of speculative decoding at a shape whose weights are synthetic). Token ids
// are seeded random in [0, vocab): the work does not depend on the text. On CUDA
// (--device cuda --dtype bf16|f16|f32) the logits stay on the device (the forward pass alone,
// as a framework's forward returns them) and each figure ends with a device synchronize.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/load_options.h"
#include "engine/error.h"
#include "engine/threadpool.h"
#include "llm/kv_cache.h"
#include "llm/model.h"

namespace parley::cli {
namespace {

struct BenchLlmOptions {
  std::string model;
  std::vector<int64_t> prompt_tokens{512};
  std::vector<int64_t> batch{1, 8};
  int64_t decode_tokens = 32;
  std::vector<int64_t> verify_tokens{1};  // tokens per row per step (1: plain decode)
  int64_t decode_context = 16;            // prompt tokens per row before the timed decode steps
  int64_t chunk = 512;
  int runs = 3;
  int threads = 0;
  DeviceFlags device;
};

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, int32_t(vocab - 1));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& x : ids) x = d(rng);
  return ids;
}

std::vector<int32_t> iota_blocks(int64_t first, int64_t n) {
  std::vector<int32_t> b(static_cast<size_t>(n));
  std::iota(b.begin(), b.end(), int32_t(first));
  return b;
}

// Median of the runs.
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double time_prefill(const LlmModel& model, KvCache& cache, ForwardScratch& scratch,
                    const std::vector<int32_t>& ids, int64_t chunk) {
  const auto blocks = iota_blocks(0, KvCache::blocks_for(int64_t(ids.size())));
  Tensor logits;
  Batch batch;
  const auto t0 = Clock::now();
  for (int64_t at = 0; at < int64_t(ids.size()); at += chunk) {
    const int64_t len = std::min<int64_t>(chunk, int64_t(ids.size()) - at);
    batch.rows = {{std::span(ids).subspan(size_t(at), size_t(len)), int32_t(at), blocks,
                   at + len == int64_t(ids.size()), false}};
    model.forward(batch, cache, logits, scratch);
  }
  if (model.device() == Device::cuda) cuda::synchronize();
  return ms_since(t0);
}

// ms per decode step of `rows` rows after a `prompt`-token prompt each; each step feeds
// `width` tokens per row (width > 1: verify rows, logits for every token).
double time_decode(const LlmModel& model, KvCache& cache, ForwardScratch& scratch, int64_t rows,
                   int64_t prompt, int64_t steps, int64_t width) {
  const int64_t per_row = KvCache::blocks_for(prompt + steps * width);
  std::vector<std::vector<int32_t>> blocks, ids;
  for (int64_t r = 0; r < rows; ++r) {
    blocks.push_back(iota_blocks(r * per_row, per_row));
    ids.push_back(random_ids(prompt + steps * width, model.config().vocab_size, uint32_t(r + 1)));
  }
  Tensor logits;
  Batch batch;
  for (int64_t r = 0; r < rows; ++r)
    batch.rows.push_back(
        {std::span(ids[size_t(r)]).first(size_t(prompt)), 0, blocks[size_t(r)], true, false});
  model.forward(batch, cache, logits, scratch);
  if (model.device() == Device::cuda) cuda::synchronize();
  const auto t0 = Clock::now();
  for (int64_t s = 0; s < steps; ++s) {
    batch.rows.clear();
    for (int64_t r = 0; r < rows; ++r)
      batch.rows.push_back(
          {std::span(ids[size_t(r)]).subspan(size_t(prompt + s * width), size_t(width)),
           int32_t(prompt + s * width), blocks[size_t(r)], true, width > 1});
    model.forward(batch, cache, logits, scratch);
  }
  if (model.device() == Device::cuda) cuda::synchronize();
  return ms_since(t0) / double(steps);
}

void run_bench_llm(const BenchLlmOptions& opt) {
  if (opt.threads > 0) set_cpu_threads(opt.threads);
  check_arg(opt.runs >= 1 && opt.decode_tokens >= 1 && opt.chunk >= 1,
            "[bench llm] --runs, --decode-tokens and --chunk must be at least 1");
  const auto t_load = Clock::now();
  const LlmLoadOptions lo = llm_load_options(opt.device);
  const LlmModel model = LlmModel::load(opt.model, lo);
  const double load_ms = ms_since(t_load);
  const LlmConfig& c = model.config();
  const int64_t longest = *std::max_element(opt.prompt_tokens.begin(), opt.prompt_tokens.end());
  const int64_t max_batch = *std::max_element(opt.batch.begin(), opt.batch.end());
  const int64_t widest = *std::max_element(opt.verify_tokens.begin(), opt.verify_tokens.end());
  check_arg(*std::min_element(opt.verify_tokens.begin(), opt.verify_tokens.end()) >= 1,
            "[bench llm] --verify-tokens must be at least 1");
  const int64_t blocks =
      std::max(KvCache::blocks_for(longest),
               max_batch * KvCache::blocks_for(opt.decode_context + opt.decode_tokens * widest));
  KvCache cache(c, blocks, model.device(), model.dtype());
  ForwardScratch scratch(model.device());
  scratch.logits_on_device = true;
  nlohmann::json base = {{"bench", "llm"},
                         {"model", opt.model},
                         {"family", family_name(c.family)},
                         {"layers", c.n_layers},
                         {"hidden", c.hidden_size},
                         {"device", opt.device.device},
                         {"dtype", opt.device.dtype},
                         {"threads", cpu_threads().size()}};
  if (model.device() == Device::cuda) base["gpu"] = std::string(cuda::device_label());
  nlohmann::json j = base;
  j["phase"] = "load";
  j["ms"] = load_ms;
  std::cout << j.dump() << std::endl;
  for (int64_t n : opt.prompt_tokens) {
    check_arg(n >= 1 && n < c.max_position_embeddings + 1,
              "[bench llm] --prompt-tokens out of range");
    const auto ids = random_ids(n, c.vocab_size, 7);
    time_prefill(model, cache, scratch, ids, opt.chunk);  // warm-up: pool and primitives
    std::vector<double> ms;
    for (int r = 0; r < opt.runs; ++r)
      ms.push_back(time_prefill(model, cache, scratch, ids, opt.chunk));
    j = base;
    j["phase"] = "prefill";
    j["tokens"] = n;
    j["ms"] = median(ms);
    j["ms_min"] = *std::min_element(ms.begin(), ms.end());
    j["tokens_per_s"] = double(n) / (median(ms) / 1000.0);
    std::cout << j.dump() << std::endl;
  }
  for (int64_t b : opt.batch) {
    check_arg(b >= 1, "[bench llm] --batch sizes must be at least 1");
    for (int64_t w : opt.verify_tokens) {
      std::vector<double> ms;
      for (int r = 0; r < opt.runs; ++r)
        ms.push_back(
            time_decode(model, cache, scratch, b, opt.decode_context, opt.decode_tokens, w));
      j = base;
      j["phase"] = w == 1 ? "decode" : "verify";
      j["batch"] = b;
      j["context"] = opt.decode_context;
      if (w > 1) j["tokens_per_row"] = w;
      j["ms_per_step"] = median(ms);
      j["ms_per_step_min"] = *std::min_element(ms.begin(), ms.end());
      j["tokens_per_s"] = double(b * w) / (median(ms) / 1000.0);
      std::cout << j.dump() << std::endl;
    }
  }
}

}  // namespace

void add_bench_llm_subcommand(CLI::App& bench) {
  auto opt = std::make_shared<BenchLlmOptions>();
  auto* cmd = bench.add_subcommand("llm", "Chat-model prefill tokens/s and decode ms per step");
  cmd->add_option("-m,--model", opt->model, "Hugging Face chat-model folder or GGUF")->required();
  cmd->add_option("--prompt-tokens", opt->prompt_tokens, "Prefill lengths")->capture_default_str();
  cmd->add_option("--batch", opt->batch, "Decode batch sizes (rows)")->capture_default_str();
  cmd->add_option("--decode-tokens", opt->decode_tokens, "Decode steps timed per batch size")
      ->capture_default_str();
  cmd->add_option("--decode-context", opt->decode_context,
                  "Prompt tokens per row before the timed decode steps")
      ->capture_default_str();
  cmd->add_option("--verify-tokens", opt->verify_tokens,
                  "Tokens per row per decode step (1: plain decode; N > 1: verify rows of a "
                  "token and N - 1 drafts, logits for all)")
      ->capture_default_str();
  cmd->add_option("--chunk", opt->chunk, "Prefill tokens per forward call")->capture_default_str();
  cmd->add_option("--runs", opt->runs, "Timed runs per figure (median reported)")
      ->capture_default_str();
  cmd->add_option("--threads", opt->threads, "CPU threads (default: all)");
  add_device_flags(cmd, opt->device);
  cmd->callback([opt] { run_bench_llm(*opt); });
}

}  // namespace parley::cli
