// VAD trimming of a dictated utterance: what Whisper hears is the span from the first
// speech start to the last speech end (Silero's segments), widened by a margin, so the
// silence before the words and after them (the key press, the pause before release) is
// neither transcribed nor a chance for Whisper to hallucinate in.
#pragma once

#include <cstddef>
#include <span>
#include <utility>

#include "vad/segments.h"

namespace parley::dictate {

// [begin, end) in samples of an utterance of n samples; {0, 0} when `speech` is empty.
std::pair<size_t, size_t> speech_span(std::span<const vad::SpeechSegment> speech, size_t n,
                                      size_t margin);

}  // namespace parley::dictate
