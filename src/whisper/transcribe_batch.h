// transcribe_batch(): the seek loop of transcribe() over many audio files at once. Each
// round takes the current window of up to n_slots unfinished files, encodes them in one
// encoder call (WhisperBatchSession::encode) and decodes them greedily (or sampled at the
// ladder's first temperature) with one decoder step for all of them; each file keeps its own
// seek, prompt, fallback, silence skip and segments (the rules are transcribe()'s own,
// seek_loop.h). A window whose first attempt fails the fallback thresholds is re-decoded alone
// through a WhisperSession from the ladder's second temperature on, exactly as transcribe()
// would. So each file's result equals transcribe() of that file alone, up to the f32 rounding
// of batched GEMMs (identical on the fixture clips, tests/whisper/batch_test.cpp).
//
// Not batched (batch_unsupported() names the reason; callers then use transcribe() per
// file): beam search (beam_size at temperature 0), best_of > 1 at the first temperature, word
// timestamps, token_logprobs and on_token streaming. Language detection (a multilingual model
// without TranscribeOptions::language) runs per file on `fallback` before the batches, as
// transcribe() runs it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "whisper/transcribe.h"

namespace parley {

class WhisperBatchSession;
class WhisperSession;
class WhisperTokenizer;

// What a batched transcription did (the benchmark's figures).
struct BatchTranscribeStats {
  int64_t windows = 0;     // windows decoded in batches (fallback re-decodes not counted)
  int64_t batches = 0;     // encoder calls of the batch session
  int64_t fitted = 0;      // windows encoded over a fitted, shorter context (fit_audio_ctx)
  int64_t tokens = 0;      // tokens sampled in batches
  int64_t steps = 0;       // batched decoder steps
  int64_t fallbacks = 0;   // windows re-decoded at higher temperatures
  double encode_ms = 0;    // wall time in WhisperBatchSession::encode
  double decode_ms = 0;    // wall time in prefill and steps (logit filters included)
  double fallback_ms = 0;  // wall time of the fallback re-decodes
};

// Why `options` cannot run batched with this tokenizer's model, or nullopt when they can.
std::optional<std::string> batch_unsupported(const TranscribeOptions& options,
                                             const WhisperTokenizer& tokenizer);

// Padded log-mels (log_mel_spectrogram(samples, n_mels, kChunkSamples), one per file) ->
// one result per file, in order. `fallback` (a session of the same model) re-decodes the
// windows that need the temperature fallback. options.on_segment gets every file's segments
// as their windows finish (interleaved across files); on_file_segment, when set, gets them
// with the file's index. Throws Error(invalid_argument) when batch_unsupported().
std::vector<TranscribeResult> transcribe_batch(
    WhisperBatchSession& batch, WhisperSession& fallback, const WhisperTokenizer& tokenizer,
    std::span<const Tensor> padded_mels, const TranscribeOptions& options,
    BatchTranscribeStats* stats = nullptr,
    const std::function<void(size_t file, const Segment&)>& on_file_segment = {});

// 16 kHz mono samples per file.
std::vector<TranscribeResult> transcribe_batch(
    WhisperBatchSession& batch, WhisperSession& fallback, const WhisperTokenizer& tokenizer,
    std::span<const std::vector<float>> samples, const TranscribeOptions& options,
    BatchTranscribeStats* stats = nullptr,
    const std::function<void(size_t file, const Segment&)>& on_file_segment = {});

}  // namespace parley
