// Batched seek loop over many files (transcribe_batch.h). Every per-window rule is
// SeekLoop's (seek_loop.h), every per-token rule WindowSearch's (decoding.h); this file only
// schedules windows into batches.
#include "whisper/transcribe_batch.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <numeric>

#include "audio/mel.h"
#include "audio/mel_device.h"
#include "engine/device.h"
#include "engine/env.h"
#include "engine/error.h"
#include "engine/threadpool.h"
#include "whisper/batch_session.h"
#include "whisper/batch_steps.h"
#include "whisper/decoding.h"
#include "whisper/logit_filters.h"
#include "whisper/model.h"
#include "whisper/seek_loop.h"
#include "whisper/tokenizer.h"

namespace parley {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

std::optional<std::string> batch_unsupported(const TranscribeOptions& o,
                                             const WhisperTokenizer& tokenizer) {
  if (o.temperatures.empty()) return "no temperatures";
  const bool greedy_first = o.temperatures[0] == 0.0f;
  if (greedy_first && o.beam_size > 0) return "beam search";
  if (!greedy_first && o.best_of > 1) return "best_of > 1 at the first temperature";
  if (o.word_timestamps) return "word timestamps";
  if (o.token_logprobs) return "token logprobs";
  if (o.on_token) return "token streaming (on_token)";
  return std::nullopt;
}

std::vector<TranscribeResult> transcribe_batch(
    WhisperBatchSession& batch, WhisperSession& fallback, const WhisperTokenizer& tokenizer,
    std::span<const Tensor> mels, const TranscribeOptions& options, BatchTranscribeStats* stats,
    const std::function<void(size_t file, const Segment&)>& on_file_segment) {
  using namespace whisper;
  const WhisperConfig& c = batch.model().config();
  const std::optional<std::string> why = batch_unsupported(options, tokenizer);
  check_arg(!why, "[whisper] transcribe_batch: not supported with " + why.value_or(""));
  for (const Tensor& mel : mels) check_transcribe_input(mel, c.n_mels, options);
  BatchTranscribeStats local;
  BatchTranscribeStats& st = stats ? *stats : local;
  const size_t n_files = mels.size();
  SessionLogitsSource fallback_source(fallback);

  // Per file: its options (the segment callback knows the file) and its seek loop.
  std::vector<TranscribeOptions> file_options(n_files, options);
  std::vector<std::unique_ptr<SeekLoop>> loops;
  std::deque<size_t> ready;  // files whose next window waits for a batch
  for (size_t f = 0; f < n_files; ++f) {
    if (on_file_segment) {
      file_options[f].on_segment = [&on_file_segment, f, &options](const Segment& s) {
        if (options.on_segment) options.on_segment(s);
        on_file_segment(f, s);
      };
    }
    // Language detection, when needed, runs per file through the one-window session, as
    // transcribe() does it.
    loops.push_back(std::make_unique<SeekLoop>(
        tokenizer, mels[f], file_options[f],
        transcript_language(fallback_source, tokenizer, mels[f], options), c.n_text_ctx,
        whisper_window_frames(batch.model())));
    if (loops.back()->next_window()) ready.push_back(f);
  }

  const int64_t frames = kChunkFrames;
  std::vector<size_t> members;
  std::vector<int32_t> slots, step_slots;
  std::vector<WindowSearch> searches;
  std::vector<WindowSearch*> search_ptrs;
  StepScratch scratch;
  const bool on_device = batch.model().device() != Device::cpu && device_choice_enabled();
  while (!ready.empty()) {
    // One round: the current window of up to n_slots files, slot i for member i.
    members.clear();
    while (!ready.empty() && int(members.size()) < batch.n_slots()) {
      members.push_back(ready.front());
      ready.pop_front();
    }
    const int64_t n = int64_t(members.size());
    // The windows are cut where the mels live (the model's device for transcribe_batch of
    // samples), so a CUDA batch never visits the host.
    const Device mel_device = loops[members[0]]->window_mel_device();
    Tensor window_mels = Tensor::empty({n, c.n_mels, frames}, DType::f32, mel_device);
    slots.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) {
      slots[size_t(i)] = int32_t(i);
      window_mels.slice0(i, i + 1)
          .reshape({c.n_mels, frames})
          .copy_from(loops[members[size_t(i)]]->window_mel());
    }
    auto t0 = Clock::now();
    batch.encode(slots, window_mels);
    // CUDA runs asynchronously: wait here so encode_ms times the encoder, not its launch.
    if (batch.model().device() == Device::cuda) cuda::synchronize();
    st.encode_ms += ms_since(t0);
    st.batches += 1;
    st.windows += n;

    // The first attempt of every window, decoded together.
    t0 = Clock::now();
    searches.clear();
    for (int64_t i = 0; i < n; ++i) {
      const SeekLoop& loop = *loops[members[size_t(i)]];
      searches.emplace_back(tokenizer,
                            attempt_options(loop.decode_options(), options, 0, loop.window().seek),
                            c.n_text_ctx);
    }
    search_ptrs.clear();
    for (WindowSearch& s : searches) search_ptrs.push_back(&s);
    prefill_windows(batch, slots, search_ptrs, bool(options.on_no_speech_prob));
    st.tokens += n;
    while (true) {
      check(!options.cancelled || !options.cancelled(), ErrorKind::cancelled,
            "[whisper] decoding cancelled");
      step_slots.clear();
      search_ptrs.clear();
      for (int64_t i = 0; i < n; ++i) {
        if (searches[size_t(i)].done()) continue;
        step_slots.push_back(int32_t(i));
        search_ptrs.push_back(&searches[size_t(i)]);
      }
      if (step_slots.empty()) break;
      step_windows(batch, step_slots, search_ptrs, on_device, scratch);
      st.steps += 1;
      st.tokens += int64_t(step_slots.size());
    }
    st.decode_ms += ms_since(t0);

    for (int64_t i = 0; i < n; ++i) {
      const size_t f = members[size_t(i)];
      SeekLoop& loop = *loops[f];
      DecodingResult result = searches[size_t(i)].result();
      if (needs_fallback(result, options) && options.temperatures.size() > 1) {
        // The rest of the ladder through the one-window path, as transcribe() would.
        t0 = Clock::now();
        result = decode_with_fallback(fallback_source, tokenizer, loop.window_mel(),
                                      loop.decode_options(), options, loop.window().seek, 1);
        st.fallback_ms += ms_since(t0);
        st.fallbacks += 1;
      }
      loop.accept(result, nullptr);
      if (loop.next_window()) ready.push_back(f);
    }
  }

  std::vector<TranscribeResult> out;
  out.reserve(n_files);
  for (auto& loop : loops) out.push_back(loop->finish());
  return out;
}

std::vector<TranscribeResult> transcribe_batch(
    WhisperBatchSession& batch, WhisperSession& fallback, const WhisperTokenizer& tokenizer,
    std::span<const std::vector<float>> samples, const TranscribeOptions& options,
    BatchTranscribeStats* stats,
    const std::function<void(size_t file, const Segment&)>& on_file_segment) {
  std::vector<Tensor> mels;
  mels.reserve(samples.size());
  for (const auto& s : samples) {
    mels.push_back(log_mel_spectrogram_for(batch.model().device(), s, batch.model().config().n_mels,
                                           kChunkSamples));
  }
  return transcribe_batch(batch, fallback, tokenizer, mels, options, stats, on_file_segment);
}

}  // namespace parley
