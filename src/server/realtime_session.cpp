#include "server/realtime_session.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "audio/g711.h"
#include "engine/error.h"
#include "server/api_error.h"
#include "server/audio_request.h"
#include "text/base64.h"
#include "whisper/formats.h"

namespace parley::server {
namespace {

using nlohmann::json;

constexpr int kRate = 16000;                          // the buffer's rate (Whisper's)
constexpr int64_t kMinCommit = kRate / 10;            // OpenAI refuses commits under 100 ms
constexpr int64_t kInterimEvery = kRate / 2;          // new audio between interim jobs
constexpr int64_t kInterimMin = kRate;                // no interim text for the first second
constexpr int64_t kMaxBuffer = int64_t(kRate) * 600;  // uncommitted audio held at most
constexpr const char* kLogprobs = "item.input_audio_transcription.logprobs";

int64_t to_ms(int64_t samples) { return samples * 1000 / kRate; }

std::string strip(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  return std::string(s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1));
}

[[noreturn]] void invalid(const std::string& message, const std::string& param,
                          const std::string& code = "invalid_value") {
  throw ApiException(bad_request("[realtime] " + message, param, code));
}

// A 16 kHz pcm16 WAV of samples (what WhisperService decodes without FFmpeg).
std::vector<uint8_t> wav16(std::span<const float> samples) {
  const uint32_t data = uint32_t(samples.size() * 2);
  std::vector<uint8_t> out(44 + data);
  auto put32 = [&](size_t at, uint32_t v) { std::memcpy(out.data() + at, &v, 4); };
  auto put16 = [&](size_t at, uint16_t v) { std::memcpy(out.data() + at, &v, 2); };
  std::memcpy(out.data(), "RIFF", 4);
  put32(4, 36 + data);
  std::memcpy(out.data() + 8, "WAVEfmt ", 8);
  put32(16, 16);
  put16(20, 1);  // PCM
  put16(22, 1);  // mono
  put32(24, kRate);
  put32(28, kRate * 2);
  put16(32, 2);
  put16(34, 16);
  std::memcpy(out.data() + 36, "data", 4);
  put32(40, data);
  for (size_t i = 0; i < samples.size(); ++i) {
    const float v = std::clamp(samples[i] * 32768.0f, -32768.0f, 32767.0f);
    put16(44 + 2 * i, uint16_t(int16_t(std::lrint(v))));
  }
  return out;
}

const json* field(const json& j, const char* name) {
  auto it = j.find(name);
  return it == j.end() ? nullptr : &*it;
}

void parse_transcription(const json& t, const std::string& param, RealtimeConfig& c,
                         const RealtimeContext& ctx) {
  if (t.is_null()) invalid("input audio transcription cannot be turned off here", param);
  if (!t.is_object()) invalid("expected an object", param);
  if (auto* m = field(t, "model"); m && !m->is_null()) {
    if (!m->is_string()) invalid("expected a string", param + ".model");
    const std::string model = m->get<std::string>();
    if (model != "whisper-1" && model != ctx.model_id)
      invalid("The model '" + model + "' does not exist; this server serves '" + ctx.model_id +
                  "' (also as 'whisper-1')",
              param + ".model", "model_not_found");
    c.model = model;
  }
  for (const char* name : {"language", "prompt"}) {
    auto* v = field(t, name);
    if (!v) continue;
    if (!v->is_null() && !v->is_string()) invalid("expected a string", param + "." + name);
    std::optional<std::string> s;
    if (v->is_string() && !v->get<std::string>().empty()) s = v->get<std::string>();
    (std::strcmp(name, "language") == 0 ? c.language : c.prompt) = s;
  }
}

void parse_turn_detection(const json& t, const std::string& param, RealtimeConfig& c,
                          const RealtimeContext& ctx) {
  if (t.is_null()) {
    c.server_vad = false;
    return;
  }
  if (!t.is_object()) invalid("expected an object or null", param);
  const std::string type = t.value("type", "server_vad");
  if (type != "server_vad")
    invalid("Unsupported turn detection '" + type + "': this server has 'server_vad' and null",
            param + ".type", "unsupported_value");
  if (!ctx.vad)
    invalid("server_vad needs a Silero VAD model (parley serve --vad-model)", param + ".type",
            "unsupported_value");
  auto number = [&](const char* name, double lo, double hi) -> std::optional<double> {
    auto* v = field(t, name);
    if (!v || v->is_null()) return std::nullopt;
    if (!v->is_number() || v->get<double>() < lo || v->get<double>() > hi)
      invalid(std::string(name) + " must be a number in [" + std::to_string(lo) + ", " +
                  std::to_string(hi) + "]",
              param + "." + name);
    return v->get<double>();
  };
  if (auto v = number("threshold", 0.0, 1.0)) c.threshold = *v;
  if (auto v = number("prefix_padding_ms", 0, 10000)) c.prefix_padding_ms = int(*v);
  if (auto v = number("silence_duration_ms", 0, 10000)) c.silence_duration_ms = int(*v);
  if (auto* v = field(t, "idle_timeout_ms"); v && !v->is_null())
    invalid("idle_timeout_ms is not supported by this server", param + ".idle_timeout_ms",
            "unsupported_value");
  c.server_vad = true;  // create_response / interrupt_response: no responses here
}

void parse_include(const json& v, const std::string& param, RealtimeConfig& c) {
  if (v.is_null()) {
    c.logprobs = false;
    return;
  }
  if (!v.is_array()) invalid("expected an array", param);
  c.logprobs = false;
  for (const auto& s : v) {
    if (!s.is_string() || s.get<std::string>() != kLogprobs)
      invalid(std::string("Supported values are: '") + kLogprobs + "'", param);
    c.logprobs = true;
  }
}

void no_noise_reduction(const json* v, const std::string& param) {
  if (v && !v->is_null())
    invalid("noise reduction is not supported by this server (set it to null)", param,
            "unsupported_value");
}

// The beta transcription_session.update's session object over `c`.
void apply_beta(const json& s, RealtimeConfig& c, const RealtimeContext& ctx) {
  if (!s.is_object()) invalid("expected an object", "session");
  if (auto* f = field(s, "input_audio_format")) {
    const std::string v = f->is_string() ? f->get<std::string>() : "";
    if (v == "pcm16")
      c.format = RealtimeConfig::Format::pcm16;
    else if (v == "g711_ulaw")
      c.format = RealtimeConfig::Format::pcmu;
    else if (v == "g711_alaw")
      c.format = RealtimeConfig::Format::pcma;
    else
      invalid("Supported values are: 'pcm16', 'g711_ulaw', 'g711_alaw'",
              "session.input_audio_format");
  }
  if (auto* t = field(s, "input_audio_transcription"))
    parse_transcription(*t, "session.input_audio_transcription", c, ctx);
  if (auto* t = field(s, "turn_detection"))
    parse_turn_detection(*t, "session.turn_detection", c, ctx);
  if (auto* v = field(s, "include")) parse_include(*v, "session.include", c);
  no_noise_reduction(field(s, "input_audio_noise_reduction"),
                     "session.input_audio_noise_reduction");
}

json turn_detection_json(const RealtimeConfig& c) {
  if (!c.server_vad) return nullptr;
  return {{"type", "server_vad"},
          {"threshold", c.threshold},
          {"prefix_padding_ms", c.prefix_padding_ms},
          {"silence_duration_ms", c.silence_duration_ms}};
}

json transcription_json(const RealtimeConfig& c) {
  return {{"model", c.model},
          {"language", c.language ? json(*c.language) : json(nullptr)},
          {"prompt", c.prompt ? json(*c.prompt) : json(nullptr)}};
}

json include_json(const RealtimeConfig& c) {
  return c.logprobs ? json::array({kLogprobs}) : json(nullptr);
}

}  // namespace

