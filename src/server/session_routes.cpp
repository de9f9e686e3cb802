#include "server/session_routes.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "server/api_error.h"
#include "server/audio_request.h"
#include "server/multipart.h"
#include "whisper/formats.h"

namespace parley::server {
namespace {

constexpr std::string_view kPrefix = "/v1/audio/sessions";

using Fields = std::map<std::string, std::string>;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

std::string media_type(const std::string& content_type) {
  std::string t = lower(content_type.substr(0, content_type.find(';')));
  t.erase(std::remove_if(t.begin(), t.end(), [](unsigned char c) { return std::isspace(c); }),
          t.end());
  return t;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string url_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() + 0 && hex_value(s[i + 1]) >= 0 &&
               hex_value(s[i + 2]) >= 0) {
      out += char(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// name=value&... (a query string or an x-www-form-urlencoded body).
Fields parse_urlencoded(std::string_view s) {
  Fields f;
  while (!s.empty()) {
    const size_t amp = s.find('&');
    const std::string_view pair = s.substr(0, amp);
    if (!pair.empty()) {
      const size_t eq = pair.find('=');
      f[url_decode(pair.substr(0, eq))] =
          eq == std::string_view::npos ? "" : url_decode(pair.substr(eq + 1));
    }
    if (amp == std::string_view::npos) break;
    s.remove_prefix(amp + 1);
  }
  return f;
}

// The create request's fields as strings, from any of the bodies it takes.
Fields create_fields(const SessionHttpRequest& req) {
  const std::string type = media_type(req.content_type);
  if (req.body.empty()) return {};
  if (type == "application/json") {
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(req.body);
    } catch (const nlohmann::json::exception& e) {
      throw ApiException(bad_request(std::string("[request] body is not valid JSON: ") + e.what(),
                                     std::nullopt, "invalid_json"));
    }
    if (!doc.is_object()) throw ApiException(bad_request("[request] JSON body must be an object"));
    Fields f;
    for (const auto& [key, value] : doc.items()) {
      if (value.is_null()) continue;
      if (value.is_object() || value.is_array()) {
        throw ApiException(bad_request("[request] '" + key + "' must be a string or a number", key,
                                       "invalid_value"));
      }
      f[key] = value.is_string() ? value.get<std::string>() : value.dump();
    }
    return f;
  }
  if (type == "multipart/form-data") {
    Fields f;
    try {
      for (const auto& p : parse_multipart(req.body, multipart_boundary(req.content_type)))
        f[p.name] = std::string(p.data);
    } catch (const Error& e) {
      throw ApiException(bad_request(e.what(), std::nullopt, "invalid_multipart"));
    }
    return f;
  }
  if (type == "application/x-www-form-urlencoded") return parse_urlencoded(req.body);
  throw ApiException(ApiError{415,
                              "[request] a session is created with a JSON, form or empty body; "
                              "got Content-Type '" +
                                  type + "'",
                              "invalid_request_error", std::nullopt, "unsupported_media_type"});
}

SessionConfig parse_create(const SessionHttpRequest& req, const std::string& model_id) {
  static const std::vector<std::string> known = {"model",       "language",        "prompt",
                                                 "temperature", "response_format", "input_format",
                                                 "sample_rate", "filename",        "commit"};
  const Fields f = create_fields(req);
  for (const auto& [key, value] : f) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      throw ApiException(
          bad_request("Unrecognized request argument supplied: " + key, key, "unknown_parameter"));
    }
  }
  const auto get = [&](const char* k) -> std::optional<std::string> {
    const auto it = f.find(k);
    if (it == f.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
  SessionConfig c;
  c.model = get("model").value_or(model_id);
  if (c.model != model_id && c.model != "whisper-1") {
    throw ApiException(ApiError{404,
                                "The model '" + c.model + "' does not exist; this server serves '" +
                                    model_id + "' (also as 'whisper-1')",
                                "invalid_request_error", "model", "model_not_found"});
  }
  c.language = get("language");
  c.prompt = get("prompt");
  if (const auto v = get("temperature")) {
    const double t = parse_number(*v, "temperature");
    if (t < 0 || t > 1) {
      throw ApiException(bad_request("[request] 'temperature' must be in [0, 1], got " + *v,
                                     "temperature", "invalid_value"));
    }
    c.temperature = float(t);
  }
  if (const auto v = get("response_format")) {
    check_response_format(*v);
    c.response_format = *v;
  }
  const std::string input = get("input_format").value_or("container");
  if (input == "pcm16") {
    c.input = SessionInput::pcm16;
  } else if (input == "f32") {
    c.input = SessionInput::f32;
  } else if (input != "container") {
    throw ApiException(bad_request(
        "[request] 'input_format' must be 'container' (any file FFmpeg reads), 'pcm16' or "
        "'f32' (raw little-endian mono samples at 'sample_rate'); got '" +
            input + "'",
        "input_format", "invalid_value"));
  }
  if (const auto v = get("sample_rate")) {
    if (c.input == SessionInput::container) {
      throw ApiException(bad_request(
          "[request] 'sample_rate' is for raw PCM (input_format pcm16 or f32); a container "
          "says its own rate",
          "sample_rate", "invalid_value"));
    }
    const double r = parse_number(*v, "sample_rate");
    if (r != std::floor(r) || r < 1000 || r > 384000) {
      throw ApiException(
          bad_request("[request] 'sample_rate' must be an integer in [1000, "
                      "384000] Hz, got " +
                          *v,
                      "sample_rate", "invalid_value"));
    }
    c.sample_rate = int(r);
  } else if (c.input != SessionInput::container) {
    throw ApiException(
        bad_request("[request] raw PCM (input_format " + input + ") needs its 'sample_rate' in Hz",
                    "sample_rate", "missing_value"));
  }
  c.filename = get("filename").value_or("");
  if (const auto v = get("commit")) {
    try {
      c.commit = commit_from_name(*v);
    } catch (const Error& e) {
      throw ApiException(bad_request(e.what(), "commit", "invalid_value"));
    }
  }
  return c;
}

const char* input_name(SessionInput i) {
  return i == SessionInput::pcm16 ? "pcm16" : i == SessionInput::f32 ? "f32" : "container";
}

std::string status_json(const SessionStatus& s) {
  nlohmann::json j = {{"id", s.id},
                      {"object", "audio.session"},
                      {"status", s.state},
                      {"model", s.config.model},
                      {"created_at", s.created_at},
                      {"input_format", input_name(s.config.input)},
                      {"response_format", s.config.response_format},
                      {"commit", commit_name(s.config.commit.value_or(SessionCommit::windows))},
                      {"language", nullptr},
                      {"bytes_received", s.bytes_received},
                      {"seconds_received", s.seconds_received},
                      {"seconds_transcribed", s.seconds_transcribed},
                      {"text", s.text},
                      {"expires_in", std::lround(s.idle_expires_in_s)}};
  if (s.config.input != SessionInput::container) j["sample_rate"] = s.config.sample_rate;
  if (!s.language.empty()) j["language"] = s.language;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string strip(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

SessionHttpAnswer transcript_answer(const SessionResult& r, const std::string& format) {
  SessionHttpAnswer a;
  if (format == "text") {
    a.body = strip(r.result.text) + "\n";
    a.content_type = "text/plain; charset=utf-8";
    return a;
  }
  const OutputFormat f = parse_output_format(format);
  TranscriptInfo info;
  info.duration = r.duration;
  info.usage = true;
  a.body = format_transcript(r.result, f, info);
  a.content_type = (f == OutputFormat::json || f == OutputFormat::verbose_json)
                       ? "application/json"
                       : "text/plain; charset=utf-8";
  return a;
}

SessionHttpAnswer ok(std::string body) {
  SessionHttpAnswer a;
  a.body = std::move(body);
  return a;
}

SessionHttpAnswer error_answer(const ApiError& e, std::string kind) {
  return {e.status, e.to_json(), "application/json", std::move(kind), ""};
}

// `during`: what the request did, for a resource_exhausted error's status.
SessionHttpAnswer error_answer(const Error& e, std::string_view during) {
  const std::string kind(to_string(e.kind()));
  switch (e.kind()) {
    case ErrorKind::not_found:
      return error_answer(
          ApiError{404, e.what(), "invalid_request_error", "session_id", "session_not_found"},
          kind);
    case ErrorKind::resource_exhausted:
      if (during == "create")
        return error_answer(
            ApiError{429, e.what(), "server_error", std::nullopt, "too_many_sessions"}, kind);
      return error_answer(
          ApiError{413, e.what(), "invalid_request_error", std::nullopt, "session_too_large"},
          kind);
    case ErrorKind::cancelled:
      return error_answer(ApiError{503, e.what(), "server_error", std::nullopt, "shutting_down"},
                          "shutting_down");
    default: return error_answer(from_error(e), kind);
  }
}

SessionHttpAnswer method_not_allowed(const char* allowed) {
  SessionHttpAnswer a =
      error_answer(ApiError{405, std::string("Method not allowed; use ") + allowed,
                            "invalid_request_error", std::nullopt, "method_not_allowed"},
                   "bad_request");
  a.allow = allowed;
  return a;
}

}  // namespace

bool is_session_route(std::string_view path) {
  return path == kPrefix ||
         (path.starts_with(kPrefix) && path.size() > kPrefix.size() && path[kPrefix.size()] == '/');
}

void handle_session_route(AudioSessions& sessions, const std::string& model_id,
                          SessionHttpRequest req, std::function<void(SessionHttpAnswer)> answer) {
  const size_t q = req.target.find('?');
  const std::string path = req.target.substr(0, q);
  const Fields query = q == std::string::npos
                           ? Fields{}
                           : parse_urlencoded(std::string_view(req.target).substr(q + 1));
  // /v1/audio/sessions[/{id}[/{action}]]
  std::string rest = path.substr(kPrefix.size());
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  std::string id, action;
  if (!rest.empty()) {
    rest.erase(0, 1);
    const size_t slash = rest.find('/');
    id = rest.substr(0, slash);
    if (slash != std::string::npos) action = rest.substr(slash + 1);
  }
  const std::string& m = req.method;
  std::string_view during = "request";
  try {
    if (id.empty()) {
      if (m != "POST") return answer(method_not_allowed("POST"));
      during = "create";
      const SessionConfig c = parse_create(req, model_id);
      return answer(ok(status_json(sessions.create(c))));
    }
    if (action.empty()) {
      if (m == "GET" || m == "HEAD") return answer(ok(status_json(sessions.status(id))));
      if (m == "DELETE") {
        sessions.remove(id);
        const nlohmann::json j = {
            {"id", id}, {"object", "audio.session.deleted"}, {"deleted", true}};
        return answer(ok(j.dump()));
      }
      return answer(method_not_allowed("GET, DELETE"));
    }
    if (action == "audio") {
      if (m != "POST") return answer(method_not_allowed("POST"));
      during = "append";
      const auto* p = reinterpret_cast<const uint8_t*>(req.body.data());
      return answer(ok(status_json(sessions.append(id, {p, req.body.size()}))));
    }
    if (action == "close") {
      if (m != "POST") return answer(method_not_allowed("POST"));
      std::string format;
      if (const auto it = query.find("response_format"); it != query.end()) {
        check_response_format(it->second);
        format = it->second;
      }
      sessions.close(id, [answer, format](std::shared_ptr<const SessionResult> r,
                                          std::exception_ptr ep) {
        if (!ep)
          return answer(transcript_answer(*r, format.empty() ? r->config.response_format : format));
        try {
          std::rethrow_exception(ep);
        } catch (const Error& e) {
          answer(error_answer(e, "close"));
        } catch (const std::exception& e) {
          answer(error_answer(ApiError{500, std::string("[sessions] ") + e.what(), "server_error",
                                       std::nullopt, "internal_error"},
                              "internal"));
        }
      });
      return;
    }
    return answer(error_answer(ApiError{404, "Invalid URL (" + m + " " + path + ")",
                                        "invalid_request_error", std::nullopt, "unknown_url"},
                               "not_found"));
  } catch (const ApiException& e) {
    return answer(error_answer(e.error(), "bad_request"));
  } catch (const Error& e) {
    return answer(error_answer(e, during));
  } catch (const std::exception& e) {
    return answer(error_answer(ApiError{500, std::string("[sessions] ") + e.what(), "server_error",
                                        std::nullopt, "internal_error"},
                               "internal"));
  }
}

}  // namespace parley::server
