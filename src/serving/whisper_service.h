// WhisperService: the serving side of transcription requests. A bounded queue of jobs and
// one engine thread per service (one model on one device) that runs them as one continuous
// batch (BatchTranscriber, whisper/batch_transcriber.h): windows of different requests share
// encoder calls and decoder steps, each request keeping its own seek, prompt, options and
// temperature fallback. The engine takes queued jobs into the batch while fewer than
// ServiceOptions::batch are running (each decodes its audio, goes through the VAD gate and
// joins at the next iteration); a window that ends frees its slot for the next step. With
// per-request residency the model is loaded while any request needs it and released when
// none does. Results go back through the job's callbacks, on the engine thread (streaming
// deltas of batched attempts from the CPU threads); the HTTP layer posts them to its
// connections.
//
// Fairness: every running request advances one token per decoder step, so a long file
// shares the machine with the others rather than holding it; beyond `batch` running
// requests jobs wait, first in first out (background jobs, a live stream's interim text,
// after every other waiting job and join only while no other job runs, a running one gives
// its slot up to a waiting job, and at most ServiceOptions::background_slots run at once).
// Windows the batch cannot decode (a temperature fallback, beam search) run whole on the
// engine thread between steps.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "serving/latency_histogram.h"
#include "whisper/model.h"
#include "whisper/transcribe.h"

namespace parley {

namespace vad {
class SileroModel;
}

enum class Residency {
  resident,     // loaded at start-up, kept
  per_request,  // loaded when a request starts (shared by overlapping ones), freed after
};

struct ServiceOptions {
  std::string model_dir;
  // Where the model runs and its dtype. On CUDA the engine takes cuda::exclusive() for each
  // iteration, so a chat model on the same GPU runs between steps.
  LoadOptions load;
  // Requests decoded together (--whisper-batch): the batch session's slots, one window of
  // each running request; 1: one request at a time.
  int batch = 16;
  int queue_capacity = 64;  // requests waiting beyond the running ones; more are refused
  Residency residency = Residency::resident;
  // Silero VAD model file for the silence gate; empty: no gate (a request asking for it
  // gets Error(invalid_argument)).
  std::string vad_model;
  // Whether a request that does not say (`vad` field) goes through the gate.
  bool vad_default = true;
  // Most tokens any job decodes per 30 s window (--sample-len; openai-whisper's sample_len):
  // a job's own smaller limit stays. 0: the model's (224 for Whisper).
  int max_sample_len = 0;
  // Most background jobs (live streams' interim text) running at once (--interim-slots),
  // however many slots are free: under many live streams their passes (an encoder call
  // each, and decoder rows) would otherwise fill the batch and slow every committed turn,
  // so interim text comes less often instead. 0: a quarter of `batch` (at least 1).
  int background_slots = 0;
  // A live stream's committed turns (Realtime) set TranscribeOptions::fit_audio_ctx
  // (--live-audio-ctx fit): the encoder over the turn's audio plus 2 s rather than a whole
  // 30 s window. Its interim passes keep the whole window.
  bool live_fit_audio_ctx = false;
};

struct TranscriptionJob {
  std::vector<uint8_t> audio;  // the file as uploaded; decoded on the worker
  std::string filename;        // names the input in errors, hints the format
  TranscribeOptions options;   // on_token / on_segment / cancelled are set by the service
  // The silence gate: audio in which Silero VAD finds no speech gets an empty transcript
  // without Whisper being loaded or run. nullopt: ServiceOptions::vad_default.
  std::optional<bool> vad;
  // Streaming: called with each piece of new transcript text as it is decoded (see
  // StreamPolicy in whisper_service.cpp). Null: no streaming.
  std::function<void(const std::string&)> on_delta;
  // Called once, last: the result, or the exception that ended the job
  // (Error(cancelled) when `cancelled` was set).
  std::function<void(const TranscribeResult*, double audio_seconds, std::exception_ptr)> on_done;
  std::atomic<bool> cancelled{false};
  // Best effort (a live stream's interim text): taken from the queue only when no other job
  // waits, and cancelled (Error(cancelled) at its next decoder step) when another job waits
  // with every slot taken, so the answers someone is waiting for (a committed turn, a file)
  // go first.
  bool background = false;
  std::chrono::steady_clock::time_point enqueued = std::chrono::steady_clock::now();
};

struct ServiceStats {
  double audio_seconds = 0;    // audio transcribed, seconds
  double compute_seconds = 0;  // wall time the engine spent on it (load, decode, iterations)
  int queued = 0;
  int running = 0;               // requests taken by the engine and not yet answered
  uint64_t windows = 0;          // windows decoded in the batch
  uint64_t fitted_windows = 0;   // of those, encoded over a fitted context (--live-audio-ctx)
  uint64_t encoder_batches = 0;  // its encoder calls (windows / encoder_batches: sharing)
  uint64_t decoder_steps = 0;    // its decoder steps
  // Where the engine thread's time went (wall seconds; CUDA work waited for):
  double encode_seconds = 0;    // the batch's encoder calls
  double decode_seconds = 0;    // its prefills and decoder steps, the token choice included
  double fallback_seconds = 0;  // windows re-decoded alone (fallback ladder, solo windows)
  double start_seconds = 0;     // taking jobs in: audio decoding, the VAD gate, the log-mel, loads
  bool model_loaded = false;
  uint64_t vad_skipped = 0;         // requests the gate answered without running Whisper
  uint64_t background_yielded = 0;  // background jobs cancelled to free a slot for another
  // Realtime turns: from the server's input_audio_buffer.committed to its .completed (both
  // as the connection queued them), seconds; record_live_turn fills it.
  LatencyHistogram live_turn{{0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2, 5}};
};

class WhisperService {
 public:
  // Resident: loads the model now (throws as WhisperModel::load). Starts the engine.
  explicit WhisperService(ServiceOptions options);
  ~WhisperService();  // stop(): drains
  WhisperService(const WhisperService&) = delete;
  WhisperService& operator=(const WhisperService&) = delete;

