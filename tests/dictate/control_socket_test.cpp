// ControlServer / send_control (src/dictate/control_socket.h) over a real UNIX socket.
#include "dictate/control_socket.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "engine/error.h"

namespace parley::dictate {
namespace {

std::string socket_path(const std::string& name) {
  return testing::TempDir() + "/" + name + "-" + std::to_string(::getpid()) + ".sock";
}

TEST(ControlSocket, ToggleReachesTheServerAndItsAnswerComesBack) {
  const std::string path = socket_path("ctl");
  ControlServer server(path);
  bool recording = false;
  std::atomic<bool> done{false};
  std::thread serve([&] {
    while (!done) {
      server.poll([&](const std::string& c) -> std::string {
        if (c == "toggle") recording = !recording;
        return recording ? "recording" : "stopped";
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  EXPECT_EQ(send_control(path, "toggle"), "recording");
  EXPECT_EQ(send_control(path, "status"), "recording");
  EXPECT_EQ(send_control(path, "toggle"), "stopped");
  done = true;
  serve.join();
}

TEST(ControlSocket, NoServerIsAClearError) {
  const std::string path = socket_path("none");
  try {
    send_control(path, "toggle");
    FAIL() << "connected to nothing";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::not_found);
    EXPECT_NE(std::string(e.what()).find("no running `parley dictate`"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(ControlSocket, AStaleFileIsReplacedALiveServerIsNot) {
  const std::string path = socket_path("stale");
  {
    ControlServer first(path);
    EXPECT_TRUE(std::filesystem::exists(path));
    EXPECT_THROW(ControlServer second(path), Error);  // the first one answers
  }
  EXPECT_FALSE(std::filesystem::exists(path));  // removed at exit
  std::ofstream(path) << "left behind";
  ControlServer again(path);  // a file nobody answers on
  EXPECT_EQ((std::filesystem::status(path).permissions() & std::filesystem::perms::all),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

TEST(ControlSocket, DefaultPathIsInTheRuntimeDir) {
  const char* old = std::getenv("XDG_RUNTIME_DIR");
  const std::string saved = old ? old : "";
  ::setenv("XDG_RUNTIME_DIR", "/run/user/4242", 1);
  EXPECT_EQ(default_control_socket_path(), "/run/user/4242/parley-dictate.sock");
  ::unsetenv("XDG_RUNTIME_DIR");
  EXPECT_EQ(default_control_socket_path(),
            "/tmp/parley-dictate-" + std::to_string(::getuid()) + ".sock");
  if (old) ::setenv("XDG_RUNTIME_DIR", saved.c_str(), 1);
}

}  // namespace
}  // namespace parley::dictate
