// Audio decoding: any container/codec FFmpeg reads (wav, flac, mp3, ogg/opus, m4a, aiff,
// webm, ...) to mono float32 at a given rate, producing exactly the samples the reference
// Whisper pipeline gets from
//   ffmpeg -nostdin -threads 0 -i FILE -f s16le -ac 1 -acodec pcm_s16le -ar 16000 -
// followed by int16 / 32768.0 (libswresample with the CLI's default options to mono s16).
// RIFF PCM s16 mono WAVs already at the requested rate take a fast path without FFmpeg
// (wav.h) that yields the same samples.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace parley {

struct DecodeOptions {
  // Output rate in Hz (Whisper: 16000).
  int sample_rate = 16000;
  // Longest audio accepted, in seconds of output; longer input fails with
  // resource_exhausted instead of growing memory without bound. Default 4 hours
  // (230 M samples, 0.9 GB of float at 16 kHz).
  double max_seconds = 4.0 * 3600.0;
  // Take the WAV fast path when the file is PCM s16 mono at sample_rate (off: always
  // FFmpeg; tests use this to hold the two paths to each other).
  bool wav_fast_path = true;
};

// Decodes the file at `path` to mono float32 in [-1, 1) at options.sample_rate.
// Errors: not_found when the file does not exist or cannot be opened; invalid_argument for
// an empty, truncated, corrupt or non-audio file or one with no audio stream;
// resource_exhausted beyond options.max_seconds; unsupported for a non-PCM-s16 file in a
// build without FFmpeg. Messages read "[audio] <path>: ...".
std::vector<float> load_audio(const std::string& path, const DecodeOptions& options);
std::vector<float> load_audio(const std::string& path, int sample_rate = 16000);

// The same from a whole file image in memory (server uploads); `name` names the input in
// messages and may hint the format by its extension.
std::vector<float> decode_audio(std::span<const uint8_t> bytes, const std::string& name,
                                const DecodeOptions& options);
std::vector<float> decode_audio(std::span<const uint8_t> bytes, const std::string& name,
                                int sample_rate = 16000);

// Whether this build can decode compressed formats (linked with FFmpeg).
bool has_ffmpeg();

}  // namespace parley