  // Queues the job; false when the queue is full or the service is stopping.
  bool submit(std::shared_ptr<TranscriptionJob> job);
  // Stops taking jobs, finishes every queued and running one, joins the engine.
  void stop();

  ServiceStats stats() const;
  const ServiceOptions& options() const { return options_; }
  // A live turn's commit -> completed, seconds (ServiceStats::live_turn).
  void record_live_turn(double seconds);
  std::string model_id() const;  // the model folder's name

 private:
  struct Loaded;  // a model and its tokenizer
  struct Engine;  // the engine thread's state: the model, its sessions, the running jobs
  void engine_loop();
  // Takes a job into the batch (decode, VAD gate, model, mel); false when it ended here.
  void start(std::shared_ptr<TranscriptionJob> job, Engine& engine);
  void iterate(Engine& engine);  // one step of the batch; answers the jobs that ended
  void release_if_idle(Engine& engine);
  // Answers a job (running_ drops first, so its client sees the slot free).
  void answer(TranscriptionJob& job, const TranscribeResult* result, double audio_seconds,
              std::exception_ptr error);
  std::shared_ptr<const Loaded> acquire_model();
  // Adds a finished job to the totals; vad_skipped: the VAD gate answered it.
  void count_finished(double audio_seconds, double compute_seconds, bool vad_skipped);

  ServiceOptions options_;
  std::shared_ptr<const vad::SileroModel> vad_;  // null without ServiceOptions::vad_model
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<TranscriptionJob>> queue_;
  int running_ = 0;
  bool stopping_ = false;
  // Totals of the finished jobs (stats()), added by count_finished.
  double audio_seconds_ = 0;
  double compute_seconds_ = 0;
  uint64_t vad_skipped_ = 0;
  uint64_t background_yielded_ = 0;  // background jobs cancelled for a waiting job
  uint64_t windows_ = 0, encoder_batches_ = 0, decoder_steps_ = 0, fitted_windows_ = 0;
  double encode_seconds_ = 0, decode_seconds_ = 0, fallback_seconds_ = 0, start_seconds_ = 0;
  LatencyHistogram live_turn_ = ServiceStats{}.live_turn;
  std::thread engine_;

  mutable std::mutex model_mu_;
  std::shared_ptr<const Loaded> resident_;  // resident mode
  std::weak_ptr<const Loaded> shared_;      // per-request mode: alive while in use
};

// Turns sampled token ids into UTF-8 text pieces, holding back a character split across
// tokens until it is complete.
class TextStreamer {
 public:
  // Appends a token's bytes; returns the text that became complete (may be empty).
  std::string push(const std::string& bytes);
  // Whatever is still held back (an incomplete character at the very end).
  std::string flush();

 private:
  std::string pending_;
};

}  // namespace parley
