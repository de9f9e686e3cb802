#include "serving/whisper_service.h"

#include <malloc.h>

#include <filesystem>

#include "audio/decode.h"
#include "engine/error.h"
#include "serving/delta_stream.h"
#include "vad/segments.h"
#include "vad/silero.h"
#include "whisper/model.h"
#include "whisper/tokenizer.h"

namespace parley {

struct WhisperService::Loaded {
  std::shared_ptr<const WhisperModel> model;
  WhisperTokenizer tokenizer;  // parsed once per load, not per request
};

WhisperService::WhisperService(ServiceOptions options) : options_(std::move(options)) {
  check_arg(options_.workers >= 1, "[serve] --workers must be at least 1");
  check_arg(options_.load.device != Device::cuda || options_.workers == 1,
            "[serve] a CUDA model runs one worker (one stream, graphed decoder steps)");
  check_arg(options_.queue_capacity >= 0, "[serve] --queue must be >= 0");
  if (!options_.vad_model.empty()) vad_ = vad::SileroModel::load(options_.vad_model);
  if (options_.residency == Residency::resident) {
    auto model =
        WhisperModel::load(options_.model_dir, options_.load);  // fails at start-up, not later
    resident_ = std::make_shared<const Loaded>(Loaded{model, load_tokenizer(*model)});
  }
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

WhisperService::~WhisperService() { stop(); }

std::string WhisperService::model_id() const {
  const auto dir = std::filesystem::path(options_.model_dir).lexically_normal();
  // "models/tiny/" normalizes to "models/tiny/" (empty filename): take the folder's name.
  return (dir.has_filename() ? dir : dir.parent_path()).filename().string();
}

bool WhisperService::submit(std::shared_ptr<TranscriptionJob> job) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    // Jobs a free worker takes at once do not count against the queue.
    const int free_workers = options_.workers - running_;
    if (int(queue_.size()) >= options_.queue_capacity + std::max(0, free_workers)) return false;
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

void WhisperService::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

ServiceStats WhisperService::stats() const {
  ServiceStats s;
  {
    std::lock_guard lock(mu_);
    s.audio_seconds = audio_seconds_;
    s.compute_seconds = compute_seconds_;
    s.queued = int(queue_.size());
    s.running = running_;
    s.vad_skipped = vad_skipped_;
  }
  std::lock_guard lock(model_mu_);
  s.model_loaded = resident_ != nullptr || !shared_.expired();
  return s;
}

std::shared_ptr<const WhisperService::Loaded> WhisperService::acquire_model() {
  std::lock_guard lock(model_mu_);
  if (resident_) return resident_;
  if (auto m = shared_.lock()) return m;
  auto model = WhisperModel::load(options_.model_dir, options_.load);
  auto m = std::make_shared<const Loaded>(Loaded{model, load_tokenizer(*model)});
  shared_ = m;
  return m;
}

void WhisperService::worker_loop() {
  WorkerState worker;
  while (true) {
    std::shared_ptr<TranscriptionJob> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued is done
      job = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    Outcome out = run(*job, worker);
    // Release before answering, so a client that has its answer sees the memory freed and
    // the worker free (the next request is not refused by a stale running count).
    if (options_.residency == Residency::per_request) {
      std::unique_lock<std::mutex> gpu;
      if (options_.load.device == Device::cuda) gpu = std::unique_lock(cuda::exclusive());
      worker.session.reset();
      worker.loaded.reset();
      malloc_trim(0);  // hand freed weights and caches back to the system (RSS drops)
    }
    {
      std::lock_guard lock(mu_);
      --running_;
    }
    job->on_done(out.result ? &*out.result : nullptr, out.audio_seconds, out.error);
  }
}

WhisperService::Outcome WhisperService::run(TranscriptionJob& job, WorkerState& worker) {
  const auto t0 = std::chrono::steady_clock::now();
  Outcome out;
  double& audio_seconds = out.audio_seconds;
  try {
    check(!job.cancelled.load(), ErrorKind::cancelled, "[serve] request cancelled while queued");
    const std::vector<float> samples = decode_audio(job.audio, job.filename);
    job.audio = {};  // the upload is no longer needed
    audio_seconds = double(samples.size()) / 16000.0;
    check_arg(!samples.empty(), "[audio] " + job.filename + ": no audio samples");

    // The silence gate: no speech, no Whisper (not even loaded, with per-request residency).
    if (job.vad.value_or(options_.vad_default && vad_ != nullptr)) {
      check_arg(vad_ != nullptr,
                "[serve] 'vad' needs a Silero VAD model: this server runs without one "
                "(--vad-model)");
      if (!vad::has_speech(*vad_, samples, 16000)) {
        out.result.emplace();
        out.result->language = job.options.language.value_or("");
        count_finished(audio_seconds, 0, true);
        return out;
      }
    }

    std::unique_lock<std::mutex> gpu;  // the GPU to itself (a chat model may share it)
    if (options_.load.device == Device::cuda) gpu = std::unique_lock(cuda::exclusive());
    std::shared_ptr<const Loaded> loaded = acquire_model();
    if (!worker.session || worker.loaded != loaded) {
      worker.session.reset();
      worker.session = std::make_unique<WhisperSession>(loaded->model);
      worker.loaded = loaded;
    }
    WhisperSession& session = *worker.session;
    const WhisperTokenizer& tokenizer = loaded->tokenizer;

    TranscribeOptions o = job.options;
    o.cancelled = [&job] { return job.cancelled.load(); };
    std::optional<DeltaStream> deltas;
    if (job.on_delta) {
      deltas.emplace(tokenizer, job.on_delta, o.no_speech_threshold, o.logprob_threshold);
      if (o.temperatures.size() <= 1) {
        o.on_token = [&](int32_t id) { deltas->on_token(id); };
        o.on_no_speech_prob = [&](float p) { deltas->on_no_speech_prob(p); };
      }
      o.on_segment = [&](const Segment& seg) { deltas->on_segment(seg); };
    }
    out.result = transcribe(session, tokenizer, samples, o);
    if (deltas) deltas->finish();
    count_finished(audio_seconds,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                   false);
  } catch (...) {
    out.result.reset();
    out.error = std::current_exception();
  }
  return out;
}

void WhisperService::count_finished(double audio_seconds, double compute_seconds,
                                    bool vad_skipped) {
  std::lock_guard lock(mu_);
  audio_seconds_ += audio_seconds;
  compute_seconds_ += compute_seconds;
  vad_skipped_ += vad_skipped ? 1 : 0;
}

std::string TextStreamer::push(const std::string& bytes) {
  pending_ += bytes;
  // Hold back a trailing lead byte whose continuation bytes have not all arrived.
  size_t keep = 0;
  for (size_t back = 1; back <= std::min<size_t>(4, pending_.size()); ++back) {
    const auto c = uint8_t(pending_[pending_.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    size_t need = 1;
    if ((c & 0xE0) == 0xC0)
      need = 2;
    else if ((c & 0xF0) == 0xE0)
      need = 3;
    else if ((c & 0xF8) == 0xF0)
      need = 4;
    if (need > back) keep = back;
    break;
  }
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string TextStreamer::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace parley