std::string next_delta(std::string_view sent, std::string_view hypothesis, bool final) {
  if (hypothesis.size() <= sent.size() || hypothesis.substr(0, sent.size()) != sent) return "";
  if (!sent.empty() && hypothesis[sent.size()] != ' ') return "";  // sent ends mid-word
  size_t end = hypothesis.size();
  if (!final) {
    end = hypothesis.rfind(' ');
    if (end == std::string_view::npos || end <= sent.size()) return "";
  }
  return std::string(hypothesis.substr(sent.size(), end - sent.size()));
}

int interim_token_budget(int64_t samples) {
  return int(std::min<int64_t>(224, 32 + 10 * samples / kRate));
}

std::string agreed_words(std::string_view a, std::string_view b) {
  size_t end = 0;  // a[0, end) == b[0, end), ending at a word's end in both
  for (size_t i = 0;; ++i) {
    const bool a_end = i == a.size() || a[i] == ' ';
    const bool b_end = i == b.size() || b[i] == ' ';
    if (a_end && b_end && i > 0) end = i;
    if (i == a.size() || i == b.size() || a[i] != b[i]) break;
  }
  return std::string(a.substr(0, end));
}

void RealtimeSession::apply_ga(const json& s, RealtimeConfig& c, const RealtimeContext& ctx) {
  if (!s.is_object()) invalid("expected an object", "session");
  if (auto* t = field(s, "type");
      t && !(t->is_string() && t->get<std::string>() == "transcription"))
    invalid(
        "This server holds transcription sessions only: session.type must be "
        "'transcription'",
        "session.type", "unsupported_value");
  if (auto* v = field(s, "include")) parse_include(*v, "session.include", c);
  const json* audio = field(s, "audio");
  if (!audio || audio->is_null()) return;
  const json* in = audio->is_object() ? field(*audio, "input") : nullptr;
  if (!in || in->is_null()) return;
  if (!in->is_object()) invalid("expected an object", "session.audio.input");
  if (auto* f = field(*in, "format"); f && !f->is_null()) {
    const std::string type = f->is_object() ? f->value("type", "") : "";
    if (type == "audio/pcm") {
      if (auto* r = field(*f, "rate"); r && !(r->is_number() && r->get<double>() == 24000))
        invalid("Only a 24000 Hz sample rate is supported for audio/pcm",
                "session.audio.input.format.rate");
      c.format = RealtimeConfig::Format::pcm16;
    } else if (type == "audio/pcmu") {
      c.format = RealtimeConfig::Format::pcmu;
    } else if (type == "audio/pcma") {
      c.format = RealtimeConfig::Format::pcma;
    } else {
      invalid("Supported values are: 'audio/pcm', 'audio/pcmu', 'audio/pcma'",
              "session.audio.input.format.type");
    }
  }
  if (auto* t = field(*in, "transcription"))
    parse_transcription(*t, "session.audio.input.transcription", c, ctx);
  if (auto* t = field(*in, "turn_detection"))
    parse_turn_detection(*t, "session.audio.input.turn_detection", c, ctx);
  no_noise_reduction(field(*in, "noise_reduction"), "session.audio.input.noise_reduction");
}

