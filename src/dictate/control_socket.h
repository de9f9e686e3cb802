// The control socket of `parley dictate`: a UNIX stream socket through which another
// process (`parley dictate --toggle`, bound to a desktop shortcut) starts and stops the
// running dictation. One line per connection: the command ("toggle" or "status"), answered
// with one line ("recording", "stopped", or "error: ...").
#pragma once

#include <functional>
#include <string>

namespace parley::dictate {

// $XDG_RUNTIME_DIR/parley-dictate.sock; without XDG_RUNTIME_DIR,
// /tmp/parley-dictate-<uid>.sock.
std::string default_control_socket_path();

class ControlServer {
 public:
  // Binds `path` (mode 0600). A socket file nobody answers on is stale and replaced;
  // one that answers belongs to a running dictate: Error(invalid_argument) saying so.
  explicit ControlServer(std::string path);
  ~ControlServer();  // closes and removes the socket file
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Serves the connections waiting now (never blocks on an idle socket): reads each one's
  // command line and writes back handle(command) + "\n".
  void poll(const std::function<std::string(const std::string&)>& handle);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// Sends `command` to the dictate listening on `path` and returns its answer line.
// Error(not_found) "no running `parley dictate` ..." when nothing listens there.
std::string send_control(const std::string& path, const std::string& command,
                         double timeout_s = 5.0);

}  // namespace parley::dictate
