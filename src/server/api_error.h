// The HTTP edge's error translation: a parley::Error (or a request the server refuses on
// its own: a missing key, a full queue, a body over the limit) becomes one HTTP status and
// OpenAI's error document {"error": {"message", "type", "param", "code"}}. This is the one
// place ErrorKind meets HTTP.
#pragma once

#include <optional>
#include <string>

#include "engine/error.h"

namespace parley::server {

struct ApiError {
  int status = 500;
  std::string message;
  std::string type = "server_error";  // invalid_request_error | authentication_error | ...
  std::optional<std::string> param;   // the request field at fault
  std::optional<std::string> code;    // a short machine-readable reason

  std::string to_json() const;
};

// 400 invalid_request_error, naming the field at fault.
ApiError bad_request(std::string message, std::optional<std::string> param = std::nullopt,
                     std::optional<std::string> code = std::nullopt);

// invalid_argument, unsupported -> 400; not_found -> 404; resource_exhausted -> 413 (audio
// longer than the server accepts); cancelled -> 499 (never written: the client is gone);
// internal -> 500.
ApiError from_error(const Error& e);

// Thrown by request parsing: an ApiError to answer with.
class ApiException : public std::exception {
 public:
  explicit ApiException(ApiError e) : error_(std::move(e)) {}
  const ApiError& error() const { return error_; }
  const char* what() const noexcept override { return error_.message.c_str(); }

 private:
  ApiError error_;
};

}  // namespace parley::server
