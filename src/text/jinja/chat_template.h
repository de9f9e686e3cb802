// Hugging Face chat templates: parse once (unknown statements, filters or tests fail here,
// with the template's name and line), render per request with the context transformers
// passes (messages, tools, documents, add_generation_prompt, bos_token, eos_token,
// enable_thinking, ...). Renders byte-for-byte as transformers 5.x's jinja2 environment
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, its tojson,
// raise_exception and strftime_now); tests/parity/template_parity_test.py checks that on
// every template we ship tests for.
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace parley {

namespace jinja {
struct Program;
}

struct ChatTemplateOptions {
  // strftime_now's clock; empty = the local time now. Tests freeze it.
  std::function<std::tm()> now;
  // Macro calls nested deeper than this fail (jinja2 fails at Python's recursion limit).
  int max_call_depth = 200;
  // Bounds on one render, so that a hostile template fails instead of spinning or eating
  // memory (jinja2 has none; real templates stay far below).
  int64_t max_loop_iterations = 10'000'000;
  size_t max_output_bytes = 64u << 20;
};

class ChatTemplate {
 public:
  // Error(unsupported) for statements, filters or tests parley lacks; Error(invalid_argument)
  // for syntax errors. Messages read "[jinja] NAME:LINE: ...".
  static ChatTemplate parse(std::string source, std::string name = "chat_template");

  // Error(invalid_argument) for the template's own failures (raise_exception, undefined
  // attributes, type errors), Error(unsupported) for Python features parley lacks; both
  // with the line. The context's key order matters (tojson keeps it): pass ordered_json to
  // keep the caller's order; nlohmann::json objects iterate sorted by key.
  std::string render(const nlohmann::ordered_json& context,
                     const ChatTemplateOptions& options = {}) const;
  std::string render(const nlohmann::json& context, const ChatTemplateOptions& options = {}) const;

  const std::string& name() const;
  const std::string& source() const { return source_; }

 private:
  std::shared_ptr<const jinja::Program> program_;
  std::string source_;
};

// What transformers' render_jinja_template does to each message before the template sees
// it (_alias_reasoning_fields): the first non-null of reasoning_content / thinking /
// reasoning is copied to "thinking" (first key, read by gpt-oss templates) and to
// "reasoning_content" (the standard name). The caller builds the rest of the context:
// messages, tools (null when none), documents (null), add_generation_prompt, and extras.
nlohmann::ordered_json alias_reasoning_fields(const nlohmann::ordered_json& messages);

struct LoadedChatTemplate {
  ChatTemplate tmpl;
  std::string bos_token, eos_token;  // empty when tokenizer_config.json has none
};

// A model folder's template: chat_template.jinja, else tokenizer_config.json's
// "chat_template" (a string, or a list of {name, template} from which `name` is picked),
// plus bos_token / eos_token (strings or AddedToken dicts with "content").
// Error(not_found) when the folder has no template or no template of that name.
LoadedChatTemplate load_chat_template(const std::string& model_dir,
                                      const std::string& name = "default");

}  // namespace parley
