// Reference: openai/whisper whisper/transcribe.py, transcribe(): the block after
// decode_with_fallback that computes timestamp_tokens, consecutive and the seek advance.
#include "whisper/segments.h"

namespace parley {

WindowCut cut_window(std::span<const int32_t> tokens, int32_t timestamp_begin, double time_offset,
                     int segment_size) {
  const size_t n = tokens.size();
  const auto is_ts = [&](size_t i) { return tokens[i] >= timestamp_begin; };
  const auto time_of = [&](size_t i) {
    return time_offset + double(tokens[i] - timestamp_begin) * kTimePrecision;
  };
  // The window ends with text then one timestamp: the speech runs to the window's end.
  const bool single_timestamp_ending = n >= 2 && !is_ts(n - 2) && is_ts(n - 1);

  // Cut after the first timestamp of every consecutive pair.
  std::vector<size_t> cuts;
  for (size_t i = 1; i < n; ++i) {
    if (is_ts(i - 1) && is_ts(i)) cuts.push_back(i);
  }

  WindowCut out;
  if (!cuts.empty()) {
    if (single_timestamp_ending) cuts.push_back(n);
    size_t last = 0;
    for (size_t cut : cuts) {
      out.slices.push_back({last, cut, time_of(last), time_of(cut - 1)});
      last = cut;
    }
    out.seek_advance = single_timestamp_ending
                           ? segment_size
                           : (tokens[last - 1] - timestamp_begin) * kInputStride;
    return out;
  }

  // No pair: one segment for the whole window, ending at its last timestamp if there is one
  // beyond <|0.00|>.
  double duration = frame_time(segment_size);
  for (size_t i = n; i-- > 0;) {
    if (!is_ts(i)) continue;
    if (tokens[i] != timestamp_begin)
      duration = double(tokens[i] - timestamp_begin) * kTimePrecision;
    break;
  }
  out.slices.push_back({0, n, time_offset, time_offset + duration});
  out.seek_advance = segment_size;
  return out;
}

}  // namespace parley