json RealtimeSession::ga_session(const RealtimeConfig& c, const std::string& id) {
  json format;
  switch (c.format) {
    case RealtimeConfig::Format::pcm16: format = {{"type", "audio/pcm"}, {"rate", 24000}}; break;
    case RealtimeConfig::Format::pcmu: format = {{"type", "audio/pcmu"}}; break;
    case RealtimeConfig::Format::pcma: format = {{"type", "audio/pcma"}}; break;
  }
  return {{"type", "transcription"},
          {"id", id},
          {"object", "realtime.transcription_session"},
          {"audio",
           {{"input",
             {{"format", format},
              {"noise_reduction", nullptr},
              {"transcription", transcription_json(c)},
              {"turn_detection", turn_detection_json(c)}}}}},
          {"include", include_json(c)}};
}

json RealtimeSession::session_json() const {
  if (!beta_) return ga_session(config_, id_);
  static const char* kFormats[] = {"pcm16", "g711_ulaw", "g711_alaw"};
  return {{"id", id_},
          {"object", "realtime.transcription_session"},
          {"input_audio_format", kFormats[int(config_.format)]},
          {"input_audio_transcription", transcription_json(config_)},
          {"turn_detection", turn_detection_json(config_)},
          {"input_audio_noise_reduction", nullptr},
          {"include", include_json(config_)},
          {"modalities", {"text"}},
          {"client_secret", nullptr}};
}

