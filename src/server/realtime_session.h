// One OpenAI Realtime transcription session (`/v1/realtime?intent=transcription`, docs/
// SERVER.md "Realtime transcription"): the client events in, the server events out, with no
// transport in it (realtime.cpp carries it over a WebSocket). Audio arrives as base64
// pcm16 at 24 kHz or G.711 at 8 kHz and is resampled to 16 kHz as it comes; turns end by
// Silero VAD (`server_vad`) or by the client's commit (`turn_detection: null`); every
// committed item is one TranscriptionJob through WhisperService, so the items of all live
// sessions share the engine's encoder calls and decoder steps.
//
// Interim text: while the user speaks, the item's audio so far is transcribed again every
// 0.5 s of new audio (at most one such job in flight per session); the words the last two
// hypotheses agree on, beyond what was already sent, go out as
// `...input_audio_transcription.delta`. Deltas never retract: when a hypothesis does not start with
// the sent text (at a word boundary), nothing more is sent until the item completes; the completed
// event's `transcript` is the final text, and when it extends the sent text, its rest is sent
// as one last delta first (so the deltas then add up to the transcript).
//
// Threading: every method runs on the connection's strand; job callbacks (engine thread)
// only post back to it through `Post`, so the engine never waits on a client.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "audio/resample.h"
#include "serving/whisper_service.h"
#include "vad/segments.h"

namespace parley::server {

// The settings one session runs with; the defaults are OpenAI's.
struct RealtimeConfig {
  enum class Format { pcm16, pcmu, pcma };
  Format format = Format::pcm16;  // pcm16: 24 kHz little-endian; pcmu / pcma: 8 kHz
  bool server_vad = true;         // false: turn_detection null, the client commits
  double threshold = 0.5;         // Silero speech probability
  int prefix_padding_ms = 300;    // audio kept before the detected start
  int silence_duration_ms = 500;  // silence that ends a turn
  std::string model = "whisper-1";
  std::optional<std::string> language;
  std::optional<std::string> prompt;
  bool logprobs = false;  // include: item.input_audio_transcription.logprobs
};

struct RealtimeContext {
  WhisperService& service;
  std::shared_ptr<const vad::SileroModel> vad;  // null: server_vad is refused
  std::string model_id;                         // the served Whisper model's name
};

// The delta to send for a new hypothesis of an item whose deltas so far add up to `sent`:
// the hypothesis' text beyond `sent`, up to its last space unless `final`; empty when the
// hypothesis does not continue `sent` at a word boundary (deltas never retract).
std::string next_delta(std::string_view sent, std::string_view hypothesis, bool final);

// The most tokens an interim pass over `samples` of 16 kHz audio decodes per window: 32 plus
// 10 a second (speech runs at 2-5 tokens a second), at most 224 (a window's usual limit). A
// pass whose window hallucinates stops there instead of running 224 steps for text that is
// only shown.
int interim_token_budget(int64_t samples);

// The longest run of whole words (space-separated) that `a` and `b` both start with: what two
// successive interim hypotheses agree on (whisper_streaming's LocalAgreement-2), the only
// interim text sent.
std::string agreed_words(std::string_view a, std::string_view b);

class RealtimeSession : public std::enable_shared_from_this<RealtimeSession> {
 public:
  using Emit = std::function<void(std::string)>;            // one server event (JSON)
  using Post = std::function<void(std::function<void()>)>;  // run on the session's strand

  // beta: the client sent `OpenAI-Beta: realtime=v1` (transcription_session.* events and the
  // beta session shape). preset: a GA session object (a client secret's) applied first.
  RealtimeSession(RealtimeContext& ctx, bool beta, Emit emit, Post post,
                  const nlohmann::json& preset = nullptr);
  ~RealtimeSession();

  void start();                         // session.created / transcription_session.created
  void on_text(std::string_view text);  // one client event
  void on_binary();                     // a binary frame: an error event
  void close();                         // the client is gone: cancels every job

  // Parses a GA `session` object over `config` (only the fields present); throws
  // ApiException naming the field at fault. Public for client secrets.
  static void apply_ga(const nlohmann::json& s, RealtimeConfig& config, const RealtimeContext& ctx);
  static nlohmann::json ga_session(const RealtimeConfig& c, const std::string& id);

 private:
  struct Item {  // a committed item waiting for its transcript
    std::shared_ptr<TranscriptionJob> job;
    std::string sent;  // deltas sent so far
    double seconds = 0;
    std::chrono::steady_clock::time_point committed_at;  // its .committed was sent
  };
  void handle(const nlohmann::json& event, const std::string& client_event_id);
  void update(const nlohmann::json& session, bool beta_event);
  void append(const nlohmann::json& event);
  void commit(const std::string& client_event_id);
  void clear();
  void run_vad();
  void speech_started(int64_t sample);
  void speech_stopped(int64_t sample);
  void commit_range(int64_t begin, int64_t end);
  void maybe_interim();
  void on_interim(uint64_t serial, const std::string& item_id, std::string text);
  void on_final(const std::string& item_id, const TranscribeResult* r, std::exception_ptr ep);
  std::shared_ptr<TranscriptionJob> make_job(int64_t begin, int64_t end);
  void reset_turns();
  void drop_interim();  // cancels the interim job in flight, if any  // a fresh VAD from the end of
                        // the buffer, no speech in progress

  void send(nlohmann::json event);
  void send_error(const std::string& message, const std::string& code,
                  std::optional<std::string> param, const std::string& client_event_id,
                  const std::string& type = "invalid_request_error");
  nlohmann::json session_json() const;
  std::string new_id(const char* prefix);
  int64_t buffer_end() const { return buffer_start_ + int64_t(buffer_.size()); }

  RealtimeContext& ctx_;
  bool beta_;
  Emit emit_;
  Post post_;
  RealtimeConfig config_;
  std::string id_;
  std::mt19937_64 rng_;
  bool closed_ = false;

  StreamResampler resampler_{24000, 16000};
  std::vector<float> scratch_;  // decoded input before resampling
  // The input buffer at 16 kHz: samples [buffer_start_, buffer_end()) of the session's audio.
  std::vector<float> buffer_;
  int64_t buffer_start_ = 0;
  std::unique_ptr<vad::VadIterator> vad_;
  int64_t vad_fed_ = 0;   // session sample up to which the VAD has run
  int64_t vad_base_ = 0;  // session sample of the VAD's sample 0
  bool speaking_ = false;
  int64_t item_start_ = 0;                     // the speaking turn's first sample (prefix included)
  std::string pending_item_;                   // id of the item the buffer will become
  std::string last_item_;                      // the previous committed item (previous_item_id)
  std::shared_ptr<TranscriptionJob> interim_;  // the interim job in flight
  uint64_t interim_serial_ = 0;
  int64_t interim_end_ = 0;      // buffer end at the last interim job
  std::string pending_sent_;     // deltas sent for pending_item_
  std::string last_hypothesis_;  // pending_item_'s previous interim text
  std::map<std::string, Item> items_;
};

}  // namespace parley::server
