// The WebSocket side of a realtime session: reads client events as text frames and hands
// them to the RealtimeSession on the connection's strand, writes its events one frame at a
// time from a queue. The engine thread never waits here: job callbacks post to the strand.
#include "server/realtime.h"

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <random>

#include "server/api_error.h"
#include "vad/silero.h"

namespace parley::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using nlohmann::json;

namespace {

constexpr int64_t kDefaultTtl = 600;       // OpenAI's: 10 minutes
constexpr size_t kMaxMessage = 16u << 20;  // OpenAI accepts 15 MiB appends

std::string bearer(std::string_view authorization) {
  constexpr std::string_view kPrefix = "Bearer ";
  if (authorization.substr(0, kPrefix.size()) != kPrefix) return "";
  return std::string(authorization.substr(kPrefix.size()));
}

std::string random_key() {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device rd;  // /dev/urandom
  std::string k = "ek_";
  for (int i = 0; i < 32; ++i) k += kAlphabet[rd() % 62];
  return k;
}

std::shared_ptr<const vad::SileroModel> load_vad(const WhisperService& service) {
  const std::string& path = service.options().vad_model;
  return path.empty() ? nullptr : vad::SileroModel::load(path);
}

// The Sec-WebSocket-Protocol entries of a handshake (comma-separated tokens).
std::vector<std::string> subprotocols(const http::request<http::string_body>& req) {
  std::vector<std::string> out;
  const auto header = req[http::field::sec_websocket_protocol];
  std::string_view list(header.data(), header.size());
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return out;
}

}  // namespace

std::string realtime_authorization(const http::request<http::string_body>& req) {
  const auto auth = req[http::field::authorization];
  if (!auth.empty()) return std::string(auth);
  constexpr std::string_view kKeyPrefix = "openai-insecure-api-key.";
  for (const std::string& p : subprotocols(req))
    if (p.rfind(kKeyPrefix, 0) == 0) return "Bearer " + p.substr(kKeyPrefix.size());
  return "";
}

class RealtimeConnection : public std::enable_shared_from_this<RealtimeConnection> {
 public:
  RealtimeConnection(net::ip::tcp::socket socket, RealtimeHub& hub)
      : ws_(std::move(socket)), hub_(hub) {}
  ~RealtimeConnection() { hub_.forget(this); }

  void run(http::request<http::string_body> req) {
    const auto protocols = subprotocols(req);
    const auto offered = [&](std::string_view p) {
      return std::find(protocols.begin(), protocols.end(), p) != protocols.end();
    };
    const bool beta = req["OpenAI-Beta"].find("realtime=v1") != beast::string_view::npos ||
                      offered("openai-beta.realtime-v1");
    json preset = hub_.preset(realtime_authorization(req));
    // A browser that offers subprotocols fails the handshake unless one is chosen.
    const bool realtime_protocol = offered("realtime");
    ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
    ws_.set_option(
        websocket::stream_base::decorator([realtime_protocol](websocket::response_type& res) {
          res.set(http::field::server, "parley");
          if (realtime_protocol) res.set(http::field::sec_websocket_protocol, "realtime");
        }));
    ws_.read_message_max(kMaxMessage);
    std::weak_ptr<RealtimeConnection> weak = weak_from_this();
    auto emit = [weak](std::string event) {
      if (auto c = weak.lock()) c->write(std::move(event));
    };
    auto post = [weak](std::function<void()> fn) {
      if (auto c = weak.lock()) net::post(c->ws_.get_executor(), [c, fn = std::move(fn)] { fn(); });
    };
    session_ = std::make_shared<RealtimeSession>(hub_.context(), beta, emit, post, preset);
    ws_.async_accept(req, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->session_->close();
      self->session_->start();
      self->read();
    });
  }

  void close_going_away() {
    net::post(ws_.get_executor(), [self = shared_from_this()] {
      if (self->closing_) return;
      self->closing_ = true;
      self->session_->close();
      self->ws_.async_close(websocket::close_code::going_away, [self](beast::error_code) {});
    });
  }

 private:
  void read() {
    ws_.async_read(in_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) {  // closed, reset, timed out, a frame over the limit: the session ends
        self->session_->close();
        return;
      }
      if (self->ws_.got_text()) {
        const auto data = self->in_.cdata();
        self->session_->on_text(
            std::string_view(static_cast<const char*>(data.data()), data.size()));
      } else {
        self->session_->on_binary();
      }
      self->in_.consume(self->in_.size());
      self->read();
    });
  }

  void write(std::string event) {
    if (closing_) return;
    out_.push_back(std::move(event));
    if (out_.size() == 1) write_next();
  }

  void write_next() {
    ws_.text(true);
    ws_.async_write(net::buffer(out_.front()),
                    [self = shared_from_this()](beast::error_code ec, size_t) {
                      if (ec) {
                        self->session_->close();
                        self->out_.clear();
                        return;
                      }
                      self->out_.pop_front();
                      if (!self->out_.empty()) self->write_next();
                    });
  }

  websocket::stream<beast::tcp_stream> ws_;
  RealtimeHub& hub_;
  std::shared_ptr<RealtimeSession> session_;
  beast::flat_buffer in_;
  std::deque<std::string> out_;
  bool closing_ = false;
};

