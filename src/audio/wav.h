// RIFF/WAVE header parsing and the FFmpeg-free fast path: a PCM s16 mono file already at
// the requested rate is converted by int16 / 32768, which is exactly what the FFmpeg path
// (and the reference's ffmpeg CLI call) produce for it, since no resampling or downmix
// happens and s16 -> s16 is a copy.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace parley {

struct WavInfo {
  int format = 0;  // WAVE_FORMAT tag: 1 PCM, 3 IEEE float; for EXTENSIBLE, the sub-format's tag
  int channels = 0;
  int sample_rate = 0;  // Hz
  int bits_per_sample = 0;
  size_t data_offset = 0;  // byte offset of the "data" chunk's payload
  size_t data_bytes = 0;   // payload size, clipped to the bytes present
};

// Parses the RIFF header and chunk list of `bytes`. Returns nullopt when the bytes do not
// start like a RIFF/WAVE file (then another decoder may try); throws invalid_argument
// ("[audio] <name>: ...") for a RIFF/WAVE file whose chunks are malformed or that has no
// "fmt " or "data" chunk.
std::optional<WavInfo> parse_wav_header(std::span<const uint8_t> bytes, const std::string& name);

// True when `info` describes PCM s16 mono at `sample_rate` (the fast path's case).
bool wav_fast_path_ok(const WavInfo& info, int sample_rate);

// int16 little-endian samples of the data chunk / 32768 (requires wav_fast_path_ok).
// A trailing odd byte is ignored, as FFmpeg does.
std::vector<float> wav_pcm16_to_float(std::span<const uint8_t> bytes, const WavInfo& info);

}  // namespace parley
