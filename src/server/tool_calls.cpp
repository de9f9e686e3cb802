#include "server/tool_calls.h"

#include <random>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "grammar/json_schema.h"

namespace parley::server {

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string new_call_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kHex = "0123456789abcdef";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kHex[rng() % 16];
  return id;
}

// A call's body: {"name": string, "arguments": object (or a string holding one)}.
bool parse_call(std::string_view body, ToolCall& call) {
  const nlohmann::json j = nlohmann::json::parse(trim(body), nullptr, false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  call.name = j["name"].get<std::string>();
  nlohmann::json args = j.contains("arguments") ? j["arguments"] : nlohmann::json::object();
  if (args.is_string()) args = nlohmann::json::parse(args.get<std::string>(), nullptr, false);
  if (!args.is_object()) return false;
  call.arguments = args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  call.id = new_call_id();
  return true;
}

// The length of the longest suffix of s that is a proper prefix of tag.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

ToolCallFormat tool_call_format(std::string_view chat_template) {
  return chat_template.find(kOpen) != std::string_view::npos ? ToolCallFormat::hermes
                                                             : ToolCallFormat::none;
}

ToolCallSplit split_tool_calls(std::string_view text) {
  ToolCallStream s;
  ToolCallStream::Out a = s.push(text);
  ToolCallStream::Out b = s.flush();
  ToolCallSplit out;
  out.content = std::string(trim(a.content + b.content));
  out.calls = std::move(a.calls);
  out.calls.insert(out.calls.end(), b.calls.begin(), b.calls.end());
  return out;
}

void ToolCallStream::emit_text(std::string_view text, Out& out) {
  // Whitespace waits until other text follows it: the newlines around calls are dropped.
  size_t i = 0;
  while (i < text.size()) {
    const size_t j = text.find_first_not_of(" \n\t\r", i);
    if (j == std::string_view::npos) {
      whitespace_.append(text.substr(i));
      return;
    }
    whitespace_.append(text.substr(i, j - i));
    if (sent_text_ || calls_ == 0) out.content += whitespace_;
    whitespace_.clear();
    const size_t k = std::min(text.size(), text.find_first_of(" \n\t\r", j));
    out.content.append(text.substr(j, k - j));
    sent_text_ = true;
    i = k;
  }
}

ToolCallStream::Out ToolCallStream::push(std::string_view delta) {
  Out out;
  held_.append(delta);
  for (;;) {
    if (!in_call_) {
      const size_t at = held_.find(kOpen);
      if (at == std::string::npos) {
        const size_t keep = partial_tag(held_, kOpen);
        emit_text(std::string_view(held_).substr(0, held_.size() - keep), out);
        held_.erase(0, held_.size() - keep);
        return out;
      }
      emit_text(std::string_view(held_).substr(0, at), out);
      held_.erase(0, at + kOpen.size());
      in_call_ = true;
    }
    const size_t end = held_.find(kClose);
    if (end == std::string::npos) return out;  // the call's body is still coming
    ToolCall call;
    if (parse_call(std::string_view(held_).substr(0, end), call)) {
      out.calls.push_back(std::move(call));
      ++calls_;
      whitespace_.clear();
    } else {
      emit_text(std::string(kOpen) + held_.substr(0, end + kClose.size()), out);
    }
    held_.erase(0, end + kClose.size());
    in_call_ = false;
  }
}

ToolCallStream::Out ToolCallStream::flush() {
  Out out;
  std::string rest = in_call_ ? std::string(kOpen) + held_ : held_;
  held_.clear();
  in_call_ = false;
  emit_text(rest, out);
  if (calls_ == 0) out.content += whitespace_;  // a plain answer keeps its trailing whitespace
  whitespace_.clear();
  return out;
}

GrammarSpec tool_call_grammar(const nlohmann::ordered_json& tools, ToolCallFormat format,
                              const std::string& name, bool parallel) {
  check_arg(format == ToolCallFormat::hermes,
            "[tools] forcing a tool call needs a chat template that writes them (<tool_call>)");
  // One alternative per function: its name as a constant, then its arguments.
  nlohmann::ordered_json any = nlohmann::ordered_json::array();
  for (const auto& t : tools) {
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) continue;
    const auto& f = t["function"];
    const std::string fname = f.value("name", "");
    if (fname.empty() || (!name.empty() && fname != name)) continue;
    nlohmann::ordered_json params =
        f.contains("parameters") ? f["parameters"] : nlohmann::ordered_json{{"type", "object"}};
    nlohmann::ordered_json call = {
        {"type", "object"},
        {"properties", {{"name", {{"const", fname}}}, {"arguments", params}}},
        {"required", nlohmann::ordered_json::array({"name", "arguments"})},
        {"additionalProperties", false}};
    any.push_back(std::move(call));
  }
  check_arg(!any.empty(), "[tools] no function to call");
  const nlohmann::ordered_json schema =
      any.size() == 1 ? any[0] : nlohmann::ordered_json{{"anyOf", any}};
  // The schema's rules (start `root`), and the calls around them.
  std::string gbnf = json_schema_to_gbnf(schema.dump());
  const std::string call = R"("<tool_call>\n" root "\n</tool_call>")";
  gbnf += "\nparley-tool-calls ::= " + call;
  if (parallel) gbnf += " ( \"\\n\" " + call + " )*";
  gbnf += "\n";
  return {GrammarSpec::Kind::gbnf, std::move(gbnf), "parley-tool-calls"};
}

}  // namespace parley::server