RealtimeHub::RealtimeHub(WhisperService& service, std::string api_key)
    : ctx_{service, load_vad(service), service.model_id()}, api_key_(std::move(api_key)) {}

nlohmann::json RealtimeHub::preset(std::string_view authorization) {
  const std::string token = bearer(authorization);
  std::lock_guard lock(mu_);
  auto it = secrets_.find(token);
  if (it == secrets_.end()) return nullptr;
  return it->second.session;
}

bool RealtimeHub::authorized(std::string_view authorization) {
  if (api_key_.empty()) return true;
  const std::string token = bearer(authorization);
  if (token.empty()) return false;
  if (token == api_key_) return true;
  std::lock_guard lock(mu_);
  const auto now = std::chrono::system_clock::now();
  std::erase_if(secrets_, [&](const auto& kv) { return kv.second.expires <= now; });
  return secrets_.count(token) > 0;
}

std::pair<int, std::string> RealtimeHub::create_client_secret(std::string_view body) {
  try {
    json req = body.empty() ? json::object() : json::parse(body, nullptr, false);
    if (req.is_discarded() || !req.is_object())
      throw ApiException(bad_request("[realtime] the body is not a JSON object"));
    int64_t ttl = kDefaultTtl;
    if (auto it = req.find("expires_after"); it != req.end() && !it->is_null()) {
      const json& e = *it;
      if (!e.is_object() || (e.contains("anchor") && e["anchor"] != "created_at"))
        throw ApiException(bad_request("[realtime] expires_after.anchor must be 'created_at'",
                                       "expires_after.anchor", "invalid_value"));
      if (e.contains("seconds")) {
        if (!e["seconds"].is_number_integer() || e["seconds"].get<int64_t>() < 10 ||
            e["seconds"].get<int64_t>() > 7200)
          throw ApiException(
              bad_request("[realtime] expires_after.seconds must be an integer from 10 to 7200",
                          "expires_after.seconds", "invalid_value"));
        ttl = e["seconds"].get<int64_t>();
      }
    }
    RealtimeConfig config;
    if (!ctx_.vad) config.server_vad = false;
    json preset = nullptr;
    if (auto it = req.find("session"); it != req.end() && !it->is_null()) {
      RealtimeSession::apply_ga(*it, config, ctx_);  // throws naming the field at fault
      preset = *it;
    }
    const auto expires = std::chrono::system_clock::now() + std::chrono::seconds(ttl);
    const int64_t expires_at =
        std::chrono::duration_cast<std::chrono::seconds>(expires.time_since_epoch()).count();
    const std::string key = random_key();
    {
      std::lock_guard lock(mu_);
      secrets_[key] = Secret{expires, preset};
    }
    json session = RealtimeSession::ga_session(config, "sess_" + key.substr(3, 21));
    session["expires_at"] = expires_at;
    json answer = {{"value", key}, {"expires_at", expires_at}, {"session", session}};
    return {200, answer.dump()};
  } catch (const ApiException& e) {
    return {e.error().status, e.error().to_json()};
  }
}

void RealtimeHub::accept(net::ip::tcp::socket socket, http::request<http::string_body> request) {
  auto c = std::make_shared<RealtimeConnection>(std::move(socket), *this);
  {
    std::lock_guard lock(mu_);
    std::erase_if(connections_, [](const auto& w) { return w.expired(); });
    connections_.push_back(c);
  }
  c->run(std::move(request));
}

void RealtimeHub::forget(RealtimeConnection*) {
  std::lock_guard lock(mu_);
  std::erase_if(connections_, [](const auto& w) { return w.expired(); });
}

void RealtimeHub::close_all() {
  std::vector<std::shared_ptr<RealtimeConnection>> open;
  {
    std::lock_guard lock(mu_);
    for (auto& w : connections_)
      if (auto c = w.lock()) open.push_back(std::move(c));
  }
  for (auto& c : open) c->close_going_away();
}

}  // namespace parley::server
