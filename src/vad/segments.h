// Speech segments from Silero VAD probabilities, the way silero-vad 6.2.1's
// utils_vad.py get_speech_timestamps makes them (every rule and rounding kept), a
// streaming iterator for live audio (its VADIterator), and the gate other layers ask:
// "is there any speech in this audio?".
//
// API for the server and the CLI:
//   auto vad = vad::SileroModel::load(path);                  // once, shared
//   if (!vad::has_speech(*vad, samples_16k, 16000)) ...       // skip Whisper entirely
//   for (auto s : vad::speech_timestamps(*vad, samples, 16000)) s.start, s.end (samples)
//   vad::VadIterator it(vad, 16000); it.push(block) -> events as speech starts / ends
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "vad/silero.h"

namespace parley::vad {

// get_speech_timestamps' parameters with its defaults.
struct SpeechOptions {
  // A chunk with probability >= threshold is speech.
  double threshold = 0.5;
  // While in speech, a chunk below this is silence; nullopt: max(threshold - 0.15, 0.01).
  std::optional<double> neg_threshold;
  // Speech segments this short or shorter are dropped.
  int min_speech_duration_ms = 250;
  // Segments longer than this are split (at the longest silence > min_silence_at_max_speech
  // ms inside them, else just before the limit); infinity: never.
  double max_speech_duration_s = std::numeric_limits<double>::infinity();
  // Silence this long ends a segment.
  int min_silence_duration_ms = 100;
  // Each segment grows by this on both sides (less where two segments nearly touch).
  int speech_pad_ms = 30;
  int min_silence_at_max_speech_ms = 98;
  bool use_max_poss_sil_at_max_speech = true;
};

// [start, end) in samples at the input's sample rate.
struct SpeechSegment {
  int64_t start = 0;
  int64_t end = 0;
  bool operator==(const SpeechSegment&) const = default;
};

// The segments of an audio of `n_samples` samples whose chunk probabilities are `probs`
// (one per chunk_samples(sample_rate) samples, as SileroModel::probabilities returns).
std::vector<SpeechSegment> speech_segments_from_probs(std::span<const float> probs,
                                                      int64_t n_samples, int sample_rate,
                                                      const SpeechOptions& options = {});

// Runs the model over `samples` (mono, at 16000 or 8000 Hz) and cuts the segments.
std::vector<SpeechSegment> speech_timestamps(const SileroModel& model,
                                             std::span<const float> samples, int sample_rate,
                                             const SpeechOptions& options = {});

// Whether speech_timestamps finds at least one segment: false for silence, noise, music
// without voice. The gate in front of Whisper.
bool has_speech(const SileroModel& model, std::span<const float> samples, int sample_rate,
                const SpeechOptions& options = {});

// Streaming: feed audio blocks of any size as they arrive; every complete chunk runs the
// model once and may produce an event, with the rules of silero-vad's VADIterator
// (threshold, neg threshold = threshold - 0.15, min_silence_duration_ms, speech_pad_ms;
// min_speech_duration_ms and max_speech_duration_s do not apply to a live stream).
struct VadEvent {
  enum class Kind { start, end } kind;
  int64_t sample = 0;  // where speech starts (padded back) or ends (padded forward)
  bool operator==(const VadEvent&) const = default;
};

class VadIterator {
 public:
  VadIterator(std::shared_ptr<const SileroModel> model, int sample_rate,
              const SpeechOptions& options = {});

  // Appends samples; returns the events of the chunks completed by them, in order.
  std::vector<VadEvent> push(std::span<const float> samples);
  // Whether the stream is inside speech now.
  bool triggered() const { return triggered_; }
  // The probability of every chunk seen so far.
  const std::vector<float>& probabilities() const { return probs_; }
  // Back to the start of a new stream (model state, counters, buffer).
  void reset();

 private:
  std::optional<VadEvent> step(float prob);

  std::shared_ptr<const SileroModel> model_;
  int sample_rate_;
  SpeechOptions options_;
  SileroState state_;
  std::vector<float> pending_;  // samples of the chunk being filled
  std::vector<float> probs_;
  bool triggered_ = false;
  int64_t temp_end_ = 0;
  int64_t current_sample_ = 0;
};

}  // namespace parley::vad
