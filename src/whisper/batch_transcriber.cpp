// The continuous batch of transcriptions (batch_transcriber.h). Every per-window rule is
// SeekLoop's (seek_loop.h), every per-token rule WindowSearch's (decoding.h), the decoder
// passes batch_steps.h's; this file only schedules windows into slots.
#include "whisper/batch_transcriber.h"

#include <algorithm>
#include <chrono>

#include "audio/mel.h"
#include "engine/device.h"
#include "engine/error.h"
#include "whisper/batch_session.h"
#include "whisper/decoding.h"
#include "whisper/model.h"
#include "whisper/seek_loop.h"
#include "whisper/tokenizer.h"

namespace parley {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Whether a file's windows decode whole through the solo session: its first attempt is not
// one greedy or sampled candidate, or it wants what WindowSearch does not fill.
bool decodes_solo(const TranscribeOptions& o) {
  if (o.temperatures.empty()) return true;
  const bool greedy_first = o.temperatures[0] == 0.0f;
  return (greedy_first && o.beam_size > 0) || (!greedy_first && o.best_of > 1) || o.token_logprobs;
}

}  // namespace

struct BatchTranscriber::File {
  uint64_t id = 0;
  Tensor mel;                 // the padded log-mel (the seek loop reads its windows)
  TranscribeOptions options;  // the seek loop keeps a reference
  std::unique_ptr<whisper::SeekLoop> loop;
  bool solo = false;                   // decodes_solo(options)
  int64_t audio_ctx = 0;               // its windows' encoder positions (0: the model's)
  int slot = -1;                       // while a window decodes in the batch
  std::optional<WindowSearch> search;  // that window's first attempt
  bool left = false;
};

BatchTranscriber::BatchTranscriber(WhisperBatchSession& batch, WhisperSession& solo,
                                   const WhisperTokenizer& tokenizer)
    : batch_(batch),
      solo_(solo),
      tokenizer_(tokenizer),
      solo_source_(std::make_unique<SessionLogitsSource>(solo)),
      slot_file_(size_t(batch.n_slots()), nullptr),
      on_device_(batch.model().device() != Device::cpu && device_choice_enabled()) {
  slots_.reserve(size_t(batch.n_slots()));
  searches_.reserve(size_t(batch.n_slots()));
}

BatchTranscriber::~BatchTranscriber() = default;

int BatchTranscriber::decoding() const {
  return int(std::count_if(slot_file_.begin(), slot_file_.end(),
                           [](const File* f) { return f != nullptr; }));
}

uint64_t BatchTranscriber::add(Tensor mel, TranscribeOptions options) {
  using namespace whisper;
  const WhisperConfig& c = batch_.model().config();
  check_transcribe_input(mel, c.n_mels, options);
  auto file = std::make_unique<File>();
  file->id = next_id_++;
  file->mel = std::move(mel);
  file->options = std::move(options);
  file->solo = decodes_solo(file->options);
  if (file->options.fit_audio_ctx) {
    const int fit = fitted_audio_ctx(batch_.model(), file->mel.dim(1) - kChunkFrames);
    if (fit < c.n_audio_ctx) file->audio_ctx = fit;
  }
  // Language detection, when needed, through the one-window session, as transcribe() does it.
  file->loop = std::make_unique<SeekLoop>(
      tokenizer_, file->mel, file->options,
      transcript_language(*solo_source_, tokenizer_, file->mel, file->options), c.n_text_ctx,
      whisper_window_frames(batch_.model()));
  File& f = *file;
  files_.push_back(std::move(file));
  next_or_finish(f);
  return f.id;
}

void BatchTranscriber::next_or_finish(File& file) {
  if (file.loop->next_window()) {
    waiting_.push_back(&file);
    return;
  }
  file.left = true;
  finished_.push_back({file.id, file.loop->finish(), nullptr});
}

void BatchTranscriber::leave(File& file, std::exception_ptr error) {
  if (file.slot >= 0) slot_file_[size_t(file.slot)] = nullptr;
  file.slot = -1;
  file.search.reset();
  std::erase(waiting_, &file);
  file.left = true;
  finished_.push_back({file.id, std::nullopt, error});
}

std::vector<BatchTranscriber::Finished> BatchTranscriber::step() {
  // A cancelled file leaves before anything else runs: its slot is free for this step.
  for (auto& file : files_) {
    const auto& cancelled = file->options.cancelled;
    if (!file->left && cancelled && cancelled()) {
      leave(*file,
            std::make_exception_ptr(Error(ErrorKind::cancelled, "[whisper] decoding cancelled")));
    }
  }
  admit();
  decode_step();
  std::erase_if(files_, [](const std::unique_ptr<File>& f) { return f->left; });
  std::vector<Finished> out;
  out.swap(finished_);
  return out;
}

std::vector<BatchTranscriber::Finished> BatchTranscriber::abort(std::exception_ptr error) {
  for (auto& file : files_) {
    if (!file->left) leave(*file, error);
  }
  files_.clear();
  std::vector<Finished> out;
  out.swap(finished_);
  return out;
}

void BatchTranscriber::solo_window(File& file) {
  using namespace whisper;
  const auto t0 = Clock::now();
  try {
    SeekLoop& loop = *file.loop;
    const DecodingResult result =
        decode_with_fallback(*solo_source_, tokenizer_, loop.window_mel(), loop.decode_options(),
                             file.options, loop.window().seek);
    loop.accept(result, solo_source_.get());
    next_or_finish(file);
  } catch (...) {
    leave(file, std::current_exception());
  }
  stats_.fallback_ms += ms_since(t0);
}

