// AudioSessions: streaming transcription sessions (/v1/audio/sessions, docs/SERVER.md).
// A client creates a session, appends audio chunks while it records, reads the partial
// transcript at any time and closes the session for the transcript of the whole audio.
//
// Spooling: each session is a folder under the sessions directory with `audio.bin` (the
// bytes as uploaded, appended and fdatasync'ed before an append is acknowledged) and
// `meta.json` (options, committed segments, state; replaced atomically by temp file +
// rename). A restarted server reloads the folders, so a session survives a restart and can
// be closed afterwards; a folder whose meta.json is missing or corrupt is skipped, counted
// and logged.
//
// Transcription during capture goes through WhisperService::submit like any request: a
// background thread decodes the spooled audio (FFmpeg, or raw PCM wrapped as a WAV) and,
// as soon as a whole 30 s window lies past the committed seek, submits the audio from that
// seek to the end of what has arrived. The job runs the ordinary seek loop over the windows
// that have their whole 30 s of audio (TranscribeOptions::complete_windows_only), and all
// of them are committed: their segments join the partial transcript, the seek moves to
// where the loop stopped (TranscribeResult::next_seek), and the next job starts there with the
// committed tokens as its prompt (TranscribeOptions::prompt_tokens), as the offline seek
// loop's next window would. Closing
// transcribes what is left the same way, so the final transcript is the offline one's
// windows, cut at the same places (see docs/SERVER.md for what can still differ).
//
// With SessionCommit::agreed (opt-in) the audio past the seek is also transcribed
// while it is shorter than a window: a "tail pass" over [seek, end of what arrived) every
// agree_step_s of new audio, its windows encoded over a fitted context
// (TranscribeOptions::fit_audio_ctx). A tail pass's segments that the previous pass gave
// with the same words (case and punctuation aside), that are not its last segment and that
// end agree_guard_s before the audio does, are committed, and the seek moves to the last
// one's end (whisper_streaming's local agreement, by segments). The close then has only
// what follows the last agreed segment to transcribe; when the last tail pass already
// read every byte, its segments are the rest of the transcript and the close answers at
// once (a close stops a running tail pass that has not read every byte). Windows are then
// cut at other places than the offline seek loop's, so the text can differ from it a little.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "serving/whisper_service.h"
#include "whisper/segments.h"
#include "whisper/transcribe.h"

namespace parley {

// How the appended bytes are to be read.
enum class SessionInput {
  container,  // one file in any container FFmpeg reads, arriving in pieces
  pcm16,      // raw little-endian signed 16-bit mono samples at sample_rate
  f32,        // raw little-endian float32 mono samples at sample_rate
};

// What a session commits while audio still arrives (see the top of this file).
enum class SessionCommit {
  windows,  // whole 30 s windows only: the final transcript is the offline seek loop's
  agreed,   // also the segments two tail passes agree on: the close has seconds left
};

// "windows" or "agreed"; the parse throws invalid_argument for anything else.
const char* commit_name(SessionCommit c);
SessionCommit commit_from_name(const std::string& s);

// What the client chose when creating the session.
struct SessionConfig {
  std::string model;  // the model name the client gave (echoed back)
  std::optional<std::string> language;
  std::optional<std::string> prompt;     // conditions the first window (initial_prompt)
  float temperature = 0;                 // 0: the fallback ladder, as /v1/audio/transcriptions
  std::string response_format = "json";  // the close's default
  SessionInput input = SessionInput::container;
  int sample_rate = 16000;              // raw PCM's rate, Hz
  std::string filename;                 // container: a name whose extension hints the format
  std::optional<SessionCommit> commit;  // unset: AudioSessionsOptions::commit
};

struct AudioSessionsOptions {
  std::string dir;                            // the spool; created when missing
  double idle_timeout_s = 600;                // a session without requests this long is deleted
  int max_sessions = 64;                      // open sessions at once (create beyond: 429)
  uint64_t max_session_bytes = 512ull << 20;  // audio bytes per session (append beyond: 413)
  // Audio past the committed seek, seconds, before a job transcribes during capture (its
  // whole windows only): one window of 30 s. The close then has less than a window left.
  double capture_step_s = 30;
  // A session's default (parley serve --session-commit).
  SessionCommit commit = SessionCommit::windows;
  // SessionCommit::agreed: new audio, seconds, since the last tail pass before another
  // runs; audio past the seek before the first; how far before the end of the audio a
  // committed segment must end.
  double agree_step_s = 2;
  double agree_min_s = 1;
  double agree_guard_s = 0.5;
};

struct SessionStatus {
  std::string id;
  std::string state;  // "open", "closing" (final transcription running), "completed"
  SessionConfig config;
  int64_t created_at = 0;          // unix seconds
  uint64_t bytes_received = 0;     // spooled audio bytes
  double seconds_received = 0;     // decoded audio, seconds (as of the last decode)
  double seconds_transcribed = 0;  // audio before the committed seek, seconds
  std::string text;                // the committed (partial) transcript; all of it when completed
  std::string language;            // detected or given; empty until known
  double idle_expires_in_s = 0;
};

// The final transcript of a closed session and its audio's length.
struct SessionResult {
  TranscribeResult result;
  double duration = 0;
  SessionConfig config;
};

using SessionDone = std::function<void(std::shared_ptr<const SessionResult>, std::exception_ptr)>;

class AudioSessions {
 public:
  // Loads the sessions found in options.dir and starts the background thread.
  AudioSessions(AudioSessionsOptions options, WhisperService& service);
  ~AudioSessions();  // stop(), then waits for the jobs it submitted
  AudioSessions(const AudioSessions&) = delete;
  AudioSessions& operator=(const AudioSessions&) = delete;