RealtimeSession::RealtimeSession(RealtimeContext& ctx, bool beta, Emit emit, Post post,
                                 const json& preset)
    : ctx_(ctx),
      beta_(beta),
      emit_(std::move(emit)),
      post_(std::move(post)),
      rng_(std::random_device{}()) {
  id_ = new_id("sess_");
  if (!ctx_.vad) config_.server_vad = false;  // OpenAI's default needs a VAD model here
  if (!preset.is_null()) apply_ga(preset, config_, ctx_);  // validated when the key was made
  resampler_ =
      StreamResampler(config_.format == RealtimeConfig::Format::pcm16 ? 24000 : 8000, kRate);
  reset_turns();
}

RealtimeSession::~RealtimeSession() { close(); }

std::string RealtimeSession::new_id(const char* prefix) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = prefix;
  for (int i = 0; i < 21; ++i) id += kAlphabet[rng_() % 62];
  return id;
}

void RealtimeSession::send(json event) {
  if (closed_) return;
  event["event_id"] = new_id("event_");
  emit_(event.dump(-1, ' ', false, json::error_handler_t::replace));
}

void RealtimeSession::send_error(const std::string& message, const std::string& code,
                                 std::optional<std::string> param,
                                 const std::string& client_event_id, const std::string& type) {
  send({{"type", "error"},
        {"error",
         {{"type", type},
          {"code", code},
          {"message", message},
          {"param", param ? json(*param) : json(nullptr)},
          {"event_id", client_event_id.empty() ? json(nullptr) : json(client_event_id)}}}});
}

void RealtimeSession::start() {
  send({{"type", beta_ ? "transcription_session.created" : "session.created"},
        {"session", session_json()}});
}

void RealtimeSession::close() {
  if (closed_) return;
  closed_ = true;
  drop_interim();
  for (auto& [id, item] : items_) item.job->cancelled = true;
}

void RealtimeSession::on_binary() {
  send_error("[realtime] binary frames are not accepted: send JSON client events as text",
             "invalid_value", std::nullopt, "");
}

void RealtimeSession::on_text(std::string_view text) {
  if (closed_) return;
  json event = json::parse(text, nullptr, false);
  if (event.is_discarded() || !event.is_object()) {
    return send_error("[realtime] the event is not a JSON object", "invalid_json", std::nullopt,
                      "");
  }
  std::string client_id;
  if (auto* e = field(event, "event_id"); e && e->is_string()) client_id = e->get<std::string>();
  try {
    handle(event, client_id);
  } catch (const ApiException& e) {
    send_error(e.error().message, e.error().code.value_or("invalid_value"), e.error().param,
               client_id);
  } catch (const Error& e) {
    const ApiError a = from_error(e);
    send_error(a.message, a.code.value_or(std::string(to_string(e.kind()))), a.param, client_id,
               a.type);
  }
}

void RealtimeSession::handle(const json& event, const std::string& client_event_id) {
  auto* t = field(event, "type");
  if (!t || !t->is_string())
    invalid("Missing required parameter: 'type'", "type", "missing_required_parameter");
  const std::string type = t->get<std::string>();
  if (type == "session.update" || type == "transcription_session.update") {
    auto* s = field(event, "session");
    if (!s)
      invalid("Missing required parameter: 'session'", "session", "missing_required_parameter");
    update(*s, type == "transcription_session.update");
  } else if (type == "input_audio_buffer.append") {
    append(event);
  } else if (type == "input_audio_buffer.commit") {
    commit(client_event_id);
  } else if (type == "input_audio_buffer.clear") {
    clear();
  } else {
    invalid("Invalid value: '" + type +
                "'. A transcription session takes 'session.update', "
                "'transcription_session.update', 'input_audio_buffer.append', "
                "'input_audio_buffer.commit' and 'input_audio_buffer.clear'",
            "type");
  }
}

