// WhisperService: the serving side of transcription requests. A bounded queue of jobs
// and N worker threads; each worker owns a WhisperSession over one shared, immutable
// WhisperModel (or, with per-request residency, over a model loaded while any request
// needs it and released when none does). Results go back through the job's callbacks, on
// the worker thread; the HTTP layer posts them to its connections.
//
// Fairness: the N workers decode concurrently (the CPU ops interleave through the shared
// thread pool; on a GPU, kernels interleave on the device), so a long file shares the
// machine with up to N-1 other requests rather than holding it; only beyond N active
// requests do jobs wait, first in first out. Cross-request window batching comes later
// (DESIGN.md section 7).
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
  // Where the model runs and its dtype. The CUDA backend queues all work on one stream
  // (and captures decoder steps as graphs), so a CUDA service runs one worker.
  LoadOptions load;
  int workers = 2;          // requests decoded concurrently
  int queue_capacity = 64;  // requests waiting beyond the running ones; more are refused
  Residency residency = Residency::resident;
  // Silero VAD model file for the silence gate; empty: no gate (a request asking for it
  // gets Error(invalid_argument)).
  std::string vad_model;
  // Whether a request that does not say (`vad` field) goes through the gate.
  bool vad_default = true;
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
  std::chrono::steady_clock::time_point enqueued = std::chrono::steady_clock::now();
};

struct ServiceStats {
  double audio_seconds = 0;    // audio transcribed, seconds
  double compute_seconds = 0;  // wall time workers spent on it
  int queued = 0;
  int running = 0;
  bool model_loaded = false;
  uint64_t vad_skipped = 0;  // requests the gate answered without running Whisper
};

class WhisperService {
 public:
  // Resident: loads the model now (throws as WhisperModel::load). Starts the workers.
  explicit WhisperService(ServiceOptions options);
  ~WhisperService();  // stop(): drains
  WhisperService(const WhisperService&) = delete;
  WhisperService& operator=(const WhisperService&) = delete;

  // Queues the job; false when the queue is full or the service is stopping.
  bool submit(std::shared_ptr<TranscriptionJob> job);
  // Stops taking jobs, finishes every queued and running one, joins the workers.
  void stop();

  ServiceStats stats() const;
  const ServiceOptions& options() const { return options_; }
  std::string model_id() const;  // the model folder's name

 private:
  struct Loaded;  // a model and its tokenizer
  void worker_loop();
  struct Outcome {
    std::optional<TranscribeResult> result;
    double audio_seconds = 0;
    std::exception_ptr error;
  };
  // One worker's state: its session, and the model it was made for (kept across jobs when
  // resident, dropped after each job when per-request).
  struct WorkerState {
    std::shared_ptr<const Loaded> loaded;
    std::unique_ptr<class WhisperSession> session;
  };
  Outcome run(TranscriptionJob& job, WorkerState& worker);
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
  std::vector<std::thread> workers_;

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
