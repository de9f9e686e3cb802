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
// Forcing calls (tool_choice required or a named function) constrains the answer to the
// format's calls with a grammar (tool_call_grammar): each call's object is
// {"name": <one of the tools>, "arguments": <that tool's parameters schema>}.
//
// Other families (Llama 3.1's JSON, Mistral's [TOOL_CALLS] special token) are not parsed
// yet: their calls arrive as text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/constraint.h"

namespace parley::server {

enum class ToolCallFormat { none, hermes };

// hermes when the chat template writes <tool_call>, else none.
ToolCallFormat tool_call_format(std::string_view chat_template);

struct ToolCall {
  std::string id;  // "call_" and 24 hex digits
  std::string name;
  std::string arguments;  // a JSON object's text
};

struct ToolCallSplit {
  std::string content;  // the text outside the calls, trimmed
  std::vector<ToolCall> calls;
};

ToolCallSplit split_tool_calls(std::string_view text);

// The grammar of an answer that is only calls in `format` (not none): of the function
// `name`, or of any of `tools` when name is empty; one call, or one or more when
// `parallel`. Throws Error(invalid_argument) when a tool's parameters schema does not
// compile.
GrammarSpec tool_call_grammar(const nlohmann::ordered_json& tools, ToolCallFormat format,
                              const std::string& name, bool parallel);

// The streaming form: push each text delta; what may still begin a call is held back.
class ToolCallStream {
 public:
  struct Out {
    std::string content;  // text to send now (may be empty)
    std::vector<ToolCall> calls;
  };
  Out push(std::string_view delta);
  Out flush();  // the end: held text goes out as content (an unclosed call stays text)
  int calls() const { return calls_; }

 private:
  void emit_text(std::string_view text, Out& out);
  std::string held_;        // undecided text (a possible tag start, or an open call's body)
  std::string whitespace_;  // whitespace held until text follows it (dropped around calls)
  bool in_call_ = false;
  bool sent_text_ = false;
  int calls_ = 0;
};

}  // namespace parley::server