void RealtimeSession::update(const json& session, bool beta_event) {
  RealtimeConfig c = config_;
  if (beta_event)
    apply_beta(session, c, ctx_);
  else
    apply_ga(session, c, ctx_);
  const bool turns_changed = c.server_vad != config_.server_vad ||
                             c.threshold != config_.threshold ||
                             c.silence_duration_ms != config_.silence_duration_ms;
  const bool format_changed = c.format != config_.format;
  config_ = c;
  if (format_changed) {
    resampler_ = StreamResampler(c.format == RealtimeConfig::Format::pcm16 ? 24000 : 8000, kRate);
  }
  if (turns_changed) reset_turns();
  const bool beta_shape = beta_;
  beta_ = beta_event;  // the answer in the shape of the event asked with
  send({{"type", beta_event ? "transcription_session.updated" : "session.updated"},
        {"session", session_json()}});
  beta_ = beta_shape;
}

void RealtimeSession::reset_turns() {
  speaking_ = false;
  drop_interim();
  vad_fed_ = vad_base_ = buffer_end();
  vad_.reset();
  if (config_.server_vad && ctx_.vad) {
    vad::SpeechOptions o;
    o.threshold = config_.threshold;
    o.min_silence_duration_ms = config_.silence_duration_ms;
    o.speech_pad_ms = 0;  // prefix_padding_ms is applied here, at the start only
    vad_ = std::make_unique<vad::VadIterator>(ctx_.vad, kRate, o);
  }
}

void RealtimeSession::append(const json& event) {
  auto* a = field(event, "audio");
  if (!a || !a->is_string())
    invalid("Missing required parameter: 'audio'", "audio", "missing_required_parameter");
  const auto bytes = base64_decode(a->get_ref<const std::string&>(),
                                   Base64Rules{.skip_whitespace = true, .require_padding = false});
  if (!bytes) invalid("Invalid 'audio': not base64", "audio");
  scratch_.clear();
  const auto* p = reinterpret_cast<const uint8_t*>(bytes->data());
  switch (config_.format) {
    case RealtimeConfig::Format::pcm16:
      if (bytes->size() % 2) invalid("Invalid 'audio': pcm16 has 2 bytes a sample", "audio");
      for (size_t i = 0; i + 1 < bytes->size(); i += 2) {
        scratch_.push_back(float(int16_t(uint16_t(p[i] | (p[i + 1] << 8)))) / 32768.0f);
      }
      break;
    case RealtimeConfig::Format::pcmu: mulaw_to_float({p, bytes->size()}, scratch_); break;
    case RealtimeConfig::Format::pcma: alaw_to_float({p, bytes->size()}, scratch_); break;
  }
  const size_t before = buffer_.size();
  resampler_.push(scratch_, buffer_);
  if (int64_t(buffer_.size()) > kMaxBuffer) {
    buffer_.resize(before);
    invalid("the input audio buffer holds 600 s of uncommitted audio: commit or clear it", "audio",
            "input_audio_buffer_full");
  }
  if (config_.server_vad) run_vad();
  maybe_interim();
}

void RealtimeSession::run_vad() {
  if (!vad_) return;
  const int64_t chunk = vad::chunk_samples(kRate);
  while (buffer_end() - vad_fed_ >= chunk) {
    const auto events = vad_->push(
        std::span<const float>(buffer_.data() + (vad_fed_ - buffer_start_), size_t(chunk)));
    vad_fed_ += chunk;
    for (const auto& e : events) {
      if (e.kind == vad::VadEvent::Kind::start)
        speech_started(vad_base_ + e.sample);
      else if (speaking_)
        speech_stopped(vad_fed_);
    }
  }
  if (!speaking_) {  // keep only what a start could still claim as its prefix
    const int64_t keep = vad_fed_ - chunk - int64_t(config_.prefix_padding_ms) * kRate / 1000;
    if (keep > buffer_start_) {
      buffer_.erase(buffer_.begin(), buffer_.begin() + (keep - buffer_start_));
      buffer_start_ = keep;
    }
  }
}

void RealtimeSession::speech_started(int64_t sample) {
  speaking_ = true;
  item_start_ = std::max(buffer_start_, sample - int64_t(config_.prefix_padding_ms) * kRate / 1000);
  if (pending_item_.empty()) pending_item_ = new_id("item_");
  pending_sent_.clear();
  last_hypothesis_.clear();
  interim_end_ = item_start_;
  send({{"type", "input_audio_buffer.speech_started"},
        {"audio_start_ms", to_ms(item_start_)},
        {"item_id", pending_item_}});
}

