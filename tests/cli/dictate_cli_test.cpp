// `parley dictate` end to end without a microphone: --input FILE streamed at --speed X
// through the same path as the microphone (push-to-talk, VAD trim, warm Whisper, output),
// the clear errors (no typing tool, no running dictate for --toggle), and --server URL
// against a `parley serve` started here giving the same text as the local model.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/run_parley.h"

namespace {

namespace fs = std::filesystem;
using parley_test::default_tiny_en_dir;
using parley_test::run_parley;

const std::string kJfk = std::string(PARLEY_TEST_DATA) + "/audio/jfk.wav";

bool model_present() { return fs::exists(default_tiny_en_dir() + "/model.bin"); }

std::string socket_arg(const std::string& name) {
  return " --socket " + testing::TempDir() + "/" + name + "-" + std::to_string(::getpid()) +
         ".sock";
}

TEST(DictateCli, InputFileAtSpeedPrintsTheTranscript) {
  if (!model_present()) GTEST_SKIP() << "no tiny.en at " << default_tiny_en_dir();
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_parley("dictate --input " + kJfk + " --speed 20 --model " +
                                default_tiny_en_dir() + socket_arg("file"),
                            true);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.exit_code, 0) << r.output << r.err;
  EXPECT_EQ(r.output,
            "And so my fellow Americans ask not what your country can do for you ask what you "
            "can do for your country.\n")
      << r.err;
  EXPECT_GT(s, 11.0 / 20);  // streamed, not read at once
}

TEST(DictateCli, TypeWithoutATypingToolIsAClearError) {
  const std::string saved = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", (testing::TempDir() + "/no-tools-here").c_str(), 1);
  const auto r = run_parley("dictate --input " + kJfk + " --output type" + socket_arg("type"));
  ::setenv("PATH", saved.c_str(), 1);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--output type: no typing tool on PATH (looked for "), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("wtype"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("xdotool"), std::string::npos) << r.output;
}

TEST(DictateCli, ToggleWithoutARunningDictateIsAClearError) {
  const auto r = run_parley("dictate --toggle" + socket_arg("nobody"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("no running `parley dictate` to toggle"), std::string::npos) << r.output;
}

TEST(DictateCli, MicrophoneOrItsAbsenceIsReportedClearly) {
  // A build without PortAudio, or a machine without an input device (CI): either way a
  // sentence that says what to do, never a crash.
  const auto r = run_parley("dictate --vad off" + socket_arg("mic") + " </dev/null");
  EXPECT_NE(r.exit_code, -1) << r.output;
  if (r.exit_code != 0) {
    EXPECT_TRUE(r.output.find("built without PortAudio; use --input FILE") != std::string::npos ||
                r.output.find("[dictate] microphone:") != std::string::npos)
        << r.output;
  }
}

// A running dictate stopped by `parley dictate --toggle` from another process (what a
// desktop shortcut runs): the reply says so, and only the audio before the toggle is
// transcribed (jfk.wav at 2x: the toggle lands in its first few seconds).
TEST(DictateCli, ToggleStopsARunningDictate) {
  if (!model_present()) GTEST_SKIP() << "no tiny.en at " << default_tiny_en_dir();
  const std::string sock = testing::TempDir() + "/toggle-" + std::to_string(::getpid()) + ".sock";
  const std::string out = testing::TempDir() + "/toggle-out-" + std::to_string(::getpid());
  const std::string cmd = std::string(PARLEY_BINARY_DIR) + "/parley dictate --input " + kJfk +
                          " --speed 2 --model " + default_tiny_en_dir() + " --socket " + sock +
                          " >" + out + " 2>&1";
  FILE* dictate = popen(cmd.c_str(), "r");
  ASSERT_NE(dictate, nullptr);
  // The socket appears once the model is loaded and the stream starts.
  for (int i = 0; i < 200 && !fs::exists(sock); ++i) ::usleep(50000);
  ASSERT_TRUE(fs::exists(sock));
  ::usleep(2500000);  // 5 s of audio at 2x: "And so my fellow Americans ask not"
  const auto toggle = run_parley("dictate --toggle --socket " + sock);
  EXPECT_EQ(toggle.exit_code, 0) << toggle.output;
  EXPECT_EQ(toggle.output, "stopped\n");
  EXPECT_EQ(pclose(dictate), 0);
  std::ifstream f(out);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_NE(text.str().find("And so my fellow Americans"), std::string::npos) << text.str();
  EXPECT_EQ(text.str().find("for your country"), std::string::npos) << text.str();
  EXPECT_FALSE(fs::exists(sock));  // removed at exit
}

// `parley serve` on a free port, its URL read from its start-up line.
class Server {
 public:
  explicit Server(const std::string& model) {
    int out[2];
    EXPECT_EQ(::pipe(out), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::dup2(out[1], 2);
      ::close(out[0]);
      const std::string bin = std::string(PARLEY_BINARY_DIR) + "/parley";
      ::execl(bin.c_str(), bin.c_str(), "serve", "--model", model.c_str(), "--host", "127.0.0.1",
              "--port", "0", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    out_ = ::fdopen(out[0], "r");
    char line[4096];
    while (out_ && std::fgets(line, sizeof line, out_)) {
      const std::string s = line;
      log_ += s;
      const size_t at = s.find("listening on http://");
      if (at != std::string::npos) {
        url_ = s.substr(at + 13);
        url_ = url_.substr(0, url_.find_first_of(" \n"));
        break;
      }
    }
  }
  ~Server() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_) std::fclose(out_);
  }
  const std::string& url() const { return url_; }
  const std::string& log() const { return log_; }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  std::string url_, log_;
};

TEST(DictateCli, ServerUrlGivesTheSameTextAsTheLocalModel) {
  if (!model_present()) GTEST_SKIP() << "no tiny.en at " << default_tiny_en_dir();
  const auto local = run_parley("dictate --input " + kJfk + " --speed 20 --model " +
                                    default_tiny_en_dir() + socket_arg("local"),
                                true);
  ASSERT_EQ(local.exit_code, 0) << local.err;
  Server server(default_tiny_en_dir());
  ASSERT_FALSE(server.url().empty()) << server.log();
  const auto remote = run_parley(
      "dictate --input " + kJfk + " --speed 20 --server " + server.url() + socket_arg("remote"),
      true);
  ASSERT_EQ(remote.exit_code, 0) << remote.output << remote.err;
  EXPECT_EQ(remote.output, local.output);
  EXPECT_NE(remote.output.find("ask not what your country can do for you"), std::string::npos);

  // Nothing listening: a clear error, not a hang.
  const auto none = run_parley("dictate --input " + kJfk +
                               " --speed 50 --server http://127.0.0.1:1" + socket_arg("none"));
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.output.find("cannot connect to 127.0.0.1:1"), std::string::npos) << none.output;
}

}  // namespace
