// `parley grammar`: the grammar engine from the command line.
//   parley grammar gbnf --schema FILE       the GBNF a JSON Schema compiles to
//   parley grammar gbnf --json-object       the GBNF of any JSON object
//   parley grammar check (--schema F | --gbnf F | --regex P | --json-object) [TEXT_FILE]
//                                           whether the text (stdin without a file) is in
//                                           the language: prints "match" or "no match"
//                                           (exit 0 / 1)
//   parley grammar masks --tokenizer tokenizer.json
//                                           token masks for the mask-comparison harness
//                                           (tools/grammar/llguidance_masks.py) and the mask
//                                           benchmark (bench/grammar_masks.py): JSON lines on
//                                           stdin, one per request,
//     {"kind": "json_schema"|"json_object"|"gbnf"|"regex", "grammar": <schema or text>,
//      "tokens": [ids...], "stop": [ids...]}
//   and one JSON line out per request: {"error": "..."} when the grammar does not compile,
//   else {"steps": [{"n": allowed, "mask": base64 bitset, "us": microseconds}, ...],
//   "rejected_at": i or -1, "accepting": bool (the tokens before the rejected one, or all of
//   them, are a complete text), "compile_us": microseconds}. steps[i] is the
//   mask before tokens[i] (the last one the mask after every token, unless one was
//   rejected: then steps end with the mask that rejected it). The bitset is ceil(vocab/32)
//   little-endian 32-bit words, bit i for token id i; vocab is the tokenizer's id range.
#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/error.h"
#include "grammar/constraint.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "serving/llm_engine.h"
#include "text/tokenizer.h"

namespace parley::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct GrammarOptions {
  std::string schema, gbnf, regex, tokenizer, text_file;
  bool json_object = false;
};

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  check(bool(f), ErrorKind::not_found, "[grammar] cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

GrammarSpec spec_of(const GrammarOptions& o) {
  const int given =
      int(!o.schema.empty()) + int(!o.gbnf.empty()) + int(!o.regex.empty()) + int(o.json_object);
  check_arg(given == 1, "[grammar] give exactly one of --schema, --gbnf, --regex, --json-object");
  if (!o.schema.empty()) return {GrammarSpec::Kind::json_schema, read_file(o.schema)};
  if (!o.gbnf.empty()) return {GrammarSpec::Kind::gbnf, read_file(o.gbnf)};
  if (!o.regex.empty()) return {GrammarSpec::Kind::regex, o.regex};
  return {GrammarSpec::Kind::json_object, "{}"};
}

std::string base64(const std::vector<uint32_t>& words) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes;
  bytes.reserve(words.size() * 4);
  for (uint32_t w : words)
    for (int k = 0; k < 4; ++k) bytes.push_back(char((w >> (8 * k)) & 0xFF));
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    if (i + 1 < bytes.size()) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) v |= uint32_t(uint8_t(bytes[i + 2]));
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back(i + 2 < bytes.size() ? kAlphabet[v & 63] : '=');
  }
  return out;
}

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

nlohmann::ordered_json run_mask_request(const nlohmann::ordered_json& req,
                                        const std::shared_ptr<const TokenTrie>& trie) {
  const std::string kind = req.value("kind", "");
  GrammarSpec spec;
  if (kind == "json_schema") {
    const auto& g = req.at("grammar");
    spec = {GrammarSpec::Kind::json_schema, g.is_string() ? g.get<std::string>() : g.dump()};
  } else if (kind == "json_object") {
    spec = {GrammarSpec::Kind::json_object, "{}"};
  } else if (kind == "gbnf" || kind == "regex") {
    spec = {kind == "gbnf" ? GrammarSpec::Kind::gbnf : GrammarSpec::Kind::regex,
            req.at("grammar").get<std::string>()};
  } else {
    return {{"error", "unknown kind '" + kind + "'"}};
  }
  std::shared_ptr<ByteAutomaton> automaton;
  const auto t0 = Clock::now();
  try {
    automaton = compile_grammar(spec);
  } catch (const Error& e) {
    return {{"error", e.what()}};
  }
  const double compile_us = us_since(t0);
  TokenConstraint c(automaton, trie, req.value("stop", std::vector<int32_t>{}));
  const std::vector<int32_t> tokens = req.value("tokens", std::vector<int32_t>{});
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  int64_t rejected = -1;
  for (size_t i = 0; i <= tokens.size(); ++i) {
    const auto t = Clock::now();
    const std::vector<uint32_t>& m = c.allowed();
    const double us = us_since(t);
    int64_t n = 0;
    for (uint32_t w : m) n += __builtin_popcount(w);
    steps.push_back({{"n", n}, {"mask", base64(m)}, {"us", us}});
    if (i == tokens.size()) break;
    if (!c.allows(tokens[i])) {
      rejected = int64_t(i);
      break;
    }
    c.accept(tokens[i]);
  }
  return {{"steps", std::move(steps)},
          {"rejected_at", rejected},
          {"accepting", c.complete()},
          {"compile_us", compile_us}};
}

void run_masks(const GrammarOptions& o) {
  check_arg(!o.tokenizer.empty(), "[grammar masks] --tokenizer is required");
  const Tokenizer tok = Tokenizer::from_file(o.tokenizer);
  const auto trie = make_token_trie(tok, tok.vocab_size());
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    nlohmann::ordered_json out;
    try {
      out = run_mask_request(nlohmann::ordered_json::parse(line), trie);
    } catch (const std::exception& e) {
      out = {{"error", std::string("bad request: ") + e.what()}};
    }
    std::cout << out.dump() << "\n" << std::flush;
  }
}

}  // namespace

void add_grammar_command(CLI::App& app) {
  auto* g = app.add_subcommand("grammar", "Grammar-engine tools (JSON Schema, GBNF, regex)");
  g->require_subcommand(1);
  auto opt = std::make_shared<GrammarOptions>();
  auto add_source = [&](CLI::App* c) {
    c->add_option("--schema", opt->schema, "JSON Schema file");
    c->add_option("--gbnf", opt->gbnf, "GBNF grammar file");
    c->add_option("--regex", opt->regex, "Regular expression");
    c->add_flag("--json-object", opt->json_object, "Any JSON object");
  };
  auto* gbnf = g->add_subcommand("gbnf", "Print the GBNF of a JSON Schema (or --json-object)");
  gbnf->add_option("--schema", opt->schema, "JSON Schema file");
  gbnf->add_flag("--json-object", opt->json_object, "Any JSON object");
  gbnf->callback([opt] {
    check_arg(opt->schema.empty() != !opt->json_object,
              "[grammar gbnf] give exactly one of --schema, --json-object");
    std::cout << (opt->json_object ? json_object_gbnf()
                                   : json_schema_to_gbnf(read_file(opt->schema)));
  });
  auto* check_cmd = g->add_subcommand("check", "Whether a text is in the grammar's language");
  add_source(check_cmd);
  check_cmd->add_option("text", opt->text_file, "Text file (default: stdin)");
  check_cmd->callback([opt] {
    const std::string text = opt->text_file.empty()
                                 ? std::string(std::istreambuf_iterator<char>(std::cin), {})
                                 : read_file(opt->text_file);
    const bool ok = compile_grammar(spec_of(*opt))->full_match(text);
    std::cout << (ok ? "match" : "no match") << "\n";
    if (!ok) throw CLI::RuntimeError(1);
  });
  auto* masks = g->add_subcommand("masks", "Token masks per step (JSON lines in and out)");
  masks->add_option("--tokenizer", opt->tokenizer, "tokenizer.json")->required();
  masks->callback([opt] { run_masks(*opt); });
}

}  // namespace parley::cli