void RealtimeSession::speech_stopped(int64_t sample) {
  speaking_ = false;
  send({{"type", "input_audio_buffer.speech_stopped"},
        {"audio_end_ms", to_ms(sample)},
        {"item_id", pending_item_}});
  commit_range(item_start_, sample);
}

void RealtimeSession::commit(const std::string& client_event_id) {
  const int64_t begin = speaking_ ? item_start_ : buffer_start_;
  if (buffer_end() - begin < kMinCommit) {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.2f", double(buffer_end() - begin) * 1000.0 / kRate);
    return send_error(std::string("Error committing input audio buffer: buffer too small. "
                                  "Expected at least 100ms of audio, but buffer only has ") +
                          ms + "ms of audio.",
                      "input_audio_buffer_commit_empty", std::nullopt, client_event_id);
  }
  commit_range(begin, buffer_end());
  if (config_.server_vad) reset_turns();  // a manual commit ends the turn VAD was in
}

void RealtimeSession::drop_interim() {
  if (interim_) interim_->cancelled = true;
  interim_.reset();
  ++interim_serial_;  // its answer, already posted or not, is ignored
}

void RealtimeSession::clear() {
  drop_interim();
  buffer_start_ = buffer_end();
  buffer_.clear();
  pending_item_.clear();
  pending_sent_.clear();
  last_hypothesis_.clear();
  reset_turns();
  send({{"type", "input_audio_buffer.cleared"}});
}

void RealtimeSession::commit_range(int64_t begin, int64_t end) {
  drop_interim();  // the item's final job supersedes it
  const std::string id = pending_item_.empty() ? new_id("item_") : pending_item_;
  Item item;
  item.sent = pending_sent_;
  item.seconds = double(end - begin) / kRate;
  item.job = make_job(begin, end);
  item.job->options.fit_audio_ctx = ctx_.service.options().live_fit_audio_ctx;
  pending_item_.clear();
  pending_sent_.clear();
  last_hypothesis_.clear();
  const json previous = last_item_.empty() ? json(nullptr) : json(last_item_);
  last_item_ = id;
  item.committed_at = std::chrono::steady_clock::now();
  send({{"type", "input_audio_buffer.committed"}, {"item_id", id}, {"previous_item_id", previous}});
  json content = {{"type", "input_audio"}, {"transcript", nullptr}};
  send({{"type", beta_ ? "conversation.item.created" : "conversation.item.added"},
        {"previous_item_id", previous},
        {"item",
         {{"id", id},
          {"object", "realtime.item"},
          {"type", "message"},
          {"status", "completed"},
          {"role", "user"},
          {"content", json::array({content})}}}});
  // The buffer keeps what follows the item.
  buffer_.erase(buffer_.begin(), buffer_.begin() + (end - buffer_start_));
  buffer_start_ = end;
  interim_end_ = end;

  auto self = shared_from_this();
  auto post = post_;
  item.job->on_done = [self, post, id](const TranscribeResult* r, double, std::exception_ptr ep) {
    std::optional<TranscribeResult> copy;
    if (r) copy = *r;
    post([self, id, copy = std::move(copy), ep] {
      self->on_final(id, copy ? &*copy : nullptr, ep);
    });
  };
  auto job = item.job;
  items_.emplace(id, std::move(item));
  if (!ctx_.service.submit(job)) {
    items_.erase(id);
    send({{"type", "conversation.item.input_audio_transcription.failed"},
          {"item_id", id},
          {"content_index", 0},
          {"error",
           {{"type", "server_error"},
            {"code", "queue_full"},
            {"message", "[realtime] the server is busy (parley serve --queue); retry later"},
            {"param", nullptr}}}});
  }
}

std::shared_ptr<TranscriptionJob> RealtimeSession::make_job(int64_t begin, int64_t end) {
  auto job = std::make_shared<TranscriptionJob>();
  job->audio =
      wav16(std::span<const float>(buffer_.data() + (begin - buffer_start_), size_t(end - begin)));
  job->filename = id_ + ".wav";
  AudioRequest r;
  r.language = config_.language;
  r.prompt = config_.prompt;
  r.logprobs = config_.logprobs;
  job->options = transcribe_options(r);
  // Server VAD already found speech in it; a manual commit goes through the server's gate.
  if (config_.server_vad) job->vad = false;
  return job;
}

