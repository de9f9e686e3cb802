// Tokenizer: the chat models' tokenizer. Loads Hugging Face tokenizer.json (byte-level BPE
// with regex Split pre-tokenizers as GPT-2 / Llama 3 / Qwen; SentencePiece-style BPE with
// byte_fallback and Metaspace or Replace + Prepend normalizers), or a GGUF file's
// tokenizer.ggml.* vocabulary ("gpt2", "llama", "gemma4"), and runs the same pipeline as the
// tokenizers crate: added tokens matched first, normalizer, pre-tokenizer, model,
// post-processor template; decode through the decoder chain. StreamDecoder turns ids into
// text one token at a time without ever splitting a UTF-8 character.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace parley {
namespace io {
class GgufFile;
}
namespace tok {
struct TokenizerSpec;
}

class Tokenizer {
 public:
  // tokenizer.json. Error(not_found) when unreadable, Error(invalid_argument) when
  // malformed, Error(unsupported) naming the component (model type, normalizer,
  // pre-tokenizer, decoder or post-processor) it cannot run.
  static Tokenizer from_file(const std::string& tokenizer_json);
  // model_dir/tokenizer.json plus, when present, tokenizer_config.json (bos_token,
  // eos_token; add_bos_token / add_eos_token decide what encode adds when tokenizer.json
  // has no post_processor, default false) and
  // generation_config.json (eos_token_id, one id or a list, joins eos_ids()).
  static Tokenizer from_dir(const std::string& model_dir);
  // tokenizer.ggml.* metadata: model "gpt2" (byte-level BPE; tokenizer.ggml.pre names the
  // regex family), "llama" (SentencePiece, merged by score) or "gemma4" (SentencePiece-style
  // BPE with merges); token_type control -> special added token, user_defined -> added token.
  static Tokenizer from_gguf(const io::GgufFile& file);
  // From a filled-in spec (the loaders above; tests).
  explicit Tokenizer(tok::TokenizerSpec spec);

  // Added tokens in text become their ids (special ones too, as the crate's default);
  // add_special_tokens adds what the post-processor template (or tokenizer_config.json /
  // GGUF add_bos/add_eos) asks for. Throws Error(invalid_argument) for text that is not
  // valid UTF-8.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // The decoder chain over the tokens' texts; invalid UTF-8 becomes U+FFFD. Throws
  // Error(invalid_argument) for an id outside [0, vocab_size()) or without a token.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  int32_t bos_id() const;  // -1 when none
  int32_t eos_id() const;  // -1 when none
  // Every id that ends generation (eos first; GGUF eot/eom; generation_config.json).
  std::vector<int32_t> eos_ids() const;
  int32_t vocab_size() const;  // one past the largest id
  // Id of a token as written in the vocabulary ("Ġthe", "▁the", "<|im_end|>"); -1 if none.
  int32_t token_id(std::string_view token) const;
  // A token as written in the vocabulary; throws Error(invalid_argument) for unknown ids.
  const std::string& token_text(int32_t id) const;
  // The bytes one token contributes to decoded text in the middle of a sequence (byte-level
  // tokens mapped back, "▁" as a space, <0xNN> as its byte); may be part of a character.
  std::string token_bytes(int32_t id) const;
  bool is_special(int32_t id) const;  // a special added token (skipped by skip_special_tokens)
  // Whether the id has a token: a model's vocabulary is often padded past the tokenizer's
  // (Qwen3: 151936 rows, 151669 tokens), and the rows beyond have none.
  bool has_token(int32_t id) const;
  const std::string& name() const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// Incremental detokenization: push(id) returns the text that id adds, holding back what the
// next tokens may still change (an incomplete UTF-8 character, byte-fallback bytes), so the
// pushes plus flush() concatenate to Tokenizer::decode of all ids and each is valid UTF-8.
class StreamDecoder {
 public:
  // Keeps its own (shared) reference to the tokenizer.
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);
  std::string push(int32_t id);
  // Whatever is held back (completed as decode would, U+FFFD for a cut character); the
  // decoder then starts a new sequence.
  std::string flush();

 private:
  Tokenizer tokenizer_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_ = 0;  // ids_[prefix_, read_) decoded to text already returned
  size_t read_ = 0;
};

}  // namespace parley
