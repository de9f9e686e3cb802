// The HTTP server behind `parley serve` (Boost.Beast over Asio; Beast stays inside
// http_server.cpp). Routes: POST /v1/audio/transcriptions, POST /v1/audio/translations
// (JSON or SSE), POST /v1/chat/completions and /v1/completions (with a chat model; JSON or
// SSE), GET /v1/models, GET /v1/models/{id}, GET /health, GET /metrics, and CORS preflight;
// /v1/audio/sessions (session_routes.h); /v1/realtime and /v1/realtime/client_secrets
// (realtime.h, whose WebSocket lives in realtime.cpp). docs/SERVER.md is the user's
// description.
#pragma once

#include <cstdint>
#include <string>

#include "serving/audio_sessions.h"
#include "serving/chat_service.h"
#include "serving/whisper_service.h"

namespace parley::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;      // 0: any free port (printed at start-up)
  std::string api_key;  // empty: no authentication
  uint64_t max_body_bytes = 25ull << 20;
  // Asio threads (parsing, writing, and each Realtime stream's VAD); decoding runs on the
  // services' engines. --io-threads.
  int io_threads = 2;
  std::string cors_origin = "*";
};

// Serves until SIGINT or SIGTERM, then stops accepting, finishes every admitted request
// (streams included), closes idle connections and returns. Prints
// "parley serve: listening on http://HOST:PORT" once the socket is bound.
// chat: the chat model's service, or null (the chat routes answer 404 model_not_found).
// sessions: /v1/audio/sessions (session_routes.h), or null (those routes answer 404).
void serve_http(const ServerOptions& options, WhisperService& service, ChatService* chat = nullptr,
                AudioSessions* sessions = nullptr);

}  // namespace parley::server
