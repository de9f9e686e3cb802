// The /v1/audio/sessions routes (docs/SERVER.md "Streaming sessions") over AudioSessions:
// request parsing, answers and errors in OpenAI's shape. Kept apart from http_server.cpp,
// which hands every request under /v1/audio/sessions here and writes the answer back.
//
//   POST   /v1/audio/sessions                  create (JSON, form or empty body) -> session
//   POST   /v1/audio/sessions/{id}/audio       append the body (a chunk) -> session
//   GET    /v1/audio/sessions/{id}             session: state, partial transcript, seconds
//   POST   /v1/audio/sessions/{id}/close       the whole transcript (?response_format=)
//   DELETE /v1/audio/sessions/{id}             abort: the session and its audio are deleted
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "serving/audio_sessions.h"

namespace parley::server {

struct SessionHttpRequest {
  std::string method;  // GET, HEAD, POST, DELETE, ...
  std::string target;  // path and query
  std::string content_type;
  std::string body;
};

struct SessionHttpAnswer {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::string error_kind;  // parley_errors_total's label; empty on success
  std::string allow;       // 405: the methods the route takes
};

bool is_session_route(std::string_view path);

// Answers one request under /v1/audio/sessions: `answer` is called exactly once, at once or
// (a close) later from a transcription worker. model_id: the Whisper model's name (a
// create's `model` must be it or "whisper-1").
void handle_session_route(AudioSessions& sessions, const std::string& model_id,
                          SessionHttpRequest req, std::function<void(SessionHttpAnswer)> answer);

}  // namespace parley::server
