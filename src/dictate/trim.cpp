// speech_span (trim.h).
#include "dictate/trim.h"

#include <algorithm>

namespace parley::dictate {

std::pair<size_t, size_t> speech_span(std::span<const vad::SpeechSegment> speech, size_t n,
                                      size_t margin) {
  if (speech.empty() || n == 0) return {0, 0};
  const size_t first = size_t(std::max<int64_t>(0, speech.front().start));
  const size_t last = size_t(std::max<int64_t>(0, speech.back().end));
  const size_t begin = first > margin ? first - margin : 0;
  const size_t end = std::min(n, last + margin);
  return begin < end ? std::pair{begin, end} : std::pair<size_t, size_t>{0, 0};
}

}  // namespace parley::dictate
