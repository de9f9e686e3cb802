// `parley bench spec --model DIR --prompts FILE`: speculative decoding measured on real
// prompts, as JSON lines. FILE holds one JSON object per line with a rendered `prompt`
// (tokenized without added special tokens, as a chat template's output is) and an optional
// `task` label (tools/train/data.py's eval.jsonl is this format). For each --batch size and
// each --methods entry, a fresh engine generates every prompt (batch 1: one request at a
// time; batch B: all submitted at once, B running together) and reports wall time, output
// tokens per second, forwards, drafts verified and accepted, and whether every output is
// identical to the first method's (`none` first: the plain decode is the oracle; greedy, or
// sampled with --temperature, each prompt seeded). With
// --per-task, a line per task with its acceptance. With --grammar, only the prompts whose
// line has a JSON Schema (`schema`, or `meta.schema` as eval.jsonl's json task has) run, each
// constrained to it; the method `forced` is none plus the grammar's forced drafts, and every
// method but `none` drafts the forced bytes too (`none`: the plain constrained decode).
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/load_options.h"
#include "cli/speculative_flags.h"
#include "engine/error.h"
#include "engine/threadpool.h"
#include "llm/gguf_loader.h"
#include "llm/model.h"
#include "serving/llm_engine.h"
#include "text/tokenizer.h"

namespace parley::cli {
namespace {

struct BenchSpecOptions {
  std::string model;
  std::string prompts;
  int64_t limit = 0;  // first N prompts (0: all)
  std::vector<std::string> methods{"none", "ngram", "suffix"};
  std::vector<int> batch{1, 8};
  int32_t max_tokens = 128;
  float temperature = 0;  // 0: greedy
  uint64_t seed = 1;      // sampled: prompt i uses seed + i
  int threads = 0;
  bool per_task = false;
  bool grammar = false;
  LlmEngineOptions::MaskOverlap mask_overlap = LlmEngineOptions::MaskOverlap::automatic;
  DeviceFlags device;
  SpeculativeFlags speculative;  // k and the n-gram lengths (its method is unused)
};

struct Prompt {
  std::string task;
  std::vector<int32_t> ids;
  std::string schema;  // JSON text, or empty
};

std::vector<Prompt> read_prompts(const BenchSpecOptions& opt, const Tokenizer& tok) {
  std::ifstream in(opt.prompts);
  check(bool(in), ErrorKind::not_found, "[bench spec] cannot read " + opt.prompts);
  std::vector<Prompt> out;
  std::string line;
  while (std::getline(in, line) && (opt.limit <= 0 || int64_t(out.size()) < opt.limit)) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    check_arg(j.is_object() && j.contains("prompt") && j["prompt"].is_string(),
              "[bench spec] each line of " + opt.prompts + " needs a \"prompt\" string");
    std::string schema;
    if (j.contains("schema"))
      schema = j["schema"].dump();
    else if (j.contains("meta") && j["meta"].is_object() && j["meta"].contains("schema"))
      schema = j["meta"]["schema"].dump();
    if (opt.grammar && schema.empty()) continue;
    out.push_back({j.value("task", ""), tok.encode(j["prompt"].get<std::string>(), false), schema});
  }
  check_arg(!out.empty(), "[bench spec] " + opt.prompts + " has no prompts");
  return out;
}

void run_bench_spec(const BenchSpecOptions& opt) {
  if (opt.threads > 0) set_cpu_threads(opt.threads);
  const LlmModel model = LlmModel::load(opt.model, llm_load_options(opt.device));
  const Tokenizer tokenizer = load_llm_tokenizer(opt.model);
  const std::vector<Prompt> prompts = read_prompts(opt, tokenizer);
  const std::unique_ptr<LlmModel> draft =
      load_draft_model(opt.speculative, llm_load_options(opt.device));
  // Warm-up, untimed: the first engine of a process pays for the device's libraries and
  // allocator, which would otherwise land on the first method's figure.
  {
    LlmEngineOptions eo;
    eo.max_running = *std::max_element(opt.batch.begin(), opt.batch.end());
    eo.kv_rows = eo.max_running;
    LlmEngine engine(model, tokenizer, eo);
    for (size_t i = 0; i < prompts.size() && i < size_t(eo.max_running); ++i) {
      GenerateRequest r;
      r.prompt = prompts[i].ids;
      r.params.max_tokens = 8;
      engine.submit(r, {}, {});
    }
    while (!engine.idle()) engine.step();
  }
  for (int b : opt.batch) {
    check_arg(b >= 1, "[bench spec] --batch sizes must be at least 1");
    std::vector<std::vector<int32_t>> oracle;  // the first method's outputs
    for (const std::string& method : opt.methods) {
      LlmEngineOptions eo;
      eo.max_running = b;
      eo.kv_rows = b;
      eo.speculative = opt.speculative.config;
      eo.speculative.method = method == "forced" ? SpecMethod::none : parse_spec_method(method);
      eo.forced_drafts = method != "none";
      eo.mask_overlap = opt.mask_overlap;
      validate(eo.speculative);
      LlmEngine engine(model, tokenizer, eo, draft.get());
      std::vector<GenerateResult> results(prompts.size());
      size_t done = 0;
      std::exception_ptr failed;
      const auto t0 = std::chrono::steady_clock::now();
      size_t next = 0;
      while (done < prompts.size()) {
        // Keep b requests in the engine.
        while (next < prompts.size() && next - done < size_t(b)) {
          GenerateRequest r;
          r.prompt = prompts[next].ids;
          r.params.temperature = opt.temperature;
          r.params.seed = opt.seed + next;
          r.params.max_tokens = opt.max_tokens;
          if (opt.grammar) r.grammar = {GrammarSpec::Kind::json_schema, prompts[next].schema};
          engine.submit(r, {}, [&, i = next](GenerateResult* res, std::exception_ptr e) {
            if (e && !failed) failed = e;
            if (res) results[i] = std::move(*res);
            ++done;
          });
          ++next;
        }
        engine.step();
        if (failed) std::rethrow_exception(failed);
      }
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const LlmEngineStats st = engine.stats();
      int64_t tokens = 0, same = 0;
      std::map<std::string, std::pair<int64_t, int64_t>> per_task;  // drafts, accepted
      for (size_t i = 0; i < prompts.size(); ++i) {
        const GenerateResult& r = results[i];
        tokens += r.completion_tokens;
        if (oracle.size() == prompts.size() && r.choices[0].tokens == oracle[i]) ++same;
        auto& t = per_task[prompts[i].task];
        t.first += r.draft_tokens;
        t.second += r.accepted_draft_tokens;
      }
      if (oracle.empty())
        for (const GenerateResult& r : results) oracle.push_back(r.choices[0].tokens);
      const double drafts = double(st.spec_draft_tokens);
      nlohmann::json line = {
          {"bench", "spec"},
          {"method", method},
          {"batch", b},
          {"k", eo.speculative.num_tokens},
          {"temperature", opt.temperature},
          {"prompts", prompts.size()},
          {"output_tokens", tokens},
          {"seconds", secs},
          {"tokens_per_s", double(tokens) / secs},
          {"forwards", st.forwards},
          {"forward_seconds", st.forward_seconds},
          {"draft_forwards", st.draft_forwards},
          {"draft_seconds", st.draft_seconds},
          {"verify_rows", st.spec_rows},
          {"draft_tokens", st.spec_draft_tokens},
          {"accepted_tokens", st.spec_accepted_tokens},
          {"forced_tokens", st.spec_forced_tokens},
          {"disabled_steps", st.spec_disabled_steps},
          {"prefetched_masks", st.prefetched_masks},
          {"mask_wait_seconds", st.mask_wait_seconds},
          {"acceptance", drafts > 0 ? double(st.spec_accepted_tokens) / drafts : 0.0},
          {"identical_to_first_method", same},
          {"device", opt.device.device},
          {"dtype", opt.device.dtype}};
      std::cout << line.dump() << std::endl;
      if (opt.per_task && method != "none")
        for (const auto& [task, t] : per_task)
          std::cout << nlohmann::json{{"bench", "spec_task"},
                                      {"method", method},
                                      {"batch", b},
                                      {"task", task},
                                      {"draft_tokens", t.first},
                                      {"accepted_tokens", t.second}}
                           .dump()
                    << std::endl;
    }
  }
}

}  // namespace

