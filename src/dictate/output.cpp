// The output sinks of `parley dictate` (output.h).
#include "dictate/output.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <sstream>

#include "engine/error.h"

extern char** environ;

namespace parley::dictate {
namespace {

struct Tool {
  const char* name;
  std::vector<std::string> args;  // after the tool's path, before the text
  bool stdin_text;
};

std::vector<Tool> candidates(OutputKind kind, bool wayland) {
  if (kind == OutputKind::clipboard) {
    Tool wl{"wl-copy", {}, true}, x{"xclip", {"-selection", "clipboard"}, true};
    return wayland ? std::vector<Tool>{wl, x} : std::vector<Tool>{x, wl};
  }
  Tool wt{"wtype", {"--"}, false}, yd{"ydotool", {"type", "--"}, false},
      xd{"xdotool", {"type", "--clearmodifiers", "--"}, false};
  return wayland ? std::vector<Tool>{wt, yd, xd} : std::vector<Tool>{xd, yd, wt};
}

}  // namespace

OutputKind parse_output_kind(const std::string& s) {
  if (s == "stdout") return OutputKind::stdout_text;
  if (s == "clipboard") return OutputKind::clipboard;
  if (s == "type") return OutputKind::type;
  throw Error(ErrorKind::invalid_argument,
              "[dictate] --output " + s + ": expected stdout, clipboard or type");
}

std::optional<std::string> find_on_path(const std::string& name, const std::string& path_env) {
  std::stringstream dirs(path_env);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::string file = dir + "/" + name;
    if (::access(file.c_str(), X_OK) == 0) return file;
  }
  return std::nullopt;
}

OutputCommand output_command(OutputKind kind, const std::string& path_env, bool wayland) {
  if (kind == OutputKind::stdout_text) return {};
  std::string names;
  for (const Tool& t : candidates(kind, wayland)) {
    if (const auto file = find_on_path(t.name, path_env)) {
      OutputCommand c;
      c.argv.push_back(*file);
      c.argv.insert(c.argv.end(), t.args.begin(), t.args.end());
      c.stdin_text = t.stdin_text;
      return c;
    }
    names += std::string(names.empty() ? "" : ", ") + t.name;
  }
  const bool type = kind == OutputKind::type;
  throw Error(
      ErrorKind::not_found,
      std::string("[dictate] --output ") + (type ? "type" : "clipboard") + ": no " +
          (type ? "typing" : "clipboard") + " tool on PATH (looked for " + names +
          "); install one (" +
          (type ? "wtype for Wayland, xdotool for X11, or ydotool" : "wl-clipboard or xclip") +
          "), or use --output stdout");
}

void deliver(const OutputCommand& command, const std::string& text) {
  if (command.argv.empty()) {
    std::cout << text << std::endl;
    return;
  }
  std::vector<std::string> args = command.argv;
  if (!command.stdin_text) args.push_back(text);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int pipe_fds[2] = {-1, -1};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (command.stdin_text) {
    check(::pipe2(pipe_fds, O_CLOEXEC) == 0, ErrorKind::internal,
          std::string("[dictate] pipe: ") + std::strerror(errno));
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[0], 0);
  }
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (command.stdin_text) {
    ::close(pipe_fds[0]);
    if (rc == 0) {
      size_t off = 0;
      while (off < text.size()) {
        const ssize_t n = ::write(pipe_fds[1], text.data() + off, text.size() - off);
        if (n <= 0) break;
        off += size_t(n);
      }
    }
    ::close(pipe_fds[1]);
  }
  check(rc == 0, ErrorKind::internal,
        "[dictate] cannot run " + command.argv[0] + ": " + std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  check(WIFEXITED(status) && WEXITSTATUS(status) == 0, ErrorKind::internal,
        "[dictate] " + command.argv[0] + " failed (exit status " +
            std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
}

}  // namespace parley::dictate
