// parley::Error: the one exception type thrown inside parley. It carries a kind that
// the edges (CLI exit codes, HTTP status + OpenAI error JSON) translate exactly once.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace parley {

// cancelled: the caller asked to stop (a client that disconnected); not a failure.
enum class ErrorKind {
  invalid_argument,
  not_found,
  unsupported,
  resource_exhausted,
  cancelled,
  internal
};

std::string_view to_string(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// Throws Error(kind, message) when cond is false. Messages name their source:
// "[safetensors] header length 9e18 exceeds file size 1024".
inline void check(bool cond, ErrorKind kind, const std::string& message) {
  if (!cond) throw Error(kind, message);
}
inline void check_arg(bool cond, const std::string& message) {
  if (!cond) throw Error(ErrorKind::invalid_argument, message);
}

}  // namespace parley
