#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace parley::server {

std::string ApiError::to_json() const {
  nlohmann::json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (param) e["param"] = *param;
  if (code) e["code"] = *code;
  return nlohmann::json{{"error", e}}.dump();
}

ApiError bad_request(std::string message, std::optional<std::string> param,
                     std::optional<std::string> code) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param),
                  std::move(code)};
}

ApiError from_error(const Error& e) {
  switch (e.kind()) {
    case ErrorKind::invalid_argument: return bad_request(e.what(), std::nullopt, "invalid_value");
    case ErrorKind::unsupported: return bad_request(e.what(), std::nullopt, "unsupported");
    case ErrorKind::not_found:
      return ApiError{404, e.what(), "invalid_request_error", std::nullopt, "not_found"};
    case ErrorKind::resource_exhausted:
      return ApiError{413, e.what(), "invalid_request_error", std::nullopt, "audio_too_long"};
    case ErrorKind::cancelled:
      return ApiError{499, e.what(), "invalid_request_error", std::nullopt, "cancelled"};
    case ErrorKind::internal: break;
  }
  return ApiError{500, e.what(), "server_error", std::nullopt, "internal_error"};
}

}  // namespace parley::server
