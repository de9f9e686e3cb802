// `parley transcribe`'s decoding flags: openai-whisper's CLI options with dashes
// (--beam-size, --best-of, --temperature, --initial-prompt, ...), plus --seed, --hotwords and
// --clip-timestamps; "none" turns a threshold off. docs/DECODING.md compares each with the
// reference.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "whisper/transcribe.h"

namespace parley::cli {

// The flags as typed; apply_decoding_flags validates and converts them.
struct DecodingFlags {
  float temperature = 0.0f;
  std::string temperature_increment = "0.2";
  int best_of = 0;
  int beam_size = 0;
  std::string patience;
  std::string length_penalty;
  uint64_t seed = 0;
  std::string compression_ratio_threshold = "2.4";
  std::string logprob_threshold = "-1.0";
  std::string no_speech_threshold = "0.6";
  bool condition_on_previous_text = true;
  std::string initial_prompt;
  bool carry_initial_prompt = false;
  std::string prefix;
  std::string hotwords;
  std::string suppress_tokens = "-1";
  bool suppress_blank = true;
  float max_initial_timestamp = 1.0f;
  int sample_len = 0;
  std::string clip_timestamps = "0";
};

void add_decoding_flags(CLI::App* cmd, DecodingFlags& flags);
// Sets the decoding fields of `options`; throws Error(invalid_argument) for bad values.
void apply_decoding_flags(const DecodingFlags& flags, TranscribeOptions& options);

}  // namespace parley::cli
