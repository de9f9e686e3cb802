// Tool calls in a chat answer (issue 27 item 4, the parsing half): the model writes its calls
// as text in its family's format, and OpenAI clients expect them as `tool_calls`. Hermes /
// Qwen2.5 / Qwen3 (and the trained model) write each call as
//   <tool_call>\n{"name": "...", "arguments": {...}}\n</tool_call>
// (vLLM's hermes parser reads the same). A request with `tools` (and tool_choice not none)
// gets its calls parsed out: the text around them is the message's content (null when only
// whitespace), each call an entry with a fresh id, its arguments as a JSON string, and the
// finish reason "tool_calls". A block whose body is not a JSON object with a string "name"
// stays text. Streaming holds back text that may begin a call until it is decided, and
// sends each call as one tool_calls delta when its closing tag arrives.
//
// Two more families write their calls as the whole answer, in JSON:
// - llama3_json (Llama 3.1, 3.2, 3.3: the template asks for {"name": function name,
//   "parameters": dictionary}): an answer that is one such object (several separated by
//   ';') is calls; the special <|python_tag|> before it is not in the text.
// - mistral (Mistral Nemo / v3 templates: [TOOL_CALLS][{"name": ..., "arguments": {...},
//   "id": "..."}]): the special [TOOL_CALLS] token is not in the text, so an answer that is
//   a JSON array of such objects is calls; their ids are 9 alphanumerics, as the template
//   demands of the follow-up turn. The [TOOL_CALLS]name[ARGS]{...} form of Mistral Small
//   3.2 / Devstral needs the special tokens in the text: not parsed (its calls stay text).
// In these formats an answer that starts with '{' (llama3_json) or '[' (mistral) is held
// back while streaming until it ends, then sent as calls or, when it is not calls, as text.
//
// Forcing calls (tool_choice required or a named function) constrains the answer to the
// format's calls with a grammar (tool_call_grammar): each call's object is
// {"name": <one of the tools>, "arguments" (llama3_json: "parameters"): <that tool's
// parameters schema>}.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/constraint.h"

namespace parley::server {

enum class ToolCallFormat { none, hermes, llama3_json, mistral };

// hermes when the chat template writes <tool_call>, mistral when it writes [TOOL_CALLS][
// (a list), llama3_json when it asks for {"name": function name, "parameters": ...} or
// writes calls so; else none.
ToolCallFormat tool_call_format(std::string_view chat_template);

struct ToolCall {
  std::string id;  // "call_" and 24 hex digits (mistral: 9 alphanumerics)
  std::string name;
  std::string arguments;  // a JSON object's text
};

struct ToolCallSplit {
  std::string content;  // the text outside the calls, trimmed
  std::vector<ToolCall> calls;
};

// parallel false (the request's parallel_tool_calls): the first call only, later ones dropped.
ToolCallSplit split_tool_calls(std::string_view text,
                               ToolCallFormat format = ToolCallFormat::hermes,
                               bool parallel = true);

// The grammar of an answer that is only calls in `format` (not none): of the function
// `name`, or of any of `tools` when name is empty; one call, or one or more when
// `parallel`. Throws Error(invalid_argument) when a tool's parameters schema does not
// compile.
GrammarSpec tool_call_grammar(const nlohmann::ordered_json& tools, ToolCallFormat format,
                              const std::string& name, bool parallel);

// The streaming form: push each text delta; what may still begin a call is held back.
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolCallFormat format = ToolCallFormat::hermes, bool parallel = true)
      : format_(format), parallel_(parallel) {}
  struct Out {
    std::string content;  // text to send now (may be empty)
    std::vector<ToolCall> calls;
  };
  Out push(std::string_view delta);
  Out flush();  // the end: held text goes out as content (an unclosed call stays text)
  int calls() const { return calls_; }

 private:
  void emit_text(std::string_view text, Out& out);
  Out push_whole(std::string_view delta);  // llama3_json and mistral
  void keep(ToolCall call, Out& out);      // a parsed call, unless one call is all there may be
  ToolCallFormat format_;
  bool parallel_ = true;
  enum class Whole { undecided, calls, text } whole_ = Whole::undecided;
  std::string held_;        // undecided text (a possible tag start, or an open call's body)
  std::string whitespace_;  // whitespace held until text follows it (dropped around calls)
  bool in_call_ = false;
  bool sent_text_ = false;
  int calls_ = 0;
};

}  // namespace parley::server
