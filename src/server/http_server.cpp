// Beast lives in this one translation unit (it is header-heavy). One Session per
// connection, on its own strand; a transcription is handed to WhisperService and its
// callbacks are posted back to the session's strand.
#include "server/http_server.h"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <deque>
#include <functional>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "engine/error.h"
#include "server/api_error.h"
#include "server/audio_request.h"
#include "server/chat_request.h"
#include "server/metrics.h"
#include "server/realtime.h"
#include "server/session_routes.h"
#include "server/web_page.h"
#include "whisper/formats.h"

namespace parley::server {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

class Session;

struct ServerState {
  ServerState(const ServerOptions& o, WhisperService& s, ChatService* c)
      : opt(o), service(s), chat(c) {}
  const ServerOptions& opt;
  WhisperService& service;
  ChatService* chat;                        // null: no chat model
  AudioSessions* audio_sessions = nullptr;  // null: no /v1/audio/sessions
  RealtimeHub* realtime = nullptr;          // /v1/realtime (realtime.h)
  Metrics metrics;
  std::atomic<bool> draining{false};
  std::mutex sessions_mu;
  std::vector<std::weak_ptr<Session>> sessions;
};

std::string json_dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string strip(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// A finished job, formatted on the worker: a body to send, or an error.
struct Outcome {
  bool ok = false;
  bool cancelled = false;
  std::string body;          // response body (non-streaming) or the transcript text
  std::string content_type;  // for body
  ApiError error;
  std::string error_kind;   // for parley_errors_total
  nlohmann::json logprobs;  // streaming with include[]=logprobs: for transcript.text.done
};

Outcome make_outcome(const TranscribeResult* result, double audio_seconds, std::exception_ptr ep,
                     const AudioRequest& req) {
  Outcome o;
  if (ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const Error& e) {
      o.cancelled = e.kind() == ErrorKind::cancelled;
      o.error = from_error(e);
      o.error_kind = std::string(to_string(e.kind()));
    } catch (const std::exception& e) {
      o.error = ApiError{500, std::string("[serve] ") + e.what(), "server_error", std::nullopt,
                         "internal_error"};
      o.error_kind = "internal";
    }
    return o;
  }
  o.ok = true;
  if (req.stream) {
    o.body = result->text;
    if (req.logprobs && !result->logprobs.empty()) {
      o.logprobs = nlohmann::json::parse(logprobs_json(*result));
    }
  } else if (req.response_format == "text") {
    // OpenAI's text format is the transcript itself, not one line per segment.
    o.body = strip(result->text) + "\n";
    o.content_type = "text/plain; charset=utf-8";
  } else {
    const OutputFormat f = output_format(req);
    TranscriptInfo info;
    info.task = req.task;
    info.duration = audio_seconds;
    info.words = req.word_timestamps;
    info.usage = true;
    o.body = format_transcript(*result, f, info);
    o.content_type = (f == OutputFormat::json || f == OutputFormat::verbose_json)
                         ? "application/json"
                         : "text/plain; charset=utf-8";
  }
  return o;
}

std::string sse_event(const nlohmann::json& j) { return "data: " + json_dump(j) + "\n\n"; }

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, ServerState& st) : stream_(std::move(socket)), st_(st) {}

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->do_read(); });
  }
  // Drain: closes the connection when it waits for a request (not while it answers one).
  void close_if_idle() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->idle_) self->close();
    });
  }

 private:
  void do_read() {
    if (closed_) return;
    parser_.emplace();
    parser_->body_limit(st_.opt.max_body_bytes);
    parser_->header_limit(64 * 1024);
    idle_ = true;
    if (st_.draining) {
      close();
      return;
    }
    stream_.expires_after(std::chrono::seconds(300));
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::on_header, shared_from_this()));
  }

  // Headers are in (and Content-Length passed the body limit): answer "Expect:
  // 100-continue" (curl sends it for uploads over 1 MB and waits for it), then the body.
  void on_header(beast::error_code ec, size_t n) {
    if (ec) return on_read(ec, n);
    idle_ = false;
    auto read_body = [self = shared_from_this()] {
      http::async_read(self->stream_, self->buffer_, *self->parser_,
                       beast::bind_front_handler(&Session::on_read, self));
    };
    if (beast::iequals(parser_->get()[http::field::expect], "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(stream_, net::buffer(kContinue),
                       [self = shared_from_this(), read_body](beast::error_code wec, size_t) {
                         if (wec) return self->close();
                         read_body();
                       });
      return;
    }
    read_body();
  }

  void on_read(beast::error_code ec, size_t) {
    idle_ = false;
    keep_alive_ = false;
    route_ = "other";
    if (ec == http::error::body_limit) {
      send_error(ApiError{413,
                          "[serve] request body exceeds the server's limit of " +
                              std::to_string(st_.opt.max_body_bytes >> 20) +
                              " MB (parley serve --max-body-mb)",
                          "invalid_request_error", std::nullopt, "request_too_large"},
                 "body_too_large");
      return;
    }
    if (ec == http::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::operation_aborted || ec == beast::error::timeout ||
        ec == net::error::connection_reset) {
      close();
      return;
    }
    if (ec) {
      send_error(bad_request("[serve] malformed HTTP request: " + ec.message()), "bad_request");
      return;
    }
    handle(parser_->release());
  }

  void handle(http::request<http::string_body> req) {
    keep_alive_ = req.keep_alive();
    const std::string target(req.target());
    const std::string path = target.substr(0, target.find('?'));
    origin_ = std::string(req[http::field::origin]);
    if (path == "/health" || path == "/metrics" || path == "/v1/models" ||
        path == "/v1/audio/transcriptions" || path == "/v1/audio/translations" ||
        path == "/v1/chat/completions" || path == "/v1/completions") {
      route_ = path;
    } else if (path.rfind("/v1/models/", 0) == 0) {
      route_ = "/v1/models/{id}";
    } else if (is_session_route(path)) {
      route_ = "/v1/audio/sessions";
    } else if (path == "/v1/realtime" || path == "/v1/realtime/client_secrets") {
      route_ = path;
    }

    if (req.method() == http::verb::options) {  // CORS preflight
      auto res = response(http::status::no_content, "", "");
      res.set(http::field::access_control_allow_methods, "GET, POST, DELETE, OPTIONS");
      const auto asked = req[http::field::access_control_request_headers];
      res.set(http::field::access_control_allow_headers,
              asked.empty() ? beast::string_view("Authorization, Content-Type") : asked);
      res.set(http::field::access_control_max_age, "600");
      send(std::move(res));
      return;
    }
    if (path == "/" || path == "/index.html") {  // the web page; it asks for the key itself
      route_ = "/";
      if (req.method() != http::verb::get && req.method() != http::verb::head)
        return method_not_allowed("GET");
      return send(response(http::status::ok, std::string(web_page()), "text/html; charset=utf-8"));
    }
    if (!st_.opt.api_key.empty() && path != "/health") {
      const std::string auth = path == "/v1/realtime"
                                   ? realtime_authorization(req)
                                   : std::string(req[http::field::authorization]);
      // A realtime WebSocket also takes the ephemeral keys of /v1/realtime/client_secrets.
      const bool realtime_ok = path == "/v1/realtime" && st_.realtime->authorized(auth);
      if (auth != "Bearer " + st_.opt.api_key && !realtime_ok) {
        send_error(ApiError{401,
                            auth.empty() ? "You didn't provide an API key. Send it as "
                                           "'Authorization: Bearer KEY'."
                                         : "Incorrect API key provided.",
                            "invalid_request_error", std::nullopt, "invalid_api_key"},
                   "unauthorized");
        return;
      }
    }
    const bool get = req.method() == http::verb::get || req.method() == http::verb::head;
    if (path == "/health") {
      if (!get) return method_not_allowed("GET");
      nlohmann::json j = {{"status", st_.draining ? "draining" : "ok"},
                          {"model", st_.service.model_id()}};
      send(response(st_.draining ? http::status::service_unavailable : http::status::ok,
                    json_dump(j), "application/json"));
    } else if (path == "/metrics") {
      if (!get) return method_not_allowed("GET");
      std::string text = st_.metrics.render(st_.service.stats());
      if (st_.chat) text += render_chat_metrics(st_.chat->stats());
      send(response(http::status::ok, text, "text/plain; version=0.0.4; charset=utf-8"));
    } else if (path == "/v1/models") {
      if (!get) return method_not_allowed("GET");
      nlohmann::json data = nlohmann::json::array({model_json()});
      if (st_.chat) data.push_back(chat_model_json());
      nlohmann::json list = {{"object", "list"}, {"data", data}};
      send(response(http::status::ok, json_dump(list), "application/json"));
    } else if (path.rfind("/v1/models/", 0) == 0) {
      if (!get) return method_not_allowed("GET");
      const std::string id = path.substr(11);
      if (st_.chat && id == st_.chat->model_id())
        return send(response(http::status::ok, json_dump(chat_model_json()), "application/json"));
      if (!serves_model(id)) return model_not_found(id);
      send(response(http::status::ok, json_dump(model_json()), "application/json"));
    } else if (path == "/v1/audio/transcriptions" || path == "/v1/audio/translations") {
      if (req.method() != http::verb::post) return method_not_allowed("POST");
      handle_audio(req, path == "/v1/audio/translations" ? "translate" : "transcribe");
    } else if (path == "/v1/chat/completions" || path == "/v1/completions") {
      if (req.method() != http::verb::post) return method_not_allowed("POST");
      handle_chat(req, path == "/v1/chat/completions");
    } else if (st_.audio_sessions && is_session_route(path)) {
      handle_session(req);
    } else if (path == "/v1/realtime" || path == "/v1/realtime/client_secrets") {
      handle_realtime(std::move(req), path);
    } else {
      send_error(
          ApiError{404, "Invalid URL (" + std::string(req.method_string()) + " " + path + ")",
                   "invalid_request_error", std::nullopt, "unknown_url"},
          "not_found");
    }
  }

  nlohmann::json model_json() const {
    return {{"id", st_.service.model_id()},
            {"object", "model"},
            {"created", 0},
            {"owned_by", "parley"}};
  }
  nlohmann::json chat_model_json() const {
    return {{"id", st_.chat->model_id()},
            {"object", "model"},
            {"created", 0},
            {"owned_by", "parley"},
            {"max_model_len", st_.chat->max_context()}};
  }

  void handle_chat(http::request<http::string_body>& req, bool chat) {
    if (st_.draining) {
      return send_error(ApiError{503, "[serve] the server is shutting down", "server_error",
                                 std::nullopt, "shutting_down"},
                        "shutting_down");
    }
    if (!st_.chat) {
      return send_error(ApiError{404,
                                 "[serve] this server has no chat model (parley serve --model "
                                 "CHAT_MODEL_DIR)",
                                 "invalid_request_error", "model", "model_not_found"},
                        "not_found");
    }
    ChatService& svc = *st_.chat;
    auto job = std::make_shared<ChatJob>();
    try {
      chat_req_ = parse_chat_request(req.body(), chat, svc.vocab_size());
      if (chat_req_.model != svc.model_id()) {
        return send_error(ApiError{404,
                                   "The model '" + chat_req_.model +
                                       "' does not exist; this "
                                       "server's chat model is '" +
                                       svc.model_id() + "'",
                                   "invalid_request_error", "model", "model_not_found"},
                          "not_found");
      }
      job->chat = chat;
      // The conversation is the job's from here on (the answer needs only the rest).
      job->messages = std::move(chat_req_.messages);
      if (chat && !chat_req_.tools.is_null())
        chat_req_.tool_format = tool_call_format(svc.template_source());
      if (chat_req_.tool_choice == "required" || chat_req_.tool_choice == "function") {
        if (chat_req_.grammar)
          throw ApiException(
              bad_request("[request] tool_choice '" + chat_req_.tool_choice +
                              "' cannot be combined with response_format or another grammar",
                          "tool_choice"));
        try {
          chat_req_.grammar =
              tool_call_grammar(chat_req_.tools, chat_req_.tool_format, chat_req_.tool_choice_name,
                                chat_req_.parallel_tool_calls);
          compile_grammar(chat_req_.grammar);
        } catch (const Error& e) {
          throw ApiException(bad_request(std::string("[request] ") + e.what(), "tools"));
        }
      }
      job->tools = std::move(chat_req_.tools);
      job->template_kwargs = std::move(chat_req_.template_kwargs);
      job->add_generation_prompt = chat_req_.add_generation_prompt;
      job->prompt = chat_req_.prompt;
      job->prompt_ids = chat_req_.prompt_ids;
      job->params = chat_req_.params;
      job->n = chat_req_.n;
      job->cache_salt = chat_req_.cache_salt;
      job->speculative = chat_req_.speculative;
      job->prediction = chat_req_.prediction;
      job->grammar = chat_req_.grammar;
      // Rendered and tokenized here, so a template error or an over-long prompt is a 400
      // before anything streams.
      job->prompt_ids = svc.prompt_ids(*job);
    } catch (const ApiException& e) {
      return send_error(e.error(), "bad_request");
    } catch (const Error& e) {
      return send_error(from_error(e), std::string(to_string(e.kind())));
    }
    const int64_t n_prompt = int64_t(job->prompt_ids.size());
    const int64_t limit = svc.max_context();
    const int64_t wanted = n_prompt + (job->params.max_tokens ? *job->params.max_tokens : 1);
    if (n_prompt == 0 || wanted > limit) {
      return send_error(
          bad_request(
              n_prompt == 0 ? "[serve] the prompt is empty"
                            : "This model's maximum context length is " + std::to_string(limit) +
                                  " tokens. However, you requested " + std::to_string(wanted) +
                                  " tokens (" + std::to_string(n_prompt) + " in the messages, " +
                                  std::to_string(wanted - n_prompt) +
                                  " in the completion). Please reduce the length of the "
                                  "messages or completion.",
              chat ? "messages" : "prompt",
              n_prompt == 0 ? std::nullopt : std::optional<std::string>("context_length_exceeded")),
          "bad_request");
    }
    req.body().clear();
    chat_meta_ = ResponseMeta{new_response_id(chat),
                              std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count(),
                              svc.model_id()};
    chat_first_.assign(size_t(job->n), true);
    tool_streams_.assign(
        chat_req_.stream && chat_req_.tool_format != ToolCallFormat::none ? size_t(job->n) : 0,
        ToolCallStream(chat_req_.tool_format, chat_req_.parallel_tool_calls));
    const uint64_t gen = ++generation_;
    auto self = shared_from_this();
    if (chat_req_.stream) {
      job->on_token = [self, gen, &svc](int choice, const std::string& delta,
                                        const SampleResult& s) {
        nlohmann::json lp = nullptr;
        if (self->chat_req_.params.logprobs)
          lp = choice_logprobs(self->chat_req_, svc.tokenizer(), {s}, 0);
        net::post(self->stream_.get_executor(), [self, gen, choice, delta, lp = std::move(lp)] {
          if (self->generation_ == gen) self->on_chat_token(choice, delta, lp);
        });
      };
    }
    job->on_done = [self, gen, &svc](const GenerateResult* r, std::exception_ptr ep) {
      Outcome o;
      std::optional<GenerateResult> result;
      if (ep) {
        try {
          std::rethrow_exception(ep);
        } catch (const Error& e) {
          o.cancelled = e.kind() == ErrorKind::cancelled;
          o.error = from_error(e);
          if (std::string_view(e.what()).starts_with("context_length_exceeded"))
            o.error.code = "context_length_exceeded";
          o.error_kind = std::string(to_string(e.kind()));
        } catch (const std::exception& e) {
          o.error = ApiError{500, std::string("[serve] ") + e.what(), "server_error", std::nullopt,
                             "internal_error"};
          o.error_kind = "internal";
        }
      } else {
        o.ok = true;
        result = std::move(*r);
      }
      // The answer's JSON is built on the connection's thread, not the engine's.
      net::post(self->stream_.get_executor(),
                [self, gen, &svc, o = std::move(o), result = std::move(result)]() mutable {
                  if (self->generation_ != gen) return;
                  if (o.ok && !self->chat_req_.stream) {
                    try {
                      o.body = json_dump(response_json(self->chat_req_, self->chat_meta_, *result,
                                                       svc.tokenizer()));
                      o.content_type = "application/json";
                    } catch (const std::exception& e) {
                      o = Outcome{};
                      o.error = ApiError{500, std::string("[serve] ") + e.what(), "server_error",
                                         std::nullopt, "internal_error"};
                      o.error_kind = "internal";
                    }
                  }
                  self->on_chat_done(std::move(o), result);
                });
    };
    if (!svc.submit(job)) {
      return send_error(ApiError{429, "[serve] the chat model's queue is full; retry later",
                                 "server_error", std::nullopt, "queue_full"},
                        "queue_full");
    }
    chat_job_ = job;
    job_active_ = true;
    streaming_ = chat_req_.stream;
    watch_disconnect(gen);
  }

  void on_chat_token(int choice, const std::string& delta, const nlohmann::json& logprobs) {
    if (closed_) return;
    if (!headers_sent_) send_sse_headers();
    push_role_chunk(choice);
    if (!tool_streams_.empty()) {  // calls parsed out of the text as it comes
      ToolCallStream& ts = tool_streams_[size_t(choice)];
      const int before = ts.calls();
      const ToolCallStream::Out o = ts.push(delta);
      push_tool_text(choice, o, before, logprobs);
      pump();
      return;
    }
    if (!delta.empty() || !logprobs.is_null())
      out_.push_back(
          sse_event(chunk_json(chat_req_, chat_meta_, choice, &delta, logprobs, "", false)));
    pump();
  }

  // A tool stream's output: its text (with the token's logprobs), then its finished calls.
  void push_tool_text(int choice, const ToolCallStream::Out& o, int first_index,
                      const nlohmann::json& logprobs) {
    if (!o.content.empty() || !logprobs.is_null())
      out_.push_back(
          sse_event(chunk_json(chat_req_, chat_meta_, choice, &o.content, logprobs, "", false)));
    if (!o.calls.empty())
      out_.push_back(
          sse_event(tool_call_chunk_json(chat_req_, chat_meta_, choice, o.calls, first_index)));
  }

  void on_chat_done(Outcome o, const std::optional<GenerateResult>& r) {
    chat_job_.reset();
    finish_job(o, "", [&] {
      for (size_t i = 0; i < r->choices.size(); ++i) {
        push_role_chunk(int(i));
        std::string_view finish = finish_reason(r->choices[i]);
        if (i < tool_streams_.size()) {
          ToolCallStream& ts = tool_streams_[i];
          const int before = ts.calls();
          push_tool_text(int(i), ts.flush(), before, nullptr);
          if (ts.calls() > 0 && r->choices[i].finish == ChoiceFinish::stop) finish = "tool_calls";
        }
        out_.push_back(
            sse_event(chunk_json(chat_req_, chat_meta_, int(i), nullptr, nullptr, finish, false)));
      }
      if (chat_req_.include_usage)
        out_.push_back(sse_event(usage_chunk_json(chat_req_, chat_meta_, *r)));
      out_.push_back("data: [DONE]\n\n");
    });
  }

  // A chat choice's first chunk (its role), once, before its first text.
  void push_role_chunk(int choice) {
    if (chat_first_[size_t(choice)] && chat_req_.chat)
      out_.push_back(
          sse_event(chunk_json(chat_req_, chat_meta_, choice, nullptr, nullptr, "", true)));
    chat_first_[size_t(choice)] = false;
  }

  // The loaded model answers to its folder name and, for OpenAI clients, "whisper-1".
  bool serves_model(const std::string& id) const {
    return id == st_.service.model_id() || id == "whisper-1";
  }
  void model_not_found(const std::string& id) {
    send_error(ApiError{404,
                        "The model '" + id + "' does not exist; this server serves '" +
                            st_.service.model_id() + "' (also as 'whisper-1')",
                        "invalid_request_error", "model", "model_not_found"},
               "not_found");
  }
  void method_not_allowed(const char* allowed) {
    auto res =
        error_response(ApiError{405, std::string("Method not allowed; use ") + allowed,
                                "invalid_request_error", std::nullopt, "method_not_allowed"});
    res.set(http::field::allow, allowed);
    st_.metrics.count_error("bad_request");
    send(std::move(res));
  }

  void handle_audio(http::request<http::string_body>& req, const std::string& task) {
    if (st_.draining) {
      return send_error(ApiError{503, "[serve] the server is shutting down", "server_error",
                                 std::nullopt, "shutting_down"},
                        "shutting_down");
    }
    try {
      const auto type = req[http::field::content_type];
      request_ = parse_audio_request(std::string_view(type.data(), type.size()), req.body(), task);
    } catch (const ApiException& e) {
      return send_error(e.error(), "bad_request");
    }
    req.body().clear();
    req.body().shrink_to_fit();
    if (!serves_model(request_.model)) return model_not_found(request_.model);

    auto job = std::make_shared<TranscriptionJob>();
    job->audio = std::move(request_.audio);
    job->filename = request_.filename;
    job->options = transcribe_options(request_);
    job->vad = request_.vad;
    const uint64_t gen = ++generation_;
    auto self = shared_from_this();
    if (request_.stream) {
      job->on_delta = [self, gen](const std::string& delta) {
        net::post(self->stream_.get_executor(), [self, gen, delta] {
          if (self->generation_ == gen) self->on_delta(delta);
        });
      };
    }
    job->on_done = [self, gen, req_copy = request_](const TranscribeResult* r, double seconds,
                                                    std::exception_ptr ep) {
      Outcome o = make_outcome(r, seconds, std::move(ep), req_copy);
      net::post(self->stream_.get_executor(), [self, gen, o = std::move(o)]() mutable {
        if (self->generation_ == gen) self->on_done(std::move(o));
      });
    };
    if (!st_.service.submit(job)) {
      const auto s = st_.service.options();
      return send_error(ApiError{429,
                                 "[serve] the server is busy: " + std::to_string(s.batch) +
                                     " running and " + std::to_string(s.queue_capacity) +
                                     " queued requests (parley serve --queue); "
                                     "retry later",
                                 "server_error", std::nullopt, "queue_full"},
                        "queue_full");
    }
    job_ = job;
    job_active_ = true;
    streaming_ = request_.stream;
    watch_disconnect(gen);
  }

  // /v1/audio/sessions (session_routes.cpp); a close answers later, from a worker.
  void handle_session(http::request<http::string_body>& req) {
    if (st_.draining) {
      return send_error(ApiError{503, "[serve] the server is shutting down", "server_error",
                                 std::nullopt, "shutting_down"},
                        "shutting_down");
    }
    SessionHttpRequest r{std::string(req.method_string()), std::string(req.target()),
                         std::string(req[http::field::content_type]), std::move(req.body())};
    const uint64_t gen = ++generation_;
    auto self = shared_from_this();
    handle_session_route(
        *st_.audio_sessions, st_.service.model_id(), std::move(r),
        [self, gen](SessionHttpAnswer a) {
          net::post(self->stream_.get_executor(), [self, gen, a = std::move(a)]() mutable {
            if (self->generation_ != gen || self->closed_) return;
            if (!a.error_kind.empty()) self->st_.metrics.count_error(a.error_kind);
            auto res = self->response(http::status(a.status), std::move(a.body), a.content_type);
            if (!a.allow.empty()) res.set(http::field::allow, a.allow);
            self->send(std::move(res));
          });
        });
  }

  // /v1/realtime (a WebSocket upgrade, handed to realtime.cpp) and its client secrets.
  void handle_realtime(http::request<http::string_body> req, const std::string& path) {
    if (st_.draining) {
      return send_error(ApiError{503, "[serve] the server is shutting down", "server_error",
                                 std::nullopt, "shutting_down"},
                        "shutting_down");
    }
    if (path == "/v1/realtime/client_secrets") {
      if (req.method() != http::verb::post) return method_not_allowed("POST");
      auto [status, body] = st_.realtime->create_client_secret(req.body());
      if (status != 200) st_.metrics.count_error("bad_request");
      return send(response(http::status(status), std::move(body), "application/json"));
    }
    if (!beast::websocket::is_upgrade(req)) {
      return send_error(bad_request("[realtime] /v1/realtime is a WebSocket: send a GET with "
                                    "'Upgrade: websocket'"),
                        "bad_request");
    }
    const std::string target(req.target());
    const auto q = target.find("intent=");
    if (q != std::string::npos && target.compare(q + 7, 13, "transcription") != 0) {
      return send_error(bad_request("[realtime] this server holds transcription sessions only "
                                    "(intent=transcription)",
                                    "intent", "unsupported_value"),
                        "bad_request");
    }
    st_.metrics.count_request(route_, 101);
    closed_ = true;  // the socket is the WebSocket's from here on
    st_.realtime->accept(stream_.release_socket(), std::move(req));
  }

  // While a job runs, a readable socket means the client closed (or pipelined another
  // request): peek to tell which; a closed client cancels its job.
  void watch_disconnect(uint64_t gen) {
    stream_.expires_never();
    stream_.socket().async_wait(
        tcp::socket::wait_read, [self = shared_from_this(), gen](beast::error_code ec) {
          if (!self->job_active_ || self->generation_ != gen || self->closed_) return;
          if (ec) {
            if (ec != net::error::operation_aborted) self->client_gone();
            return;
          }
          char c;
          beast::error_code pec, ignored;
          auto& sock = self->stream_.socket();
          sock.non_blocking(true, ignored);
          const size_t n = sock.receive(net::buffer(&c, 1), tcp::socket::message_peek, pec);
          sock.non_blocking(false, ignored);
          if (pec == net::error::would_block || pec == net::error::try_again) {
            self->watch_disconnect(gen);
          } else if (pec || n == 0) {
            self->client_gone();
          }  // else: a pipelined request waits in the socket; read after this answer
        });
  }

  void client_gone() {
    if (job_) job_->cancelled = true;
    if (chat_job_) chat_job_->cancelled = true;
    st_.metrics.count_error("cancelled");
    close();
  }

  void on_delta(const std::string& delta) {
    if (closed_) return;
    if (!headers_sent_) send_sse_headers();
    out_.push_back(sse_event({{"type", "transcript.text.delta"}, {"delta", delta}}));
    pump();
  }

  void on_done(Outcome o) {
    job_.reset();
    finish_job(o, "event: error\n", [&] {
      nlohmann::json done{{"type", "transcript.text.done"}, {"text", o.body}};
      if (!o.logprobs.is_null()) done["logprobs"] = std::move(o.logprobs);
      out_.push_back(sse_event(done));
    });
  }

  // The end of a job, audio or chat: a failure before any byte went out is a plain error
  // answer, after that an SSE error event (error_prefix before its data line); a stream
  // gets its closing events from stream_end, a plain answer the outcome's body.
  void finish_job(Outcome& o, std::string_view error_prefix,
                  const std::function<void()>& stream_end) {
    job_active_ = false;
    if (closed_) return;
    if (!o.ok) {
      if (o.cancelled) return close();
      if (!headers_sent_) return send_error(o.error, o.error_kind);
      st_.metrics.count_error(o.error_kind);
      out_.push_back(std::string(error_prefix) + "data: " + o.error.to_json() + "\n\n");
    } else if (streaming_) {
      if (!headers_sent_) send_sse_headers();
      stream_end();
      st_.metrics.count_request(route_, 200);
    } else {
      st_.metrics.count_request(route_, 200);
      return send(response(http::status::ok, std::move(o.body), o.content_type), false);
    }
    finish_stream_ = true;
    pump();
  }

  void send_sse_headers() {
    headers_sent_ = true;
    std::string h =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        "Connection: close\r\nX-Accel-Buffering: no\r\n";
    h += "Access-Control-Allow-Origin: " + st_.opt.cors_origin + "\r\n\r\n";
    out_.push_back(std::move(h));
  }

  void pump() {
    if (writing_ || closed_) return;
    if (out_.empty()) {
      if (finish_stream_) close();
      return;
    }
    writing_ = true;
    net::async_write(stream_, net::buffer(out_.front()),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->writing_ = false;
                       if (ec) return self->client_gone();
                       self->out_.pop_front();
                       self->pump();
                     });
  }

  http::response<http::string_body> response(http::status status, std::string body,
                                             const std::string& content_type) {
    http::response<http::string_body> res{status, 11};
    res.set(http::field::server, "parley");
    if (!content_type.empty()) res.set(http::field::content_type, content_type);
    res.set(http::field::access_control_allow_origin, st_.opt.cors_origin);
    res.keep_alive(keep_alive_ && !st_.draining);
    res.body() = std::move(body);
    res.prepare_payload();
    return res;
  }

  http::response<http::string_body> error_response(const ApiError& e) {
    return response(http::status(e.status), e.to_json(), "application/json");
  }

  void send_error(const ApiError& e, const std::string& kind) {
    st_.metrics.count_error(kind);
    send(error_response(e));
  }

  void send(http::response<http::string_body> res, bool count = true) {
    if (count) st_.metrics.count_request(route_, int(res.result_int()));
    const bool close_after = !res.keep_alive();
    auto sp = std::make_shared<http::response<http::string_body>>(std::move(res));
    stream_.expires_after(std::chrono::seconds(120));
    http::async_write(stream_, *sp,
                      [self = shared_from_this(), sp, close_after](beast::error_code ec, size_t) {
                        if (ec || close_after) return self->linger_close();
                        self->do_read();
                      });
  }

  // After an early answer (413, a parse error) the client may still be sending: read and
  // drop what comes for a moment so closing does not reset the connection before the
  // client has read the answer.
  void linger_close() {
    if (closed_) return;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::seconds(5));
    drain_.resize(64 * 1024);
    linger_close_continue();
  }
  void linger_close_continue() {
    stream_.async_read_some(net::buffer(drain_),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > (256ull << 20)) return self->close();
                              self->linger_close_continue();
                            });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  ServerState& st_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string route_ = "other";
  std::string origin_;
  bool keep_alive_ = false;
  bool idle_ = false;
  bool closed_ = false;
  AudioRequest request_;
  std::shared_ptr<TranscriptionJob> job_;
  ChatRequest chat_req_;
  ResponseMeta chat_meta_;
  std::vector<bool> chat_first_;              // per choice: no chunk sent yet
  std::vector<ToolCallStream> tool_streams_;  // per choice, when tool calls are parsed
  std::shared_ptr<ChatJob> chat_job_;
  bool job_active_ = false;
  uint64_t generation_ = 0;
  bool streaming_ = false;
  bool headers_sent_ = false;
  bool writing_ = false;
  bool finish_stream_ = false;
  std::deque<std::string> out_;
  std::vector<char> drain_;
  uint64_t drained_ = 0;
};

