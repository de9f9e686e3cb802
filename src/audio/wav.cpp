// RIFF/WAVE header parsing and the PCM s16 mono fast path (see wav.h).
#include "audio/wav.h"

#include <cstring>

#include "engine/error.h"

namespace parley {
namespace {

uint32_t le32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
uint16_t le16(const uint8_t* p) { return uint16_t(p[0] | p[1] << 8); }

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw Error(ErrorKind::invalid_argument, "[audio] " + name + ": " + what);
}

}  // namespace

std::optional<WavInfo> parse_wav_header(std::span<const uint8_t> bytes, const std::string& name) {
  if (bytes.size() < 12 || std::memcmp(bytes.data(), "RIFF", 4) != 0 ||
      std::memcmp(bytes.data() + 8, "WAVE", 4) != 0)
    return std::nullopt;
  WavInfo info;
  bool have_fmt = false;
  size_t pos = 12;
  // Chunks: 4-byte id, 4-byte little-endian size, payload padded to an even length.
  while (pos + 8 <= bytes.size()) {
    const uint8_t* chunk = bytes.data() + pos;
    const uint32_t size = le32(chunk + 4);
    const size_t payload = pos + 8;
    const size_t present = bytes.size() - payload;
    if (std::memcmp(chunk, "fmt ", 4) == 0) {
      if (size < 16 || present < 16) fail(name, "truncated WAV 'fmt ' chunk");
      info.format = le16(chunk + 8);
      info.channels = le16(chunk + 10);
      info.sample_rate = int(le32(chunk + 12));
      info.bits_per_sample = le16(chunk + 22);
      // WAVE_FORMAT_EXTENSIBLE: the real format tag is the first 2 bytes of the sub-format GUID.
      if (info.format == 0xFFFE && size >= 40 && present >= 40) info.format = le16(chunk + 32);
      have_fmt = true;
    } else if (std::memcmp(chunk, "data", 4) == 0) {
      if (!have_fmt) fail(name, "WAV 'data' chunk before the 'fmt ' chunk");
      info.data_offset = payload;
      // Size 0 or 0xFFFFFFFF (streamed writers) means "to the end of the file", as in
      // FFmpeg's wav demuxer; a size beyond the file is clipped to the bytes present.
      info.data_bytes = (size == 0 || size == 0xFFFFFFFFu || size > present) ? present : size;
      return info;
    }
    if (size > present) fail(name, "truncated WAV file (chunk larger than the file)");
    pos = payload + size + (size & 1u);
  }
  fail(name, have_fmt ? "WAV file has no 'data' chunk" : "WAV file has no 'fmt ' chunk");
}

bool wav_fast_path_ok(const WavInfo& info, int sample_rate) {
  return info.format == 1 && info.channels == 1 && info.bits_per_sample == 16 &&
         info.sample_rate == sample_rate;
}

std::vector<float> wav_pcm16_to_float(std::span<const uint8_t> bytes, const WavInfo& info) {
  const size_t n = info.data_bytes / 2;
  std::vector<float> out(n);
  const uint8_t* p = bytes.data() + info.data_offset;
  for (size_t i = 0; i < n; ++i) out[i] = float(int16_t(le16(p + 2 * i))) / 32768.0f;
  return out;
}

}  // namespace parley
