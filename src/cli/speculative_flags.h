// The speculative-decoding flags of the chat commands (generate, chat, serve, bench llm):
// --speculative METHOD, --num-speculative-tokens K, --prompt-lookup-min/max N (vLLM's names).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "engine/error.h"
#include "llm/model.h"
#include "serving/speculative.h"

namespace parley::cli {

struct SpeculativeFlags {
  std::string method = "none";
  std::string draft_model;   // --draft-model: the draft method's model folder
  SpeculativeConfig config;  // the numbers; method from `method`
};

inline void add_speculative_flags(CLI::App* cmd, SpeculativeFlags& f) {
  cmd->add_option("--speculative", f.method,
                  "Speculative decoding: none, ngram (prompt lookup), suffix (suffix decoding "
                  "over the request and earlier outputs), draft (--draft-model's greedy "
                  "guesses) or mtp (the checkpoint's multi-token-prediction module, one token "
                  "a step); output is unchanged")
      ->check(CLI::IsMember({"none", "ngram", "suffix", "draft", "mtp"}))
      ->capture_default_str();
  cmd->add_option("--draft-model", f.draft_model,
                  "A smaller chat model with the same tokenizer, for --speculative draft (and "
                  "requests that ask for it)");
  cmd->add_option("--num-speculative-tokens", f.config.num_tokens,
                  "Draft tokens verified per step at most")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--prompt-lookup-min", f.config.ngram_min,
                  "ngram: shortest n-gram matched (vLLM's default 5)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--prompt-lookup-max", f.config.ngram_max,
                  "ngram: longest n-gram matched (vLLM's default 5)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--speculative-disable-by-batch-size", f.config.disable_by_batch_size,
                  "No drafts (grammar-forced ones included) in a step where at least this many "
                  "sequences decode together (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

// The engine's SpeculativeConfig (throws Error(invalid_argument) for min > max).
inline SpeculativeConfig speculative_config(const SpeculativeFlags& f) {
  SpeculativeConfig c = f.config;
  c.method = parse_spec_method(f.method);
  validate(c);
  check_arg(c.method != SpecMethod::draft || !f.draft_model.empty(),
            "[cli] --speculative draft needs --draft-model DIR");
  return c;
}

// The --draft-model, loaded as the target is (null without one).
inline std::unique_ptr<LlmModel> load_draft_model(const SpeculativeFlags& f,
                                                  const LlmLoadOptions& load) {
  if (f.draft_model.empty()) return nullptr;
  return std::make_unique<LlmModel>(LlmModel::load(f.draft_model, load));
}

}  // namespace parley::cli
