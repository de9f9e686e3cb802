// Transcript segments and how one decoded window is cut into them, exactly as the seek
// loop of openai/whisper's transcribe() (whisper/transcribe.py): cuts at consecutive
// timestamp pairs, the seek advance, and the start/end times.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace parley {

// One word of a segment (word timestamps, timing.h; the reference's word dict).
struct Word {
  std::string word;        // with its leading space and merged punctuation
  double start = 0;        // seconds, rounded to 0.01 as the reference
  double end = 0;          // seconds
  double probability = 0;  // mean probability of its tokens
};

// One transcript segment (the reference's segment dict; OpenAI's verbose_json segment).
struct Segment {
  int id = 0;
  int seek = 0;                 // mel frame (10 ms) where its window started
  double start = 0;             // seconds
  double end = 0;               // seconds
  std::string text;             // decoded text tokens, not stripped
  std::vector<int32_t> tokens;  // including its timestamp tokens
  float temperature = 0;
  float avg_logprob = 0;
  float compression_ratio = 0;
  float no_speech_prob = 0;
  std::vector<Word> words;  // filled only with word timestamps on
  // With TranscribeOptions::token_logprobs: the log-probability of each entry of `tokens`.
  std::vector<float> token_logprobs;
};

// A piece of a window's tokens: [begin, end) and its time span in seconds.
struct TokenSlice {
  size_t begin = 0;
  size_t end = 0;
  double start = 0;
  double end_time = 0;
};

struct WindowCut {
  std::vector<TokenSlice> slices;
  int seek_advance = 0;  // mel frames to move the seek by
};

constexpr int kInputStride = 2;          // mel frames per audio token (conv stride 2)
constexpr double kTimePrecision = 0.02;  // seconds per timestamp step: 2 * 160 / 16000

// Seconds at mel frame `seek`: float(seek * HOP_LENGTH / SAMPLE_RATE) in the reference.
inline double frame_time(int64_t frames) { return double(frames * 160) / 16000.0; }

// Cuts a window's sampled tokens (no <|endoftext|>) into segments. time_offset: seconds of
// the window start; segment_size: the window's audio frames (<= 3000).
WindowCut cut_window(std::span<const int32_t> tokens, int32_t timestamp_begin, double time_offset,
                     int segment_size);

}  // namespace parley
