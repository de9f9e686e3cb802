// TokenizerSpec: the plain description of a chat tokenizer's pipeline (normalizer,
// pre-tokenizer, model, decoder, added tokens, post-processor template), modelled on the
// Hugging Face tokenizers crate. The tokenizer.json and GGUF loaders fill it in; the
// Tokenizer (tokenizer.h) runs it. Internal to src/text.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/tokenizer_regex.h"

namespace parley::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct NormalizerStep {
  enum class Kind { nfc, nfd, nfkc, nfkd, lowercase, replace, prepend, strip, strip_accents };
  Kind kind = Kind::nfc;
  std::shared_ptr<const TokRegex> pattern;  // replace
  std::string content;                      // replace: the replacement; prepend: the prefix
  bool left = false, right = false;         // strip
};

// What a Split does with the pieces its pattern matches (the crate's
// SplitDelimiterBehavior).
enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };
enum class PrependScheme { always, first, never };

struct PreTokenizerStep {
  enum class Kind { split, byte_level, metaspace };
  Kind kind = Kind::split;
  std::shared_ptr<const TokRegex> pattern;  // split; byte_level with use_regex: GPT-2's
  SplitBehavior behavior = SplitBehavior::isolated;
  bool invert = false;
  bool add_prefix_space = false;  // byte_level
  std::string replacement;        // metaspace ("▁")
  PrependScheme prepend_scheme = PrependScheme::always;
  bool split = true;  // metaspace: split at each replacement (merged with the next piece)
};

struct Model {
  // bpe: merges by rank over the characters of each piece (the crate's BPE model);
  // spm: llama.cpp's SentencePiece BPE, merging the highest-scoring token pair first.
  enum class Kind { bpe, spm };
  Kind kind = Kind::bpe;
  StringIdMap vocab;                     // token text as written -> id
  std::vector<std::string> id_to_token;  // "" where an id has no model token
  // bpe: (left id << 32 | right id) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;
  std::vector<float> scores;        // spm: by id
  std::vector<uint8_t> mergeable;   // spm: 1 for ids that pair merges may produce
  bool byte_fallback = false;       // unknown characters as <0xNN> tokens
  bool ignore_merges = false;       // a piece that is a token encodes to it directly
  bool whole_newline_runs = false;  // a piece of only '\n' that is a token encodes to it
  bool fuse_unk = false;
  int32_t unk_id = -1;
};

struct DecoderStep {
  enum class Kind { byte_level, replace, byte_fallback, fuse, strip, metaspace };
  Kind kind = Kind::fuse;
  std::string pattern, content;  // replace (literal); strip: content is the character
  int start = 0, stop = 0;       // strip
  std::string replacement;       // metaspace
  PrependScheme prepend_scheme = PrependScheme::always;
};

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool lstrip = false, rstrip = false, single_word = false;
  bool normalized = false;  // matched in normalized text (content normalized too)
};

// One piece of a TemplateProcessing "single" template: the text's ids, or fixed ids.
struct TemplatePiece {
  bool sequence = false;
  std::vector<int32_t> ids;
};

struct TokenizerSpec {
  std::string name;  // names the source in messages
  std::vector<NormalizerStep> normalizer;
  std::vector<PreTokenizerStep> pre_tokenizer;
  Model model;
  bool has_decoder = false;  // without one, tokens are joined with spaces (as the crate)
  std::vector<DecoderStep> decoder;
  std::vector<AddedToken> added_tokens;
  std::vector<TemplatePiece> template_single;  // empty: add_special_tokens adds nothing
  int32_t bos_id = -1, eos_id = -1;
  std::vector<int32_t> eos_ids;
};

// GPT-2's pre-tokenizer regex (ByteLevel with use_regex).
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace parley::tok