void RealtimeSession::maybe_interim() {
  if (interim_ || closed_) return;
  const bool live = config_.server_vad ? speaking_ : !buffer_.empty();
  if (!live) return;
  const int64_t begin = config_.server_vad ? item_start_ : buffer_start_;
  const int64_t end = buffer_end();
  if (end - begin < kInterimMin || end - interim_end_ < kInterimEvery) return;
  if (pending_item_.empty()) pending_item_ = new_id("item_");
  interim_end_ = end;
  auto job = make_job(begin, end);
  job->background = true;  // committed items' jobs go first
  job->options.token_logprobs = false;
  // Text to show, not to keep: one attempt at temperature 0 (no fallback ladder), and a
  // token budget by the audio's length.
  job->options.temperatures = {0.0f};
  job->options.sample_len = interim_token_budget(end - begin);
  // No fit_audio_ctx (the committed turn's only): cut off mid-word and fitted, jfk.wav's
  // "What your coun..." came out "What you are" in two passes running, so the interim text
  // agreed on words the committed turn did not say (tests/server/test_realtime.py).
  job->vad = false;
  const uint64_t serial = ++interim_serial_;
  const std::string id = pending_item_;
  auto self = shared_from_this();
  auto post = post_;
  job->on_done = [self, post, serial, id](const TranscribeResult* r, double, std::exception_ptr) {
    std::string text = r ? r->text : std::string();
    const bool ok = r != nullptr;
    post([self, serial, id, ok, text = std::move(text)]() mutable {
      if (self->interim_serial_ != serial) return;  // superseded (commit, clear)
      self->interim_.reset();
      if (ok) self->on_interim(serial, id, std::move(text));
      self->maybe_interim();
    });
  };
  interim_ = job;
  if (!ctx_.service.submit(job)) interim_.reset();  // busy: the final transcript still comes
}

void RealtimeSession::on_interim(uint64_t, const std::string& item_id, std::string text) {
  if (closed_ || item_id != pending_item_) return;
  std::string hypothesis = strip(text);
  const std::string agreed = agreed_words(last_hypothesis_, hypothesis);
  last_hypothesis_ = std::move(hypothesis);
  const std::string delta = next_delta(pending_sent_, agreed, true);
  if (delta.empty()) return;
  pending_sent_ += delta;
  send({{"type", "conversation.item.input_audio_transcription.delta"},
        {"item_id", item_id},
        {"content_index", 0},
        {"delta", delta}});
}

void RealtimeSession::on_final(const std::string& item_id, const TranscribeResult* r,
                               std::exception_ptr ep) {
  auto it = items_.find(item_id);
  if (it == items_.end()) return;
  Item item = std::move(it->second);
  items_.erase(it);
  if (closed_) return;
  if (ep) {
    std::string message = "[realtime] transcription failed", code = "internal";
    try {
      std::rethrow_exception(ep);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::cancelled) return;
      message = e.what();
      code = std::string(to_string(e.kind()));
    } catch (const std::exception& e) {
      message = e.what();
    }
    send({{"type", "conversation.item.input_audio_transcription.failed"},
          {"item_id", item_id},
          {"content_index", 0},
          {"error",
           {{"type", "server_error"}, {"code", code}, {"message", message}, {"param", nullptr}}}});
    return;
  }
  const std::string transcript = strip(r->text);
  const std::string delta = next_delta(item.sent, transcript, true);
  if (!delta.empty()) {
    send({{"type", "conversation.item.input_audio_transcription.delta"},
          {"item_id", item_id},
          {"content_index", 0},
          {"delta", delta}});
  }
  json done = {{"type", "conversation.item.input_audio_transcription.completed"},
               {"item_id", item_id},
               {"content_index", 0},
               {"transcript", transcript},
               {"usage", {{"type", "duration"}, {"seconds", item.seconds}}}};
  if (config_.logprobs) done["logprobs"] = json::parse(logprobs_json(*r));
  // Counted as the event is queued, before a client could read /metrics after it.
  ctx_.service.record_live_turn(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - item.committed_at).count());
  send(std::move(done));
}

}  // namespace parley::server
