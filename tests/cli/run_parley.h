// Runs the built `parley` binary (PARLEY_BINARY_DIR/parley) through the shell and collects
// its exit code and output, for the CLI test files.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace parley_test {

// Where `parley` looks for tiny.en when --model is not given and neither PARLEY_HOME nor
// XDG_DATA_HOME is set (default_model.cpp): scripts/setup.sh installs it there.
inline std::string default_tiny_en_dir() {
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.local/share/parley/models/whisper-tiny.en";
}

struct RunResult {
  int exit_code;       // -1 when killed by a signal (a crash)
  std::string output;  // stdout, and stderr too unless separated
  std::string err;     // stderr when separate_stderr, else empty
};

// `args` is pasted after the binary's path, unquoted: the caller quotes what needs it.
inline RunResult run_parley(const std::string& args, bool separate_stderr = false) {
  const std::string err_file =
      testing::TempDir() + "/parley_stderr_" + std::to_string(::getpid()) + ".txt";
  const std::string cmd = std::string(PARLEY_BINARY_DIR) + "/parley " + args +
                          (separate_stderr ? " 2>" + err_file : std::string(" 2>&1"));
  FILE* pipe = popen(cmd.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string out;
  if (pipe == nullptr) return {-1, out, ""};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  std::string err;
  if (separate_stderr) {
    std::ifstream f(err_file, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    err = ss.str();
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out, err};
}

}  // namespace parley_test
