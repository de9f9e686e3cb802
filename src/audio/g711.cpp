#include "audio/g711.h"

#include <array>

namespace parley {
namespace {

// Codes are stored inverted (mu-law) or with even bits flipped (A-law); then
// sign (1 bit), segment (3 bits, the exponent), mantissa (4 bits).
constexpr int16_t decode_mulaw(uint8_t code) {
  const int u = ~code & 0xFF;
  int t = ((u & 0x0F) << 3) + 0x84;  // mantissa with the bias of 132 added at encoding
  t <<= (u & 0x70) >> 4;
  return int16_t((u & 0x80) ? (0x84 - t) : (t - 0x84));
}

constexpr int16_t decode_alaw(uint8_t code) {
  const int a = code ^ 0x55;
  int t = (a & 0x0F) << 4;
  const int segment = (a & 0x70) >> 4;
  if (segment == 0) {
    t += 8;
  } else {
    t += 0x108;
    if (segment > 1) t <<= segment - 1;
  }
  return int16_t((a & 0x80) ? t : -t);
}

template <int16_t (*F)(uint8_t)>
constexpr std::array<int16_t, 256> table() {
  std::array<int16_t, 256> t{};
  for (int i = 0; i < 256; ++i) t[size_t(i)] = F(uint8_t(i));
  return t;
}

constexpr auto kMulaw = table<decode_mulaw>();
constexpr auto kAlaw = table<decode_alaw>();

void to_float(std::span<const uint8_t> codes, const std::array<int16_t, 256>& t,
              std::vector<float>& out) {
  out.reserve(out.size() + codes.size());
  for (uint8_t c : codes) out.push_back(float(t[c]) / 32768.0f);
}

}  // namespace

int16_t mulaw_to_pcm16(uint8_t code) { return kMulaw[code]; }
int16_t alaw_to_pcm16(uint8_t code) { return kAlaw[code]; }

void mulaw_to_float(std::span<const uint8_t> codes, std::vector<float>& out) {
  to_float(codes, kMulaw, out);
}
void alaw_to_float(std::span<const uint8_t> codes, std::vector<float>& out) {
  to_float(codes, kAlaw, out);
}

}  // namespace parley
