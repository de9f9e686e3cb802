// The prefix cache's block identity (DESIGN.md section 8): a full block's hash is
// SipHash-2-4 (128-bit output) of its parent block's hash and its token ids, the first
// block's parent being the hash of the request's namespace (adapter, media identity,
// cache_salt: requests in different namespaces never share a block). The chain makes a
// block's hash name its whole prefix, as vLLM's hash_block_tokens does.
//
// Collisions: 128 bits make an accidental one negligible (about n^2 / 2^129 for n blocks
// ever hashed), SipHash's keyed mixing makes crafted ones impractical without the key, and
// the pool still verifies a hit's stored parent hash and token ids before reusing it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace parley {

struct BlockHash {
  uint64_t lo = 0, hi = 0;
  bool operator==(const BlockHash&) const = default;
  std::string hex() const;  // 32 lowercase hex digits, hi first
};

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const {
    return size_t(h.lo ^ (h.hi * 0x9e3779b97f4a7c15ull));
  }
};

// SipHash-2-4 with 128-bit output over `data` under the 16-byte key (k0, k1).
BlockHash siphash128(uint64_t k0, uint64_t k1, std::span<const uint8_t> data);

// The root of a namespace's chain; "" is the default namespace.
BlockHash namespace_hash(std::string_view ns);
// hash(parent, tokens): the token ids as 32-bit little-endian words after the parent's 16 bytes.
BlockHash block_hash(const BlockHash& parent, std::span<const int32_t> tokens);

}  // namespace parley
