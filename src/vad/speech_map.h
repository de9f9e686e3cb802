// Speech-only audio for Whisper and the way back to the original timeline: the scheme of
// faster-whisper's vad_filter (faster_whisper/vad.py: collect_chunks concatenates the
// speech segments; SpeechTimestampsMap adds back the silence removed before the segment a
// time falls in). Long silences then cost Whisper nothing and cannot be hallucinated over.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vad/segments.h"

namespace parley::vad {

// The speech segments' options faster-whisper's VadOptions defaults to for vad_filter:
// no minimum speech length, 2 s of silence to split, 400 ms of padding.
SpeechOptions filter_speech_options();

// samples[s.start, s.end) of every segment, concatenated in order. The segments must be
// sorted, non-overlapping and inside the audio (as speech_timestamps returns them).
std::vector<float> collect_speech(std::span<const float> samples,
                                  std::span<const SpeechSegment> segments);

class SpeechTimeMap {
 public:
  SpeechTimeMap(std::span<const SpeechSegment> segments, int sample_rate);
  // Seconds in the collected audio -> seconds in the original audio. A time exactly at the
  // end of a segment belongs to that segment when `is_end` (a Whisper segment's end), else
  // to the next one (a start).
  double original_time(double t, bool is_end = false) const;

 private:
  int sample_rate_;
  std::vector<int64_t> chunk_end_;       // each segment's end, in collected samples
  std::vector<int64_t> silence_before_;  // samples removed before each segment
};

}  // namespace parley::vad
