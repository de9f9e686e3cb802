#include "serving/whisper_service.h"

#include <malloc.h>

#include <algorithm>
#include <filesystem>

#include <map>

#include "audio/decode.h"
#include "audio/mel.h"
#include "audio/mel_device.h"
#include "engine/error.h"
#include "serving/delta_stream.h"
#include "vad/segments.h"
#include "vad/silero.h"
#include "whisper/batch_session.h"
#include "whisper/batch_transcriber.h"
#include "whisper/model.h"
#include "whisper/tokenizer.h"

namespace parley {

struct WhisperService::Loaded {
  std::shared_ptr<const WhisperModel> model;
  WhisperTokenizer tokenizer;  // parsed once per load, not per request
};

// The engine thread's state. The model and its sessions exist while a job needs them (always,
// when resident); `running` maps the transcriber's file ids to their jobs.
struct WhisperService::Engine {
  struct Running {
    std::shared_ptr<TranscriptionJob> job;
    std::unique_ptr<DeltaStream> deltas;  // with job->on_delta
    double audio_seconds = 0;
  };
  std::shared_ptr<const Loaded> loaded;
  std::unique_ptr<WhisperBatchSession> batch;
  std::unique_ptr<WhisperSession> solo;
  std::unique_ptr<BatchTranscriber> transcriber;
  std::map<uint64_t, Running> running;
  BatchTranscribeStats counted;  // the transcriber's figures already added to the totals
};

namespace {

// The GPU to the engine alone for a while (a chat model may share it); nothing on the CPU.
std::unique_lock<std::mutex> hold_device(Device device) {
  if (device == Device::cuda) return std::unique_lock(cuda::exclusive());
  return {};
}

}  // namespace

WhisperService::WhisperService(ServiceOptions options) : options_(std::move(options)) {
  check_arg(options_.batch >= 1, "[serve] --whisper-batch must be at least 1");
  check_arg(options_.max_sample_len >= 0, "[serve] --sample-len must not be negative");
  check_arg(options_.background_slots >= 0, "[serve] --interim-slots must not be negative");
  if (options_.background_slots == 0) options_.background_slots = std::max(1, options_.batch / 4);
  check_arg(options_.queue_capacity >= 0, "[serve] --queue must be >= 0");
  if (!options_.vad_model.empty()) vad_ = vad::SileroModel::load(options_.vad_model);
  if (options_.residency == Residency::resident) {
    auto model =
        WhisperModel::load(options_.model_dir, options_.load);  // fails at start-up, not later
    resident_ = std::make_shared<const Loaded>(Loaded{model, load_tokenizer(*model)});
  }
  engine_ = std::thread([this] { engine_loop(); });
}

WhisperService::~WhisperService() { stop(); }

std::string WhisperService::model_id() const {
  const auto dir = std::filesystem::path(options_.model_dir).lexically_normal();
  // "models/tiny/" normalizes to "models/tiny/" (empty filename): take the folder's name.
  return (dir.has_filename() ? dir : dir.parent_path()).filename().string();
}

bool WhisperService::submit(std::shared_ptr<TranscriptionJob> job) {
  if (const int cap = options_.max_sample_len; cap > 0) {
    int& n = job->options.sample_len;
    n = n > 0 ? std::min(n, cap) : cap;
  }
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    // Jobs the engine takes into the batch at once do not count against the queue.
    const int free_slots = options_.batch - running_;
    if (int(queue_.size()) >= options_.queue_capacity + std::max(0, free_slots)) return false;
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
  if (engine_.joinable()) engine_.join();
}

void WhisperService::record_live_turn(double seconds) {
  std::lock_guard lock(mu_);
  live_turn_.add(seconds);
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
    s.background_yielded = background_yielded_;
    s.windows = windows_;
    s.fitted_windows = fitted_windows_;
    s.encoder_batches = encoder_batches_;
    s.decoder_steps = decoder_steps_;
    s.encode_seconds = encode_seconds_;
    s.decode_seconds = decode_seconds_;
    s.fallback_seconds = fallback_seconds_;
    s.start_seconds = start_seconds_;
    s.live_turn = live_turn_;
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

void WhisperService::engine_loop() {
  Engine engine;
  while (true) {
    std::vector<std::shared_ptr<TranscriptionJob>> taken;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !engine.running.empty(); });
      if (queue_.empty() && engine.running.empty()) return;  // stopping, and all is done
      int background = int(std::count_if(engine.running.begin(), engine.running.end(),
                                         [](const auto& r) { return r.second.job->background; }));
      int foreground = int(engine.running.size()) - background;
      while (!queue_.empty() && running_ < options_.batch) {
        auto next = std::find_if(queue_.begin(), queue_.end(),
                                 [](const auto& j) { return !j->background; });
        if (next != queue_.end()) {
          ++foreground;
        } else {  // background jobs alone: oldest first, in their slots, and only while no
          // other job runs (a joining job's encoder pass holds up every running job's step)
          if (foreground > 0 || background >= options_.background_slots) break;
          next = queue_.begin();
          ++background;
        }
        taken.push_back(std::move(*next));
        queue_.erase(next);
        ++running_;
      }
      // Background jobs yield their slots: for each other job still waiting (every slot is
      // taken), one running background job is cancelled; it ends at its next decoder step.
      int waiting = int(std::count_if(queue_.begin(), queue_.end(),
                                      [](const auto& j) { return !j->background; }));
      for (auto& [id, r] : engine.running) {
        if (waiting == 0) break;
        if (r.job->background && !r.job->cancelled.exchange(true)) {
          --waiting;
          ++background_yielded_;
        }
      }
    }
    for (auto& job : taken) start(std::move(job), engine);
    if (!engine.running.empty()) iterate(engine);
  }
}

