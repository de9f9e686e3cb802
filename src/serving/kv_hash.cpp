// SipHash-2-4-128 as in Aumasson and Bernstein's reference implementation (siphash.c with
// outlen 16), little-endian words.
#include "serving/kv_hash.h"

#include <cstring>
#include <vector>

namespace parley {

namespace {

// The prefix cache's fixed key: not a secret (files on disk carry hashes anyway), only a
// domain separator from other SipHash users.
constexpr uint64_t kKey0 = 0x7061726c65792d6bull;  // "parley-k"
constexpr uint64_t kKey1 = 0x762d626c6f636b31ull;  // "v-block1"

uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

uint64_t load_le(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

struct Sip {
  uint64_t v0, v1, v2, v3;
  void round() {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  }
};

}  // namespace

std::string BlockHash::hex() const {
  static const char* digits = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 16; ++i) {
    s[size_t(i)] = digits[(hi >> (60 - 4 * i)) & 15];
    s[size_t(16 + i)] = digits[(lo >> (60 - 4 * i)) & 15];
  }
  return s;
}

BlockHash siphash128(uint64_t k0, uint64_t k1, std::span<const uint8_t> data) {
  Sip s{0x736f6d6570736575ull ^ k0, 0x646f72616e646f6dull ^ k1, 0x6c7967656e657261ull ^ k0,
        0x7465646279746573ull ^ k1};
  s.v1 ^= 0xee;
  const size_t n = data.size(), full = n & ~size_t(7);
  for (size_t i = 0; i < full; i += 8) {
    const uint64_t m = load_le(data.data() + i, 8);
    s.v3 ^= m;
    s.round();
    s.round();
    s.v0 ^= m;
  }
  const uint64_t last = (uint64_t(n) << 56) | load_le(data.data() + full, n - full);
  s.v3 ^= last;
  s.round();
  s.round();
  s.v0 ^= last;
  s.v2 ^= 0xee;
  for (int i = 0; i < 4; ++i) s.round();
  BlockHash h;
  h.lo = s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
  s.v1 ^= 0xdd;
  for (int i = 0; i < 4; ++i) s.round();
  h.hi = s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
  return h;
}

BlockHash namespace_hash(std::string_view ns) {
  std::vector<uint8_t> bytes(ns.size() + 10);
  std::memcpy(bytes.data(), "parley-ns:", 10);
  std::memcpy(bytes.data() + 10, ns.data(), ns.size());
  return siphash128(kKey0, kKey1, bytes);
}

BlockHash block_hash(const BlockHash& parent, std::span<const int32_t> tokens) {
  std::vector<uint8_t> bytes(16 + 4 * tokens.size());
  for (int i = 0; i < 8; ++i) {
    bytes[size_t(i)] = uint8_t(parent.lo >> (8 * i));
    bytes[size_t(8 + i)] = uint8_t(parent.hi >> (8 * i));
  }
  for (size_t t = 0; t < tokens.size(); ++t)
    for (int i = 0; i < 4; ++i)
      bytes[16 + 4 * t + size_t(i)] = uint8_t(uint32_t(tokens[t]) >> (8 * i));
  return siphash128(kKey0, kKey1, bytes);
}

}  // namespace parley
