// DeltaStream: a streamed transcription's text deltas (the server's SSE
// transcript.text.delta events), fed with the decoder's tokens, each attempt's no-speech
// probability and the seek loop's segments.
//
// Policy: a delta never shows text that the seek loop later drops or replaces, so the
// deltas joined equal the final text.
// - Within a window, text becomes final at a consecutive timestamp pair (<|a|><|b|>: a
//   segment ended): the text before the pair is sent as soon as the pair is sampled. With a
//   temperature ladder, where a window may be decoded again, the caller feeds no tokens and
//   nothing is sent before the window's segments are known.
// - The rest of a window (after its last pair) waits for the window's segments
//   (on_segment): when the window does not end on a timestamp the seek loop cuts there and
//   decodes the tail again in the next window, so the tail is only sent if kept.
// - A window that may yet be judged silent (its no-speech probability, known before its
//   first token, is above no_speech_threshold while a logprob_threshold is set: the seek
//   loop skips it if its average log-probability ends up low) sends nothing at its pairs;
//   its text goes out with its segments, if it has any.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "serving/whisper_service.h"
#include "whisper/segments.h"
#include "whisper/tokenizer.h"

namespace parley {

class DeltaStream {
 public:
  // The thresholds are the transcription's (TranscribeOptions).
  DeltaStream(const WhisperTokenizer& tokenizer, std::function<void(const std::string&)> emit,
              std::optional<float> no_speech_threshold, std::optional<float> logprob_threshold);

  // DecodingOptions::on_no_speech_prob: a window's attempt starts.
  void on_no_speech_prob(float p);
  // DecodingOptions::on_token.
  void on_token(int32_t id);
  // TranscribeOptions::on_segment.
  void on_segment(const Segment& s);
  // After the transcript: whatever an incomplete character held back.
  void finish();

 private:
  // Sends what `text` (this window's final text so far) adds to what was sent.
  void release(const std::string& text);
  void reset_window();

  const WhisperTokenizer& tok_;
  std::function<void(const std::string&)> emit_;
  std::optional<float> no_speech_threshold_;
  std::optional<float> logprob_threshold_;
  TextStreamer streamer_;        // holds back a UTF-8 character split across pieces
  std::vector<int32_t> window_;  // this window's sampled tokens
  std::string sent_;             // this window's text sent so far
  std::string kept_;             // this window's segments' text
  bool window_done_ = false;
  bool hold_ = false;  // this window may be judged silent: nothing at its pairs
};

}  // namespace parley