void accept_loop(tcp::acceptor& acceptor, net::io_context& ioc, ServerState& st) {
  acceptor.async_accept(net::make_strand(ioc), [&](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
    if (!ec) {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      auto s = std::make_shared<Session>(std::move(socket), st);
      {
        std::lock_guard lock(st.sessions_mu);
        std::erase_if(st.sessions, [](const auto& w) { return w.expired(); });
        st.sessions.push_back(s);
      }
      s->start();
    }
    accept_loop(acceptor, ioc, st);
  });
}

}  // namespace

void serve_http(const ServerOptions& options, WhisperService& service, ChatService* chat,
                AudioSessions* sessions) {
  ServerState st(options, service, chat);
  st.audio_sessions = sessions;
  RealtimeHub realtime(service, options.api_key);
  st.realtime = &realtime;
  net::io_context ioc(std::max(1, options.io_threads));
  tcp::acceptor acceptor(ioc);
  beast::error_code ec;
  const auto address = net::ip::make_address(options.host, ec);
  check_arg(!ec, "[serve] --host '" + options.host + "' is not an IP address");
  check_arg(options.port >= 0 && options.port <= 65535, "[serve] --port must be 0..65535");
  const tcp::endpoint endpoint(address, uint16_t(options.port));
  acceptor.open(endpoint.protocol());
  acceptor.set_option(net::socket_base::reuse_address(true));
  acceptor.bind(endpoint, ec);
  check(!ec, ErrorKind::invalid_argument,
        "[serve] cannot listen on " + options.host + ":" + std::to_string(options.port) + ": " +
            ec.message());
  acceptor.listen(net::socket_base::max_listen_connections);
  std::cout << "parley serve: listening on http://" << options.host << ":"
            << acceptor.local_endpoint().port() << " (model " << service.model_id()
            << (chat ? ", chat model " + chat->model_id() : std::string()) << ")" << std::endl;

  auto guard = net::make_work_guard(ioc);
  std::thread drainer;
  net::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([&](beast::error_code sec, int sig) {
    if (sec) return;
    std::cout << "parley serve: signal " << sig << ": finishing admitted requests" << std::endl;
    st.draining = true;
    beast::error_code ignored;
    acceptor.close(ignored);
    drainer = std::thread([&] {
      if (sessions) sessions->stop();  // closes waiting for a job answer 503; spools are kept
      service.stop();  // every queued and running job completes and posts its answer
      if (chat) chat->stop();
      net::post(ioc, [&] {
        std::lock_guard lock(st.sessions_mu);
        for (auto& w : st.sessions) {
          if (auto s = w.lock()) s->close_if_idle();
        }
        realtime.close_all();
        guard.reset();
      });
    });
  });
  accept_loop(acceptor, ioc, st);

  std::vector<std::thread> threads;
  for (int i = 1; i < options.io_threads; ++i) threads.emplace_back([&] { ioc.run(); });
  ioc.run();
  for (auto& t : threads) t.join();
  if (drainer.joinable()) drainer.join();
  std::cout << "parley serve: stopped" << std::endl;
}

}  // namespace parley::server
