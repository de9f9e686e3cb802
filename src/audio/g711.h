// G.711 (ITU-T, 1972) companded telephone audio: 8-bit mu-law (North America, Japan) and
// A-law (Europe) samples to 16-bit linear PCM, at 8 kHz. The Realtime API's
// `audio/pcmu` / `audio/pcma` (beta: `g711_ulaw` / `g711_alaw`) input formats.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace parley {

// One code to linear PCM, as the ITU reference decoder (and Python's audioop) computes it:
// mu-law 0x00 -> -32124, 0x80 -> 32124, 0xFF and 0x7F -> 0; A-law 0x55 -> -8, 0xD5 -> 8,
// 0x2A -> -32256.
int16_t mulaw_to_pcm16(uint8_t code);
int16_t alaw_to_pcm16(uint8_t code);

// Whole buffers to float in [-1, 1) (int16 / 32768), appended to `out`.
void mulaw_to_float(std::span<const uint8_t> codes, std::vector<float>& out);
void alaw_to_float(std::span<const uint8_t> codes, std::vector<float>& out);

}  // namespace parley
