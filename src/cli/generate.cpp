// `parley generate` (raw completion of a prompt) and `parley chat` (a conversation through
// the model's chat template, interactive or one turn), both streaming text as it is
// decoded, on the CPU parity path (f32) or on CUDA (--device cuda --dtype bf16). Sampling defaults
// come from the model's generation_config.json (as vLLM and transformers use it); flags override
// them.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/load_options.h"
#include "cli/speculative_flags.h"
#include "engine/error.h"
#include "engine/threadpool.h"
#include "llm/gguf_template.h"
#include "llm/model.h"
#include "serving/chat_service.h"
#include "serving/llm_engine.h"
#include "text/jinja/chat_template.h"
#include "text/tokenizer.h"

namespace parley::cli {
namespace {

struct SamplingFlags {
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> top_k;
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;
  std::optional<uint64_t> seed;
  int32_t max_tokens = 256;
  std::vector<std::string> stop;
  bool ignore_eos = false;
};

struct GenerateOptions {
  std::string model;
  std::string prompt;
  std::string system;
  bool raw_ids = false;  // generate: print the token ids too
  bool no_think = false;
  int64_t context = 0;
  int threads = 0;
  SamplingFlags sampling;
  DeviceFlags device;
  SpeculativeFlags speculative;
};

void add_sampling_flags(CLI::App* cmd, SamplingFlags& f) {
  cmd->add_option("--temperature", f.temperature,
                  "0 = greedy (default: generation_config.json, else 1)");
  cmd->add_option("--top-p", f.top_p,
                  "Nucleus sampling mass (default: generation_config.json, else 1)");
  cmd->add_option("--top-k", f.top_k, "Keep the k most likely tokens; 0 = off");
  cmd->add_option("--min-p", f.min_p, "Drop tokens below min_p x the top probability");
  cmd->add_option("--repetition-penalty", f.repetition_penalty,
                  "vLLM's repetition penalty (1 = off)");
  cmd->add_option("--presence-penalty", f.presence_penalty, "OpenAI's presence penalty")
      ->capture_default_str();
  cmd->add_option("--frequency-penalty", f.frequency_penalty, "OpenAI's frequency penalty")
      ->capture_default_str();
  cmd->add_option("--seed", f.seed, "Random seed (the same seed gives the same text)");
  cmd->add_option("-n,--max-tokens", f.max_tokens, "Most tokens to generate")
      ->capture_default_str();
  cmd->add_option("--stop", f.stop, "Stop string (up to 4; not printed)");
  cmd->add_flag("--ignore-eos", f.ignore_eos, "Keep generating past the end-of-sequence token");
}

SamplingParams sampling_params(const std::string& model_dir, const SamplingFlags& f) {
  SamplingParams p = generation_defaults(model_dir);
  if (f.temperature) p.temperature = *f.temperature;
  if (f.top_p) p.top_p = *f.top_p;
  if (f.top_k) p.top_k = *f.top_k;
  if (f.min_p) p.min_p = *f.min_p;
  if (f.repetition_penalty) p.repetition_penalty = *f.repetition_penalty;
  p.presence_penalty = f.presence_penalty;
  p.frequency_penalty = f.frequency_penalty;
  p.seed = f.seed;
  p.max_tokens = f.max_tokens;
  p.stop = f.stop;
  p.ignore_eos = f.ignore_eos;
  return p;
}

// Prints each choice-0 delta as it comes.
bool print_delta(int choice, std::string_view delta, const SampleResult&) {
  if (choice == 0 && !delta.empty()) {
    std::fwrite(delta.data(), 1, delta.size(), stdout);
    std::fflush(stdout);
  }
  return true;
}

void run_generate(const GenerateOptions& opt) {
  if (opt.threads > 0) set_cpu_threads(opt.threads);
  const LlmModel model = LlmModel::load(opt.model, llm_load_options(opt.device));
  const Tokenizer tokenizer = load_llm_tokenizer(opt.model);
  LlmEngineOptions engine_options;
  engine_options.max_context = opt.context;
  engine_options.speculative = speculative_config(opt.speculative);
  const std::unique_ptr<LlmModel> draft =
      load_draft_model(opt.speculative, llm_load_options(opt.device));
  LlmEngine engine(model, tokenizer, engine_options, draft.get());
  GenerateRequest req;
  req.prompt = tokenizer.encode(opt.prompt, /*add_special_tokens=*/true);
  req.params = sampling_params(opt.model, opt.sampling);
  bool echoed = false;  // the prompt, once the request has passed its checks
  const GenerateResult r =
      engine.generate(req, [&](int choice, std::string_view d, const SampleResult& s) {
        if (!echoed) std::fwrite(opt.prompt.data(), 1, opt.prompt.size(), stdout);
        echoed = true;
        return print_delta(choice, d, s);
      });
  std::printf("\n");
  if (opt.raw_ids) {
    nlohmann::json j = {{"prompt_ids", req.prompt},
                        {"ids", r.choices[0].tokens},
                        {"finish_reason", to_string(r.choices[0].finish)},
                        {"draft_tokens", r.draft_tokens},
                        {"accepted_draft_tokens", r.accepted_draft_tokens}};
    std::printf("%s\n", j.dump().c_str());
  }
}

void run_chat(const GenerateOptions& opt) {
  if (opt.threads > 0) set_cpu_threads(opt.threads);
  const LlmModel model = LlmModel::load(opt.model, llm_load_options(opt.device));
  const Tokenizer tokenizer = load_llm_tokenizer(opt.model);
  const LoadedChatTemplate tmpl = load_llm_chat_template(opt.model);
  LlmEngineOptions engine_options;
  engine_options.max_context = opt.context;
  engine_options.speculative = speculative_config(opt.speculative);
  const std::unique_ptr<LlmModel> draft =
      load_draft_model(opt.speculative, llm_load_options(opt.device));
  LlmEngine engine(model, tokenizer, engine_options, draft.get());
  const SamplingParams params = sampling_params(opt.model, opt.sampling);

  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!opt.system.empty()) messages.push_back({{"role", "system"}, {"content", opt.system}});
  const bool one_shot = !opt.prompt.empty();
  const bool interactive = !one_shot && isatty(fileno(stdin));
  std::string line;
  for (;;) {
    if (one_shot) {
      line = opt.prompt;
    } else {
      if (interactive) std::fprintf(stderr, "> ");
      if (!std::getline(std::cin, line)) break;
      if (line == "/exit") break;
      if (line == "/reset") {
        messages.erase(messages.begin() + (opt.system.empty() ? 0 : 1), messages.end());
        continue;
      }
      if (line.empty()) continue;
    }
    messages.push_back({{"role", "user"}, {"content", line}});
    GenerateRequest req;
    // The template writes the special tokens itself (transformers renders, then tokenizes
    // with add_special_tokens=False).
    const nlohmann::ordered_json kwargs = opt.no_think
                                              ? nlohmann::ordered_json{{"enable_thinking", false}}
                                              : nlohmann::ordered_json();
    req.prompt = tokenizer.encode(render_conversation(tmpl, messages, nullptr, kwargs, true),
                                  /*add_special_tokens=*/false);
    req.params = params;
    const GenerateResult r = engine.generate(req, print_delta);
    std::printf("\n");
    std::fflush(stdout);
    messages.push_back({{"role", "assistant"}, {"content", r.choices[0].text}});
    if (one_shot) break;
  }
}

}  // namespace

