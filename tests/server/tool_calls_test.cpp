// Tool calls parsed out of a chat answer (server/tool_calls.h): the hermes format whole and
// streamed in every split, text around calls, malformed blocks kept as text, tags split
// across deltas.
#include "server/tool_calls.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace parley::server