void add_bench_spec_subcommand(CLI::App& bench) {
  auto opt = std::make_shared<BenchSpecOptions>();
  auto* cmd = bench.add_subcommand(
      "spec", "Speculative decoding on real prompts: tokens/s, acceptance, outputs unchanged");
  cmd->add_option("-m,--model", opt->model, "Hugging Face chat-model folder or GGUF")->required();
  cmd->add_option("--prompts", opt->prompts,
                  "JSON lines with a rendered \"prompt\" (and a \"task\"), e.g. "
                  "tools/train/data.py eval's eval.jsonl")
      ->required();
  cmd->add_option("--limit", opt->limit, "Use the first N prompts (0: all)");
  cmd->add_option("--methods", opt->methods, "Methods in order (the first is the oracle)")
      ->capture_default_str();
  cmd->add_option("--batch", opt->batch, "Requests running together")->capture_default_str();
  cmd->add_option("--max-tokens", opt->max_tokens, "Most tokens per answer")->capture_default_str();
  cmd->add_option("--temperature", opt->temperature,
                  "0: greedy; above: sampled, prompt i seeded with --seed + i (one-hot drafts "
                  "keep the plain draws; a draft model's sampled drafts change them, not their "
                  "distribution)")
      ->capture_default_str();
  cmd->add_option("--seed", opt->seed, "The first prompt's seed when sampling")
      ->capture_default_str();
  cmd->add_flag("--per-task", opt->per_task, "Also a line per task with its acceptance");
  cmd->add_option("--mask-overlap", opt->mask_overlap,
                  "Grammar masks beside the forward pass: auto (on CUDA), on or off")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, LlmEngineOptions::MaskOverlap>{
              {"auto", LlmEngineOptions::MaskOverlap::automatic},
              {"on", LlmEngineOptions::MaskOverlap::on},
              {"off", LlmEngineOptions::MaskOverlap::off}},
          CLI::ignore_case))
      ->capture_default_str();
  cmd->add_flag("--grammar", opt->grammar,
                "Only prompts with a JSON Schema, each constrained to it (method `forced`: "
                "the grammar's forced drafts alone)");
  cmd->add_option("--threads", opt->threads, "CPU threads (default: all)");
  add_device_flags(cmd, opt->device);
  add_speculative_flags(cmd, opt->speculative);
  cmd->callback([opt] { run_bench_spec(*opt); });
}

}  // namespace parley::cli