void add_generate_commands(CLI::App& app) {
  auto opt = std::make_shared<GenerateOptions>();
  auto* gen =
      app.add_subcommand("generate", "Complete a prompt with a chat model (raw text, no template)");
  gen->add_option("-m,--model", opt->model, "Hugging Face model folder")->required();
  gen->add_option("-p,--prompt", opt->prompt, "The text to continue")->required();
  gen->add_flag("--ids", opt->raw_ids, "Also print the prompt and output token ids as JSON");
  gen->add_option("--context", opt->context,
                  "Longest prompt + output (default: the model's, at most 8192)");
  gen->add_option("--threads", opt->threads, "CPU threads (default: all)");
  add_device_flags(gen, opt->device);
  add_sampling_flags(gen, opt->sampling);
  add_speculative_flags(gen, opt->speculative);
  gen->callback([opt] { run_generate(*opt); });

  auto copt = std::make_shared<GenerateOptions>();
  auto* chat = app.add_subcommand(
      "chat", "Talk to a chat model through its chat template (lines from stdin, or one -p turn)");
  chat->add_option("-m,--model", copt->model, "Hugging Face model folder")->required();
  chat->add_option("-p,--prompt", copt->prompt, "One user turn, then exit");
  chat->add_option("--system", copt->system, "A system prompt");
  chat->add_flag("--no-think", copt->no_think, "enable_thinking=false for templates that read it");
  chat->add_option("--context", copt->context,
                   "Longest prompt + output (default: the model's, at most 8192)");
  chat->add_option("--threads", copt->threads, "CPU threads (default: all)");
  add_device_flags(chat, copt->device);
  add_sampling_flags(chat, copt->sampling);
  add_speculative_flags(chat, copt->speculative);
  chat->callback([copt] { run_chat(*copt); });
}

}  // namespace parley::cli
