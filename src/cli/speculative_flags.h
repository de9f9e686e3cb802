// The speculative-decoding flags of the chat commands (generate, chat, serve, bench llm):
// --speculative METHOD, --num-speculative-tokens K, --prompt-lookup-min/max N (vLLM's names).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "serving/speculative.h"

namespace parley::cli {

struct SpeculativeFlags {
  std::string method = "none";
  SpeculativeConfig config;  // the numbers; method from `method`
};

inline void add_speculative_flags(CLI::App* cmd, SpeculativeFlags& f) {
  cmd->add_option("--speculative", f.method,
                  "Speculative decoding: none, ngram (prompt lookup) or suffix (suffix "
                  "decoding over the request and earlier outputs); output is unchanged")
      ->check(CLI::IsMember({"none", "ngram", "suffix"}))
      ->capture_default_str();
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
}

// The engine's SpeculativeConfig (throws Error(invalid_argument) for min > max).
inline SpeculativeConfig speculative_config(const SpeculativeFlags& f) {
  SpeculativeConfig c = f.config;
  c.method = parse_spec_method(f.method);
  validate(c);
  return c;
}

}  // namespace parley::cli
