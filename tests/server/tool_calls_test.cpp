// Tool calls parsed out of a chat answer (server/tool_calls.h): the hermes format whole and
// streamed in every split, text around calls, malformed blocks kept as text, tags split
// across deltas; the Llama 3.1 JSON and Mistral list formats whole and streamed; each
// format found in the real chat templates llama.cpp ships (.venv-llm, when set up); the
// grammar that forces calls accepts the format's calls and nothing else.
#include "server/tool_calls.h"

#include "engine/error.h"
#include "grammar/constraint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace parley::server {
namespace {

TEST(ToolCalls, FormatComesFromTheTemplate) {
  EXPECT_EQ(tool_call_format("... <tool_call>\\n{\"name\": ...} </tool_call> ..."),
            ToolCallFormat::hermes);
  EXPECT_EQ(tool_call_format("{{ messages }}"), ToolCallFormat::none);
}

TEST(ToolCalls, HermesCallsBecomeCallsAndTheRestContent) {
  const ToolCallSplit one = split_tool_calls(
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\": \"Denver\"}}\n</tool_call>");
  ASSERT_EQ(one.calls.size(), 1u);
  EXPECT_EQ(one.calls[0].name, "get_time");
  EXPECT_EQ(nlohmann::json::parse(one.calls[0].arguments), nlohmann::json({{"city", "Denver"}}));
  EXPECT_EQ(one.calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(one.calls[0].id.size(), 29u);
  EXPECT_EQ(one.content, "");

  const ToolCallSplit two = split_tool_calls(
      "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"b\", \"arguments\": \"{\\\"x\\\": [1, 2]}\"}</tool_call>");
  ASSERT_EQ(two.calls.size(), 2u);
  EXPECT_EQ(two.calls[1].name, "b");
  EXPECT_EQ(two.calls[1].arguments, "{\"x\":[1,2]}");  // a string argument holding JSON
  EXPECT_NE(two.calls[0].id, two.calls[1].id);
  EXPECT_EQ(two.content, "Let me check.");
  // parallel_tool_calls false: the first call only.
  const ToolCallSplit first = split_tool_calls(
      "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\", "
      "\"arguments\": {}}</tool_call>",
      ToolCallFormat::hermes, false);
  ASSERT_EQ(first.calls.size(), 1u);
  EXPECT_EQ(first.calls[0].name, "a");
  EXPECT_EQ(first.content, "");
  EXPECT_EQ(split_tool_calls("[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\"}]",
                             ToolCallFormat::mistral, false)
                .calls.size(),
            1u);

  // Not a call: the block stays text; plain text is untouched.
  const ToolCallSplit bad = split_tool_calls("<tool_call>{\"nom\": 1}</tool_call> ok");
  EXPECT_TRUE(bad.calls.empty());
  EXPECT_EQ(bad.content, "<tool_call>{\"nom\": 1}</tool_call> ok");
  EXPECT_EQ(split_tool_calls("just text").content, "just text");
  EXPECT_EQ(split_tool_calls("a <tool_call> never closed").content, "a <tool_call> never closed");
}

TEST(ToolCalls, StreamedInAnySplitGivesTheSameCallsAndText) {
  const std::string text =
      "Sure: <tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": \"<tool\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call> done <tool";
  for (size_t step : {1, 2, 3, 5, 7, 11, 200}) {
    ToolCallStream s;
    std::string content;
    std::vector<ToolCall> calls;
    for (size_t i = 0; i < text.size(); i += step) {
      ToolCallStream::Out o = s.push(std::string_view(text).substr(i, step));
      content += o.content;
      calls.insert(calls.end(), o.calls.begin(), o.calls.end());
    }
    ToolCallStream::Out o = s.flush();
    content += o.content;
    calls.insert(calls.end(), o.calls.begin(), o.calls.end());
    ASSERT_EQ(calls.size(), 2u) << step;
    EXPECT_EQ(calls[0].name, "f");
    EXPECT_EQ(nlohmann::json::parse(calls[0].arguments)["q"], "<tool");
    EXPECT_EQ(calls[1].name, "g");
    EXPECT_EQ(content, "Sure: done <tool") << step;
    EXPECT_EQ(s.calls(), 2);
  }
  // A plain answer streams unchanged, trailing whitespace included.
  ToolCallStream plain;
  std::string got = plain.push("Hello, <b>world</b> \n").content;
  got += plain.flush().content;
  EXPECT_EQ(got, "Hello, <b>world</b> \n");
}

// The formats of real templates (llama.cpp's copies, unpacked by setup_llm_reference.sh).
TEST(ToolCalls, FormatsOfRealTemplates) {
  const std::filesystem::path dir =
      std::filesystem::path(PARLEY_LLM_VENV) / "share/llama.cpp/models/templates";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no " << dir << " (setup_llm_reference.sh)";
  const auto format_of = [&](const char* name) {
    std::ifstream f(dir / name);
    return tool_call_format(std::string(std::istreambuf_iterator<char>(f), {}));
  };
  EXPECT_EQ(format_of("Qwen-Qwen3-0.6B.jinja"), ToolCallFormat::hermes);
  EXPECT_EQ(format_of("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja"), ToolCallFormat::hermes);
  EXPECT_EQ(format_of("meta-llama-Llama-3.1-8B-Instruct.jinja"), ToolCallFormat::llama3_json);
  EXPECT_EQ(format_of("meta-llama-Llama-3.3-70B-Instruct.jinja"), ToolCallFormat::llama3_json);
  EXPECT_EQ(format_of("mistralai-Mistral-Nemo-Instruct-2407.jinja"), ToolCallFormat::mistral);
  // [TOOL_CALLS]name[ARGS]{...}: its markers are special tokens, not in the text.
  EXPECT_EQ(format_of("Mistral-Small-3.2-24B-Instruct-2506.jinja"), ToolCallFormat::none);
  EXPECT_EQ(format_of("google-gemma-2-2b-it.jinja"), ToolCallFormat::none);
}

TEST(ToolCalls, Llama3JsonAndMistralListsWholeAndStreamed) {
  const std::string llama =
      "{\"name\": \"get_time\", \"parameters\": {\"city\": \"Denver\"}}; "
      "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}";
  const std::string mistral =
      " [{\"name\": \"get_time\", \"arguments\": {\"city\": \"Denver\"}, \"id\": \"abc123XYZ\"}, "
      "{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]";
  for (auto [format, text] : {std::pair{ToolCallFormat::llama3_json, llama},
                              std::pair{ToolCallFormat::mistral, mistral}}) {
    for (size_t step : {1, 3, 7, 1000}) {
      ToolCallStream s(format);
      std::string content;
      std::vector<ToolCall> calls;
      for (size_t i = 0; i < text.size(); i += step) {
        ToolCallStream::Out o = s.push(std::string_view(text).substr(i, step));
        EXPECT_TRUE(o.content.empty() && o.calls.empty());  // held to the end
      }
      ToolCallStream::Out o = s.flush();
      ASSERT_EQ(o.calls.size(), 2u) << text;
      EXPECT_EQ(o.content, "");
      EXPECT_EQ(o.calls[0].name, "get_time");
      EXPECT_EQ(nlohmann::json::parse(o.calls[0].arguments), nlohmann::json({{"city", "Denver"}}));
      EXPECT_EQ(nlohmann::json::parse(o.calls[1].arguments), nlohmann::json({{"a", 1}, {"b", 2}}));
      if (format == ToolCallFormat::mistral) {
        EXPECT_EQ(o.calls[0].id.size(), 9u);  // what the template demands on the next turn
      } else {
        EXPECT_EQ(o.calls[0].id.rfind("call_", 0), 0u);
      }
    }
    // Text streams as it comes; an answer that looked like calls but is not stays text.
    ToolCallStream t(format);
    EXPECT_EQ(t.push("  The answer").content, "  The answer");
    EXPECT_EQ(t.push(" is {\"x\"}.").content, " is {\"x\"}.");
    EXPECT_TRUE(t.flush().calls.empty());
    const char* broken = format == ToolCallFormat::mistral ? "[1, 2]" : "{\"nom\": 1}";
    const ToolCallSplit b = split_tool_calls(broken, format);
    EXPECT_TRUE(b.calls.empty());
    EXPECT_EQ(b.content, broken);
  }
}

TEST(ToolCalls, ForcedCallGrammarsAcceptTheFormatsCalls) {
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "ping"}}])");
  struct Case {
    ToolCallFormat format;
    std::string name;
    bool parallel;
    std::vector<std::pair<std::string, bool>> texts;
  };
  const std::vector<Case> cases = {
      {ToolCallFormat::hermes,
       "",
       true,
       {{"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
         true},
        {"<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n"
         "{\"name\": \"ping\", \"arguments\": {\"x\": 1}}\n</tool_call>",
         true},
        {"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>", false},
        {"Sure.", false}}},
      {ToolCallFormat::hermes,
       "get_time",
       false,
       {{"<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>", false},
        {"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\": "
         "\"Oslo\"}}\n</tool_call>\n"
         "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
         false}}},
      {ToolCallFormat::llama3_json,
       "",
       false,
       {{"{\"name\": \"get_time\", \"parameters\": {\"city\": \"Oslo\"}}", true},
        {"{\"name\": \"get_time\", \"arguments\": {\"city\": \"Oslo\"}}", false}}},
      {ToolCallFormat::mistral,
       "",
       true,
       {{"[{\"name\": \"ping\", \"arguments\": {}}, {\"name\": \"get_time\", \"arguments\": "
         "{\"city\": \"Oslo\"}}]",
         true},
        {"{\"name\": \"ping\", \"arguments\": {}}", false}}}};
  for (const Case& c : cases) {
    auto g = compile_grammar(tool_call_grammar(tools, c.format, c.name, c.parallel));
    for (const auto& [text, ok] : c.texts) EXPECT_EQ(g->full_match(text), ok) << text;
  }
  EXPECT_THROW(tool_call_grammar(tools, ToolCallFormat::none, "", true), Error);
}

}  // namespace
}  // namespace parley::server