  // Errors (parley::Error): invalid_argument for bad input; not_found for an unknown id;
  // resource_exhausted for --max-sessions (create) and --max-session-mb (append).
  SessionStatus create(const SessionConfig& config);
  SessionStatus append(const std::string& id, std::span<const uint8_t> bytes);
  SessionStatus status(const std::string& id);
  // Transcribes the rest and calls `done` once with the whole transcript (on a worker or
  // the background thread; at once when the session is already completed). A close that
  // fails (undecodable audio, no audio) leaves the session open.
  void close(const std::string& id, SessionDone done);
  void remove(const std::string& id);  // aborts: cancels its job, deletes its spool

  // Deletes sessions idle for longer than the timeout at `now`; returns how many.
  int expire_idle(std::chrono::steady_clock::time_point now);
  // Stops the background work; closes still waiting for a job fail with Error(cancelled).
  // Jobs already submitted finish (the service drains them) and commit their windows.
  void stop();

  int reloaded() const { return reloaded_; }  // sessions loaded from the directory at start
  int skipped() const { return skipped_; }    // folders skipped as corrupt
  int open_count() const;

 private:
  struct Entry;
  void load_dir();
  void run_background();
  void schedule(const std::shared_ptr<Entry>& e);
  enum class JobKind { windows, tail, final };
  void submit_job(const std::shared_ptr<Entry>& e, std::vector<float> samples, JobKind kind,
                  uint64_t bytes);
  void on_job_done(const std::shared_ptr<Entry>& e, int64_t start_sample, int64_t n_samples,
                   JobKind kind, uint64_t bytes, const TranscribeResult* r, std::exception_ptr ep);
  // Makes the committed segments the final transcript of `duration_samples` of audio and
  // takes the waiters; mu_ held.
  std::shared_ptr<const SessionResult> finish(Entry& e, int64_t duration_samples,
                                              std::vector<SessionDone>& waiters);
  void persist(const Entry& e) const;                  // writes meta.json atomically; mu_ held
  void persist_or_log(const Entry& e) const;           // persist; a failure is logged, not thrown
  std::shared_ptr<Entry> find(const std::string& id);  // throws not_found; mu_ held
  SessionStatus status_of(const Entry& e) const;       // mu_ held
  void drop(const std::shared_ptr<Entry>& e);          // deletes the spool; mu_ held

  AudioSessionsOptions options_;
  WhisperService& service_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<Entry>> sessions_;
  int jobs_in_flight_ = 0;
  bool stopping_ = false;
  int reloaded_ = 0;
  int skipped_ = 0;
  std::thread background_;
};

// Raw mono PCM (pcm16 or f32 bytes at `sample_rate`) wrapped in a RIFF WAV header, so FFmpeg
// resamples it as it would a file; a trailing partial sample is left out.
std::vector<uint8_t> wav_file(std::span<const uint8_t> pcm, SessionInput format, int sample_rate);

}  // namespace parley
