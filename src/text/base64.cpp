#include "text/base64.h"

#include <array>
#include <cstdint>

namespace parley {
namespace {

constexpr std::array<int8_t, 256> kValues = [] {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int i = 0; i < 64; ++i) t[uint8_t(alphabet[i])] = int8_t(i);
  return t;
}();

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

std::optional<std::string> base64_decode(std::string_view text, const Base64Rules& rules) {
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t symbols = 0, padding = 0;
  for (const char c : text) {
    if (rules.skip_whitespace && is_space(c)) continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    const int8_t v = kValues[uint8_t(c)];
    if (v < 0 || padding > 0) return std::nullopt;
    ++symbols;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(char((acc >> bits) & 0xff));
    }
  }
  // A group of 4 symbols ends on a byte boundary; 1 leftover symbol (6 bits) cannot.
  if (padding > 2 || bits >= 6) return std::nullopt;
  if (rules.require_padding && (symbols + padding) % 4 != 0) return std::nullopt;
  if (rules.require_padding && symbols == 0) return std::nullopt;
  // Strict: leftover bits must be the zero padding of the last byte.
  if (rules.require_padding && (acc & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

}  // namespace parley
