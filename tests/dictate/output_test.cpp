// Output sinks (src/dictate/output.h): which tool is chosen from PATH, the clear error when
// none is there, and a delivery through a real process.
#include "dictate/output.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/error.h"

namespace parley::dictate {
namespace {

namespace fs = std::filesystem;

// A folder of fake tools (shell scripts that write their argv or stdin to `log`).
std::string tool_dir(const std::string& name, const std::vector<std::string>& tools,
                     const std::string& log) {
  const fs::path dir = fs::path(testing::TempDir()) / (name + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const std::string& t : tools) {
    const fs::path f = dir / t;
    std::ofstream(f) << "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]' \"$a\"; done > " << log
                     << "\ncat >> " << log << "\n";
    fs::permissions(f, fs::perms::owner_all);
  }
  return dir.string();
}

TEST(DictateOutput, TypingToolsInTheSessionsOrder) {
  const std::string dir = tool_dir("type", {"wtype", "xdotool", "ydotool"}, "/dev/null");
  EXPECT_EQ(output_command(OutputKind::type, dir, true).argv.front(), dir + "/wtype");
  EXPECT_EQ(output_command(OutputKind::type, dir, false).argv.front(), dir + "/xdotool");
  const std::string only = tool_dir("ydo", {"ydotool"}, "/dev/null");
  const OutputCommand c = output_command(OutputKind::type, "/nonexistent:" + only, true);
  EXPECT_EQ(c.argv, (std::vector<std::string>{only + "/ydotool", "type", "--"}));
  EXPECT_TRUE(output_command(OutputKind::stdout_text, "", false).argv.empty());
}

TEST(DictateOutput, NoToolIsAClearError) {
  for (OutputKind kind : {OutputKind::type, OutputKind::clipboard}) {
    try {
      output_command(kind, "/nonexistent", false);
      FAIL() << "found a tool on an empty PATH";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::not_found);
      const std::string m = e.what();
      if (kind == OutputKind::type)
        EXPECT_NE(m.find("no typing tool on PATH (looked for xdotool, ydotool, wtype)"),
                  std::string::npos)
            << m;
      else
        EXPECT_NE(m.find("no clipboard tool on PATH (looked for xclip, wl-copy)"),
                  std::string::npos)
            << m;
    }
  }
}

TEST(DictateOutput, DeliversTheTextAsAnArgumentOrOnStdin) {
  const std::string log = testing::TempDir() + "/dictate_tool_" + std::to_string(::getpid());
  const std::string dir = tool_dir("deliver", {"xdotool", "xclip"}, log);
  const auto read_log = [&] {
    std::stringstream s;
    s << std::ifstream(log).rdbuf();
    return s.str();
  };
  deliver(output_command(OutputKind::type, dir, false), "ask not; $(rm -rf /)");
  EXPECT_EQ(read_log(), "[type][--clearmodifiers][--][ask not; $(rm -rf /)]");
  deliver(output_command(OutputKind::clipboard, dir, false), "what your country");
  EXPECT_EQ(read_log(), "[-selection][clipboard]what your country");
}

}  // namespace
}  // namespace parley::dictate