void BatchTranscriber::admit() {
  using namespace whisper;
  // One solo window per iteration, so the batch moves on between them.
  const auto solo = std::find_if(waiting_.begin(), waiting_.end(), [](File* f) { return f->solo; });
  if (solo != waiting_.end()) {
    File& file = **solo;
    waiting_.erase(solo);
    solo_window(file);
  }

  std::vector<File*> joining;
  slots_.clear();
  for (int s = 0; s < batch_.n_slots() && !waiting_.empty(); ++s) {
    if (slot_file_[size_t(s)] != nullptr) continue;
    const auto next =
        std::find_if(waiting_.begin(), waiting_.end(), [](File* f) { return !f->solo; });
    if (next == waiting_.end()) break;
    joining.push_back(*next);
    waiting_.erase(next);
    slots_.push_back(int32_t(s));
  }
  if (joining.empty()) return;

  const WhisperConfig& c = batch_.model().config();
  const int64_t n = int64_t(joining.size());
  // One encoder call per audio context among the joining windows (one call, usually).
  std::vector<char> encoded(size_t(n), 0);
  for (int64_t first = 0; first < n; ++first) {
    if (encoded[size_t(first)]) continue;
    const int64_t ctx = joining[size_t(first)]->audio_ctx;
    std::vector<int64_t> group;
    std::vector<int32_t> group_slots;
    for (int64_t i = first; i < n; ++i) {
      if (encoded[size_t(i)] || joining[size_t(i)]->audio_ctx != ctx) continue;
      encoded[size_t(i)] = 1;
      group.push_back(i);
      group_slots.push_back(slots_[size_t(i)]);
    }
    const int64_t g = int64_t(group.size());
    Tensor window_mels = Tensor::empty({g, c.n_mels, kChunkFrames}, DType::f32,
                                       joining[size_t(first)]->loop->window_mel_device());
    for (int64_t i = 0; i < g; ++i) {
      window_mels.slice0(i, i + 1)
          .reshape({c.n_mels, kChunkFrames})
          .copy_from(joining[size_t(group[size_t(i)])]->loop->window_mel());
    }
    const auto t0 = Clock::now();
    batch_.encode(group_slots, window_mels, ctx);
    // CUDA runs asynchronously: wait here so encode_ms times the encoder, not its launch.
    if (batch_.model().device() == Device::cuda) cuda::synchronize();
    stats_.encode_ms += ms_since(t0);
    stats_.batches += 1;
    if (ctx != 0) stats_.fitted += g;
  }
  stats_.windows += n;

  const auto t0 = Clock::now();
  searches_.clear();
  for (int64_t i = 0; i < n; ++i) {
    File& file = *joining[size_t(i)];
    const SeekLoop& loop = *file.loop;
    file.slot = slots_[size_t(i)];
    slot_file_[size_t(file.slot)] = &file;
    file.search.emplace(tokenizer_,
                        attempt_options(loop.decode_options(), file.options, 0, loop.window().seek),
                        c.n_text_ctx);
    searches_.push_back(&*file.search);
  }
  // The files' no-speech callbacks run on the CPU threads (one file's calls never overlap).
  prefill_windows(batch_, slots_, searches_, false);
  stats_.tokens += n;
  stats_.decode_ms += ms_since(t0);
}

void BatchTranscriber::decode_step() {
  const auto t0 = Clock::now();
  slots_.clear();
  searches_.clear();
  for (int s = 0; s < batch_.n_slots(); ++s) {
    File* file = slot_file_[size_t(s)];
    if (file == nullptr || file->search->done()) continue;
    slots_.push_back(int32_t(s));
    searches_.push_back(&*file->search);
  }
  if (!slots_.empty()) {
    whisper::step_windows(batch_, slots_, searches_, on_device_, scratch_);
    stats_.steps += 1;
    stats_.tokens += int64_t(slots_.size());
  }
  stats_.decode_ms += ms_since(t0);
  for (int s = 0; s < batch_.n_slots(); ++s) {
    File* file = slot_file_[size_t(s)];
    if (file != nullptr && file->search->done()) finish_window(*file);
  }
}

void BatchTranscriber::finish_window(File& file) {
  using namespace whisper;
  slot_file_[size_t(file.slot)] = nullptr;
  file.slot = -1;
  try {
    SeekLoop& loop = *file.loop;
    const TranscribeOptions& o = file.options;
    DecodingResult result = file.search->result();
    file.search.reset();
    LogitsSource* source = nullptr;  // holding the window's audio, for word timestamps
    if (needs_fallback(result, o) && o.temperatures.size() > 1) {
      // The rest of the ladder through the one-window path, as transcribe() would.
      const auto t0 = Clock::now();
      result = decode_with_fallback(*solo_source_, tokenizer_, loop.window_mel(),
                                    loop.decode_options(), o, loop.window().seek, 1);
      stats_.fallback_ms += ms_since(t0);
      stats_.fallbacks += 1;
      source = solo_source_.get();
    }
    if (o.word_timestamps && source == nullptr) {
      solo_source_->encode(loop.window_mel());
      source = solo_source_.get();
    }
    loop.accept(result, source);
    next_or_finish(file);
  } catch (...) {
    leave(file, std::current_exception());
  }
}

}  // namespace parley
