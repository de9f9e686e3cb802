// Internal to src/whisper: one file's seek loop of openai/whisper's transcribe.py, split into
// what comes before and after decoding a window, so that transcribe() (one window at a time)
// and transcribe_batch() (windows of many files per decoder batch) share every rule: which
// window comes next (clips, seek), its prompt, the temperature fallback's acceptance test,
// the silence skip, segment cutting and the seek advance.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"
#include "whisper/decoding.h"
#include "whisper/transcribe.h"

namespace parley::whisper {

// Whether a result at one temperature is retried at the next one: too repetitive or too
// unlikely, and not silence.
bool needs_fallback(const DecodingResult& result, const TranscribeOptions& o);
// `decode` for attempt k of the ladder (temperature o.temperatures[k], best_of above 0, beam
// search at 0, its own sampling stream from the window's seek and k).
DecodingOptions attempt_options(DecodingOptions decode, const TranscribeOptions& o, size_t k,
                                int64_t seek);
// Encodes `window` into `source`, then tries o.temperatures[first..] in order until a result
// is kept (the last one otherwise).
DecodingResult decode_with_fallback(LogitsSource& source, const WhisperTokenizer& tokenizer,
                                    const Tensor& window, const DecodingOptions& decode,
                                    const TranscribeOptions& o, int64_t seek, size_t first = 0);
// The transcript's language: options.language, "en" on English-only models, else detected
// once from the first 30 s of the padded mel (encoded into `source`).
std::string transcript_language(LogitsSource& source, const WhisperTokenizer& tokenizer,
                                const Tensor& mel, const TranscribeOptions& o);
// Throws Error(invalid_argument) for a mel that is not f32 [n_mels, >= 3000] (on any device)
// or for invalid options.
void check_transcribe_input(const Tensor& mel, int n_mels, const TranscribeOptions& o);

class SeekLoop {
 public:
  struct Window {
    int64_t seek = 0;  // first mel frame
    int64_t size = 0;  // frames of content (<= window_frames, 3000)
    double time_offset = 0;
  };

  // mel: the padded log-mel (kept by reference: it must outlive the loop); language: the
  // code written into every window's sot sequence; window_frames: the most audio frames per
  // window (3000; whisper_window_frames under audio_ctx).
  SeekLoop(const WhisperTokenizer& tokenizer, const Tensor& mel, const TranscribeOptions& o,
           std::string language, int n_text_ctx, int64_t window_frames);

  // Moves to the next window to decode; false when the audio is done.
  bool next_window();
  const Window& window() const { return window_; }
  Tensor window_mel() const;  // f32 [n_mels, 3000]: the window's frames, zero-padded
  Device window_mel_device() const { return mel_.device(); }  // where window_mel() lives
  // The window's decoding options (prompt included) before attempt_options.
  const DecodingOptions& decode_options() const { return decode_; }
  // The window's kept result: silence skip, segments (on_segment, verbose), seek advance and
  // prompt reset. `source` holds the window's audio; used only with word timestamps.
  void accept(const DecodingResult& result, LogitsSource* source);
  TranscribeResult finish();  // after next_window() returned false

 private:
  const WhisperTokenizer& tokenizer_;
  const Tensor& mel_;
  const TranscribeOptions& o_;
  int64_t content_frames_;
  int64_t window_frames_;
  TranscribeResult out_;
  DecodingOptions decode_;
  std::vector<int32_t> all_tokens_;
  size_t prompt_reset_since_ = 0;
  size_t n_initial_prompt_ = 0;
  int64_t remaining_prompt_length_ = 0;
  double last_speech_timestamp_ = 0;  // end of the last word, with word timestamps
  std::vector<int32_t> sot_sequence_;
  std::vector<std::pair<int64_t, int64_t>> clips_;
  size_t clip_idx_ = 0;
  int64_t seek_ = 0;
  Window window_;
};

}  // namespace parley::whisper