void WhisperService::start(std::shared_ptr<TranscriptionJob> job, Engine& engine) {
  const auto t0 = std::chrono::steady_clock::now();
  double audio_seconds = 0;
  try {
    check(!job->cancelled.load(), ErrorKind::cancelled, "[serve] request cancelled while queued");
    const std::vector<float> samples = decode_audio(job->audio, job->filename);
    job->audio = {};  // the upload is no longer needed
    audio_seconds = double(samples.size()) / 16000.0;
    check_arg(!samples.empty(), "[audio] " + job->filename + ": no audio samples");

    // The silence gate: no speech, no Whisper (not even loaded, with per-request residency).
    if (job->vad.value_or(options_.vad_default && vad_ != nullptr)) {
      check_arg(vad_ != nullptr,
                "[serve] 'vad' needs a Silero VAD model: this server runs without one "
                "(--vad-model)");
      if (!vad::has_speech(*vad_, samples, 16000)) {
        TranscribeResult empty;
        empty.language = job->options.language.value_or("");
        count_finished(audio_seconds, 0, true);
        answer(*job, &empty, audio_seconds, nullptr);
        return;
      }
    }

    auto gpu = hold_device(options_.load.device);
    if (!engine.transcriber) {
      engine.loaded = acquire_model();
      engine.batch = std::make_unique<WhisperBatchSession>(engine.loaded->model, options_.batch);
      engine.solo = std::make_unique<WhisperSession>(engine.loaded->model);
      engine.transcriber =
          std::make_unique<BatchTranscriber>(*engine.batch, *engine.solo, engine.loaded->tokenizer);
      engine.counted = {};
    }
    const WhisperModel& model = *engine.loaded->model;
    Engine::Running run{job, nullptr, audio_seconds};
    TranscribeOptions o = job->options;
    TranscriptionJob* j = job.get();  // alive while `running` holds it
    o.cancelled = [j] { return j->cancelled.load(); };
    if (job->on_delta) {
      run.deltas = std::make_unique<DeltaStream>(engine.loaded->tokenizer, job->on_delta,
                                                 o.no_speech_threshold, o.logprob_threshold);
      DeltaStream* d = run.deltas.get();
      if (o.temperatures.size() <= 1) {
        o.on_token = [d](int32_t id) { d->on_token(id); };
        o.on_no_speech_prob = [d](float p) { d->on_no_speech_prob(p); };
      }
      o.on_segment = [d](const Segment& seg) { d->on_segment(seg); };
    }
    Tensor mel =
        log_mel_spectrogram_for(model.device(), samples, model.config().n_mels, kChunkSamples);
    const uint64_t id = engine.transcriber->add(std::move(mel), std::move(o));
    engine.running.emplace(id, std::move(run));
  } catch (...) {
    answer(*job, nullptr, audio_seconds, std::current_exception());
    release_if_idle(engine);
  }
  std::lock_guard lock(mu_);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  compute_seconds_ += seconds;
  start_seconds_ += seconds;
}

void WhisperService::iterate(Engine& engine) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<BatchTranscriber::Finished> done;
  {
    auto gpu = hold_device(options_.load.device);
    try {
      done = engine.transcriber->step();
    } catch (...) {
      // The batch's own pass failed: every request in it ends with that error.
      done = engine.transcriber->abort(std::current_exception());
    }
  }
  const BatchTranscribeStats& st = engine.transcriber->stats();
  {
    std::lock_guard lock(mu_);
    compute_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    windows_ += uint64_t(st.windows - engine.counted.windows);
    encoder_batches_ += uint64_t(st.batches - engine.counted.batches);
    fitted_windows_ += uint64_t(st.fitted - engine.counted.fitted);
    decoder_steps_ += uint64_t(st.steps - engine.counted.steps);
    encode_seconds_ += (st.encode_ms - engine.counted.encode_ms) / 1000.0;
    decode_seconds_ += (st.decode_ms - engine.counted.decode_ms) / 1000.0;
    fallback_seconds_ += (st.fallback_ms - engine.counted.fallback_ms) / 1000.0;
  }
  engine.counted = st;
  std::vector<std::pair<Engine::Running, BatchTranscriber::Finished>> ended;
  for (auto& f : done) {
    auto it = engine.running.find(f.id);
    if (it == engine.running.end()) continue;
    Engine::Running run = std::move(it->second);
    engine.running.erase(it);
    if (f.result && run.deltas) {
      try {
        run.deltas->finish();
      } catch (...) {
        f.result.reset();
        f.error = std::current_exception();
      }
    }
    if (f.result) count_finished(run.audio_seconds, 0, false);
    ended.emplace_back(std::move(run), std::move(f));
  }
  // Release before answering, so a client that has its answer sees the memory freed.
  release_if_idle(engine);
  for (auto& [run, f] : ended)
    answer(*run.job, f.result ? &*f.result : nullptr, run.audio_seconds, f.error);
}

void WhisperService::release_if_idle(Engine& engine) {
  if (options_.residency != Residency::per_request || !engine.running.empty() ||
      !engine.transcriber)
    return;
  {
    std::lock_guard lock(mu_);
    if (!queue_.empty()) return;  // the next job would load it again at once
  }
  auto gpu = hold_device(options_.load.device);
  engine.transcriber.reset();
  engine.solo.reset();
  engine.batch.reset();
  engine.loaded.reset();
  malloc_trim(0);  // hand freed weights and caches back to the system (RSS drops)
}

void WhisperService::answer(TranscriptionJob& job, const TranscribeResult* result,
                            double audio_seconds, std::exception_ptr error) {
  {
    std::lock_guard lock(mu_);
    --running_;
  }
  job.on_done(result, audio_seconds, error);
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
