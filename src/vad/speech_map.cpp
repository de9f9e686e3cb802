#include "vad/speech_map.h"

#include <algorithm>

#include "engine/error.h"

namespace parley::vad {

SpeechOptions filter_speech_options() {
  SpeechOptions o;
  o.min_speech_duration_ms = 0;
  o.min_silence_duration_ms = 2000;
  o.speech_pad_ms = 400;
  return o;
}

std::vector<float> collect_speech(std::span<const float> samples,
                                  std::span<const SpeechSegment> segments) {
  std::vector<float> out;
  int64_t previous_end = 0;
  for (const auto& s : segments) {
    check_arg(s.start >= previous_end && s.start <= s.end && s.end <= int64_t(samples.size()),
              "[vad] collect_speech: segment [" + std::to_string(s.start) + ", " +
                  std::to_string(s.end) + ") is not sorted or not inside the audio");
    out.insert(out.end(), samples.begin() + s.start, samples.begin() + s.end);
    previous_end = s.end;
  }
  return out;
}

SpeechTimeMap::SpeechTimeMap(std::span<const SpeechSegment> segments, int sample_rate)
    : sample_rate_(sample_rate) {
  int64_t previous_end = 0, silent = 0;
  for (const auto& s : segments) {
    silent += s.start - previous_end;
    previous_end = s.end;
    chunk_end_.push_back(s.end - silent);
    silence_before_.push_back(silent);
  }
}

double SpeechTimeMap::original_time(double t, bool is_end) const {
  if (chunk_end_.empty()) return t;
  const auto sample = int64_t(t * sample_rate_);
  size_t k;
  auto exact = std::find(chunk_end_.begin(), chunk_end_.end(), sample);
  if (is_end && exact != chunk_end_.end()) {
    k = size_t(exact - chunk_end_.begin());
  } else {
    // bisect.bisect: the first segment whose end is after `sample`, the last one at most.
    k = size_t(std::upper_bound(chunk_end_.begin(), chunk_end_.end(), sample) - chunk_end_.begin());
    k = std::min(k, chunk_end_.size() - 1);
  }
  return t + double(silence_before_[k]) / sample_rate_;
}

}  // namespace parley::vad
