// Word timestamps, as openai/whisper's whisper/timing.py (find_alignment, dtw,
// median_filter, merge_punctuations, add_word_timestamps), tokenizer.py
// (split_to_word_tokens) and the word-based parts of transcribe.py's seek loop (the seek
// after the last word, hallucination_silence_threshold).
//
// Per window: the decoder runs once more over [sot sequence, <|notimestamps|>, text
// tokens, <|endoftext|>] keeping the cross-attention scores of the alignment heads
// (alignment_heads.h); the scores over the window's audio frames are softmaxed,
// normalized per frame over the tokens, median-filtered along time (width 7), averaged
// over heads, and DTW aligns tokens to 20 ms frames. Words are split at spaces (or at
// whole Unicode characters for zh ja th lo my yue), punctuation is merged into its
// neighbour, and heuristics clamp over-long words at sentence and segment boundaries.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "whisper/segments.h"

namespace parley {

class LogitsSource;
class WhisperTokenizer;

struct WordTimestampOptions {
  // Merged into the following word (the reference's defaults).
  std::string prepend_punctuations = "\"'\u201c\u00bf([{-";
  // Merged into the preceding word.
  std::string append_punctuations = "\"'.\u3002,\uff0c!\uff01?\uff1f:\uff1a\u201d)]}\u3001";
  // (decoder layer, head) pairs; empty: the model's (resolve_alignment_heads).
  std::vector<std::pair<int, int>> alignment_heads;
  int medfilt_width = 7;  // odd
  float qk_scale = 1.0f;  // multiplies the scores before their softmax
};

// A word as find_alignment returns it: times in seconds from the window start.
struct WordTiming {
  std::string word;
  std::vector<int32_t> tokens;
  double start = 0;
  double end = 0;
  double probability = 0;
};

// Median of each window of `width` (odd) along the last dim of x [rows, cols], with
// reflect padding of width / 2; x is left as it is when cols <= width / 2 (timing.py
// median_filter). NaN sorts last, as torch.sort.
void median_filter(std::span<float> x, int64_t rows, int64_t cols, int width);

// timing.py dtw_cpu + backtrace on a cost matrix x [n, m] (row-major): the monotonic path
// from (0, 0) to (n-1, m-1) as parallel index lists. The accumulated costs are kept in
// float32 and ties break towards the horizontal (time) step, then the vertical, exactly
// as the reference.
struct DtwPath {
  std::vector<int32_t> text_indices;
  std::vector<int32_t> time_indices;
};
DtwPath dtw(std::span<const double> x, int64_t n, int64_t m);

// tokenizer.py split_to_word_tokens: words and their tokens. `language` picks splitting
// at Unicode characters (zh ja th lo my yue) or at spaces and punctuation (the rest).
struct WordSplit {
  std::vector<std::string> words;
  std::vector<std::vector<int32_t>> tokens;
};
WordSplit split_to_word_tokens(const WhisperTokenizer& tokenizer, std::span<const int32_t> tokens,
                               std::string_view language);

// timing.py merge_punctuations, in place: a word that is one of `prepended` (after a
// space) joins the next word, one of `appended` joins the previous; the emptied entries
// stay with word "" and no tokens. Membership is Python's `in` on strings (a substring
// test), as the reference.
void merge_punctuations(std::vector<WordTiming>& alignment, std::string_view prepended,
                        std::string_view appended);

// timing.py find_alignment over the audio already encoded in `source`. num_frames: the
// window's mel frames (<= 3000); sot_sequence: tokenizer.sot_sequence(language, task).
std::vector<WordTiming> find_alignment(LogitsSource& source, const WhisperTokenizer& tokenizer,
                                       std::span<const int32_t> sot_sequence,
                                       std::span<const int32_t> text_tokens, int num_frames,
                                       std::string_view language,
                                       const WordTimestampOptions& options);

// Python's round(x, 2) (correctly rounded, halves to even on the exact decimal value).
double round2(double x);

// timing.py add_word_timestamps over one window's segments (all from the same window:
// their `seek` gives the time offset): fills Segment::words and moves segment start/end
// to the words. Returns nothing; last_speech_timestamp is read as the reference's
// argument (the caller updates it afterwards, see WindowWordState).
void add_word_timestamps(std::span<Segment> segments, LogitsSource& source,
                         const WhisperTokenizer& tokenizer, std::span<const int32_t> sot_sequence,
                         int num_frames, std::string_view language,
                         const WordTimestampOptions& options, double last_speech_timestamp);

// The seek loop's state around one window that word timestamps read and change.
struct WindowWordState {
  std::span<const int32_t> tokens;   // the window's sampled tokens (no <|endoftext|>)
  int64_t previous_seek = 0;         // mel frame where the window starts
  int64_t segment_size = 0;          // the window's audio frames (<= 3000)
  int64_t content_frames = 0;        // mel frames of the whole audio
  int64_t seek = 0;                  // in: the seek after the window; out: where to go next
  double last_speech_timestamp = 0;  // in/out, seconds
};

// Everything transcribe.py does between cutting a window into segments and printing
// them when word_timestamps is on: add_word_timestamps, the seek to the last word's end,
// and (with hallucination_silence_threshold) skipping silence before possible
// hallucinations. Returns false when the window's segments are dropped (the reference's
// `continue`: the caller moves to state.seek and keeps nothing of the window).
bool window_word_timestamps(std::vector<Segment>& segments, WindowWordState& state,
                            LogitsSource& source, const WhisperTokenizer& tokenizer,
                            std::span<const int32_t> sot_sequence, std::string_view language,
                            const WordTimestampOptions& options,
                            std::optional<float> hallucination_silence_threshold);

// transcribe.py's is_segment_anomaly over a segment's words (nullptr: false); exposed
// for tests.
bool is_segment_anomaly(const Segment* segment);

}  // namespace parley
