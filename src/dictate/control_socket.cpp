// ControlServer and send_control (control_socket.h): AF_UNIX stream sockets, one command
// line per connection.
#include "dictate/control_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "engine/error.h"

namespace parley::dictate {
namespace {

sockaddr_un unix_address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  check_arg(path.size() < sizeof(a.sun_path), "[dictate] control socket path too long (" +
                                                  std::to_string(path.size()) + " bytes): " + path);
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

// A connected client socket to `path`, or -1 with errno set.
int connect_unix(const std::string& path) {
  const sockaddr_un a = unix_address(path);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

// One line from `fd` (without its newline), waiting at most timeout_s for it.
std::string read_line(int fd, double timeout_s) {
  std::string line;
  char c;
  pollfd p{fd, POLLIN, 0};
  while (line.size() < 256) {
    if (::poll(&p, 1, int(timeout_s * 1000)) <= 0) break;
    const ssize_t n = ::read(fd, &c, 1);
    if (n <= 0 || c == '\n') break;
    line.push_back(c);
  }
  return line;
}

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += size_t(n);
  }
}

}  // namespace

std::string default_control_socket_path() {
  const char* dir = std::getenv("XDG_RUNTIME_DIR");
  if (dir && *dir) return std::string(dir) + "/parley-dictate.sock";
  return "/tmp/parley-dictate-" + std::to_string(::getuid()) + ".sock";
}

ControlServer::ControlServer(std::string path) : path_(std::move(path)) {
  const sockaddr_un a = unix_address(path_);
  if (const int other = connect_unix(path_); other >= 0) {
    ::close(other);
    throw Error(ErrorKind::invalid_argument,
                "[dictate] another `parley dictate` is running (its control socket " + path_ +
                    " answers); stop it first, or use --socket PATH");
  }
  ::unlink(path_.c_str());  // stale: left by a dictate that did not exit cleanly
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  check(fd_ >= 0, ErrorKind::internal, std::string("[dictate] socket: ") + std::strerror(errno));
  const mode_t old = ::umask(0177);  // the socket file is the user's alone
  const int bound = ::bind(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a);
  const int e = errno;
  ::umask(old);
  if (bound != 0 || ::listen(fd_, 8) != 0) {
    ::close(fd_);
    throw Error(ErrorKind::invalid_argument, "[dictate] cannot listen on the control socket " +
                                                 path_ + ": " + std::strerror(bound ? e : errno));
  }
}

ControlServer::~ControlServer() {
  if (fd_ >= 0) ::close(fd_);
  ::unlink(path_.c_str());
}

void ControlServer::poll(const std::function<std::string(const std::string&)>& handle) {
  for (;;) {
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) return;  // EAGAIN: nobody else waiting
    const std::string command = read_line(c, 1.0);
    write_all(c, handle(command) + "\n");
    ::close(c);
  }
}

std::string send_control(const std::string& path, const std::string& command, double timeout_s) {
  const int fd = connect_unix(path);
  if (fd < 0) {
    throw Error(ErrorKind::not_found, "[dictate] no running `parley dictate` to " + command +
                                          ": nothing listens on " + path + " (" +
                                          std::strerror(errno) +
                                          "); start one first with `parley dictate`");
  }
  write_all(fd, command + "\n");
  const std::string reply = read_line(fd, timeout_s);
  ::close(fd);
  check(!reply.empty(), ErrorKind::internal,
        "[dictate] the dictate at " + path + " did not answer " + command);
  return reply;
}

}  // namespace parley::dictate
