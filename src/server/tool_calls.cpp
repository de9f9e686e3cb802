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

std::string new_call_id(ToolCallFormat format) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kHex = "0123456789abcdef";
  static const char* kAlnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  if (format == ToolCallFormat::mistral) {  // the template's follow-up turn demands 9
    std::string id;
    for (int i = 0; i < 9; ++i) id += kAlnum[rng() % 62];
    return id;
  }
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kHex[rng() % 16];
  return id;
}

// A call: {"name": string, "arguments" (llama3_json: "parameters"): object (or a string
// holding one)}.
bool parse_call_json(const nlohmann::json& j, ToolCall& call, ToolCallFormat format) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  call.name = j["name"].get<std::string>();
  const char* key = format == ToolCallFormat::llama3_json && j.contains("parameters") ? "parameters"
                                                                                      : "arguments";
  nlohmann::json args = j.contains(key) ? j[key] : nlohmann::json::object();
  if (args.is_string()) args = nlohmann::json::parse(args.get<std::string>(), nullptr, false);
  if (!args.is_object()) return false;
  call.arguments = args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  call.id = new_call_id(format);
  return true;
}

bool parse_call(std::string_view body, ToolCall& call) {
  return parse_call_json(nlohmann::json::parse(trim(body), nullptr, false), call,
                         ToolCallFormat::hermes);
}

// A whole answer in the llama3_json or mistral format as calls; false when it is not.
bool parse_whole(std::string_view text, ToolCallFormat format, std::vector<ToolCall>& calls) {
  text = trim(text);
  std::vector<nlohmann::json> items;
  if (format == ToolCallFormat::mistral) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_array() || j.empty()) return false;
    items.assign(j.begin(), j.end());
  } else {
    // One object, or several separated by ';'.
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_discarded()) {
      items.push_back(std::move(j));
    } else {
      size_t start = 0;
      while (start <= text.size()) {
        const size_t semi = text.find(';', start);
        const std::string_view part =
            trim(text.substr(start, semi == std::string_view::npos ? text.npos : semi - start));
        nlohmann::json p = nlohmann::json::parse(part, nullptr, false);
        if (p.is_discarded()) return false;
        items.push_back(std::move(p));
        if (semi == std::string_view::npos) break;
        start = semi + 1;
      }
    }
  }
  std::vector<ToolCall> out;
  for (const nlohmann::json& item : items) {
    ToolCall call;
    if (!parse_call_json(item, call, format)) return false;
    out.push_back(std::move(call));
  }
  calls.insert(calls.end(), out.begin(), out.end());
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
  const auto has = [&](std::string_view s) {
    return chat_template.find(s) != std::string_view::npos;
  };
  if (has(kOpen)) return ToolCallFormat::hermes;
  if (has("[TOOL_CALLS][")) return ToolCallFormat::mistral;  // not [TOOL_CALLS]name[ARGS]
  if (has("Respond in the format {\"name\": function name") ||
      has("{\"name\": \"' + tool_call.name"))
    return ToolCallFormat::llama3_json;
  return ToolCallFormat::none;
}

ToolCallSplit split_tool_calls(std::string_view text, ToolCallFormat format, bool parallel) {
  ToolCallStream s(format, parallel);
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

void ToolCallStream::keep(ToolCall call, Out& out) {
  if (!parallel_ && calls_ > 0) return;
  out.calls.push_back(std::move(call));
  ++calls_;
}

ToolCallStream::Out ToolCallStream::push_whole(std::string_view delta) {
  Out out;
  if (whole_ == Whole::text) {
    emit_text(delta, out);
    return out;
  }
  held_.append(delta);
  if (whole_ == Whole::undecided) {
    const size_t j = held_.find_first_not_of(" \n\t\r");
    if (j == std::string::npos) return out;  // only whitespace so far
    whole_ =
        held_[j] == (format_ == ToolCallFormat::mistral ? '[' : '{') ? Whole::calls : Whole::text;
    if (whole_ == Whole::text) {
      emit_text(held_, out);
      held_.clear();
    }
  }
  return out;  // calls: held to the end
}

ToolCallStream::Out ToolCallStream::push(std::string_view delta) {
  if (format_ != ToolCallFormat::hermes) return push_whole(delta);
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
      keep(std::move(call), out);
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
  if (format_ != ToolCallFormat::hermes) {
    std::vector<ToolCall> calls;
    if (whole_ == Whole::calls && parse_whole(held_, format_, calls)) {
      for (ToolCall& c : calls) keep(std::move(c), out);
    } else {
      emit_text(held_, out);
      out.content += whitespace_;
    }
    held_.clear();
    whitespace_.clear();
    whole_ = Whole::undecided;
    return out;
  }
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
  check_arg(format != ToolCallFormat::none,
            "[tools] forcing a tool call needs a chat template that writes them (hermes "
            "<tool_call>, Llama 3.1 JSON or Mistral [TOOL_CALLS])");
  // One alternative per function: its name as a constant, then its arguments.
  const char* args_key = format == ToolCallFormat::llama3_json ? "parameters" : "arguments";
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
        {"properties", {{"name", {{"const", fname}}}, {args_key, params}}},
        {"required", nlohmann::ordered_json::array({"name", args_key})},
        {"additionalProperties", false}};
    any.push_back(std::move(call));
  }
  check_arg(!any.empty(), "[tools] no function to call");
  const nlohmann::ordered_json schema =
      any.size() == 1 ? any[0] : nlohmann::ordered_json{{"anyOf", any}};
  // The schema's rules (start `root`), and the calls around them.
  std::string gbnf = json_schema_to_gbnf(schema.dump());
  if (format == ToolCallFormat::hermes) {
    const std::string call = R"("<tool_call>\n" root "\n</tool_call>")";
    gbnf += "\nparley-tool-calls ::= " + call;
    if (parallel) gbnf += " ( \"\\n\" " + call + " )*";
  } else if (format == ToolCallFormat::mistral) {  // the array [TOOL_CALLS] introduces
    gbnf += "\nparley-tool-calls ::= \"[\" root";
    if (parallel) gbnf += " ( \", \" root )*";
    gbnf += " \"]\"";
  } else {  // llama3_json: the template shows one call a turn
    gbnf += "\nparley-tool-calls ::= root";
    if (parallel) gbnf += " ( \"; \" root )*";
  }
  gbnf += "\n";
  return {GrammarSpec::Kind::gbnf, std::move(gbnf), "parley-tool-calls"};
}

}  // namespace parley::server
