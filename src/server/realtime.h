// OpenAI's Realtime transcription API over WebSocket (docs/SERVER.md "Realtime
// transcription"): GET /v1/realtime?intent=transcription upgrades to a WebSocket carrying
// one RealtimeSession (realtime_session.h); POST /v1/realtime/client_secrets makes ephemeral
// keys (`ek_...`) that a browser may use in place of the server's --api-key. http_server.cpp
// authenticates and routes here; Beast's WebSocket stays in realtime.cpp.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "server/realtime_session.h"

namespace parley::server {

class RealtimeConnection;

// The credentials of a realtime handshake as "Bearer TOKEN": the Authorization header, or
// (browsers cannot set headers on a WebSocket) the key of an `openai-insecure-api-key.KEY`
// entry in Sec-WebSocket-Protocol, as OpenAI's browser clients send it; "" without either.
std::string realtime_authorization(
    const boost::beast::http::request<boost::beast::http::string_body>& request);

class RealtimeHub {
 public:
  // api_key: the server's --api-key (empty: no authentication, keys are still issued).
  RealtimeHub(WhisperService& service, std::string api_key);

  // POST /v1/realtime/client_secrets: {status, JSON body} (OpenAI's shape or its error).
  std::pair<int, std::string> create_client_secret(std::string_view body);

  // Whether `authorization` ("Bearer TOKEN") may open a realtime session: the API key or
  // an unexpired ephemeral key (any value without --api-key).
  bool authorized(std::string_view authorization);

  // Upgrades the request's connection to a WebSocket and runs a session on it.
  void accept(boost::asio::ip::tcp::socket socket,
              boost::beast::http::request<boost::beast::http::string_body> request);

  // Drain: every open connection is closed (1001 going away).
  void close_all();

  RealtimeContext& context() { return ctx_; }

 private:
  friend class RealtimeConnection;
  struct Secret {
    std::chrono::system_clock::time_point expires;
    nlohmann::json session;  // the GA session it presets
  };
  // The preset of an ephemeral key ("Bearer ek_..."), null for the API key or none.
  nlohmann::json preset(std::string_view authorization);
  void forget(RealtimeConnection* c);

  RealtimeContext ctx_;
  std::string api_key_;
  std::mutex mu_;
  std::map<std::string, Secret> secrets_;
  std::vector<std::weak_ptr<RealtimeConnection>> connections_;
};

}  // namespace parley::server
