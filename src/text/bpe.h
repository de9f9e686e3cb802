// BpeTokenizer: byte-level BPE (GPT-2 style) shared by Whisper and the LLM tokenizers.
// Text is split into pieces by a pre-tokenizer regex (PCRE2, UTF + UCP, JIT), each piece
// is merged bytewise, lowest rank first (tiktoken's byte_pair_merge), or by an explicit
// merges list (Hugging Face BPE). Tokens are raw bytes; decode is byte-exact.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace parley {

// GPT-2's pre-tokenizer, as tiktoken's "gpt2" encoding and Hugging Face's ByteLevel
// pre-tokenizer (use_regex) write it.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct BpeConfig {
  // Token bytes -> id (empty bytes: an id that no text encodes to). Without merges the id is also
  // the merge rank (tiktoken: a pair merges when its concatenation is a token; the lowest id merges
  // first).
  std::vector<std::pair<std::string, int32_t>> vocab;
  // Optional Hugging Face merges, highest priority first, as (left id, right id); the
  // result is the token of the concatenated bytes. Empty: tiktoken rank semantics.
  std::vector<std::pair<int32_t, int32_t>> merges;
  // With merges: a piece that is itself a token encodes to it without merging (Hugging
  // Face's ignore_merges, e.g. Llama 3). Rank mode always does this, as tiktoken.
  bool ignore_merges = false;
  // Pre-tokenizer regex (PCRE2 syntax); empty: the whole text is one piece.
  std::string pattern = std::string(kGpt2Pattern);
  // Special tokens: literal text -> id, matched only by encode_with_specials.
  std::vector<std::pair<std::string, int32_t>> specials;
  // Accept repeated token bytes (the lowest id encodes, every id decodes): whisper.cpp's
  // older converters stored invalid UTF-8 tokens lossily as U+FFFD, so their ggml
  // vocabularies repeat "\xef\xbf\xbd" hundreds of times.
  bool allow_duplicate_tokens = false;
  // Names the source in error messages ("[tokenizer] <name>: ...").
  std::string name = "bpe";
};

// text escaped for use as a literal in a PCRE2 pattern (UTF or not): every ASCII byte that
// is not a letter or digit as \xhh, other bytes as themselves.
std::string regex_literal(std::string_view text);

class BpeTokenizer {
 public:
  // Validates the config (duplicate tokens or ids, merges of unknown tokens, a regex that
  // does not compile) and throws Error(invalid_argument) naming config.name.
  explicit BpeTokenizer(BpeConfig config);
  ~BpeTokenizer();
  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;

  // tiktoken layout: tokens_by_rank[r] holds the bytes of rank r (id = rank).
  static BpeTokenizer from_ranks(std::vector<std::string> tokens_by_rank,
                                 std::string pattern = std::string(kGpt2Pattern),
                                 std::string name = "bpe", bool allow_duplicate_tokens = false);

  // Ordinary encoding: special-token text is encoded as plain text.
  std::vector<int32_t> encode(std::string_view text) const;
  // Special-token text (any of the specials) becomes its id, the rest as encode().
  std::vector<int32_t> encode_with_specials(std::string_view text) const;
  // Concatenated bytes of the ids (specials give their text); throws for unknown ids.
  std::string decode(std::span<const int32_t> ids) const;
  // Bytes of one token, or a special's text; throws Error(invalid_argument) if unknown.
  const std::string& token_bytes(int32_t id) const;
  bool has_id(int32_t id) const;

  // Id of exact token bytes or special text; -1 when absent.
  int32_t token_id(std::string_view bytes) const;
  int32_t special_id(std::string_view text) const;
  // One past the largest id (vocab and specials).
  int32_t id_end() const;
  const std::string& name() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace parley
