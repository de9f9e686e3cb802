// Loaders for Hugging Face byte-level BPE tokenizers: tokenizer.json (model.type "BPE"
// with a ByteLevel pre-tokenizer, optionally after a Split regex), vocab.json +
// merges.txt, and whisper.cpp's ggml vocabulary (token bytes by id, rank = id).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "text/bpe.h"

namespace parley {

struct HfAddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
};

struct HfTokenizer {
  BpeTokenizer bpe;  // added tokens are its specials
  std::vector<HfAddedToken> added_tokens;
};

// Error(not_found) when unreadable; Error(unsupported) for a model other than byte-level
// BPE or a pre-tokenizer it cannot reproduce; Error(invalid_argument) when malformed.
// Normalizers (e.g. Qwen's NFC) are not applied.
HfTokenizer load_hf_tokenizer_json(const std::string& path);
// GPT-2's vocab.json (byte-to-unicode token strings -> id) and merges.txt ("a b" lines,
// an optional "#version" first line), GPT-2 regex.
BpeTokenizer load_hf_vocab_merges(const std::string& vocab_json_path,
                                  const std::string& merges_txt_path);
// whisper.cpp ggml vocabulary: vocab[id] = token bytes, merged by rank = id. Files from
// whisper.cpp's current converter hold the tiktoken bytes exactly; older ones stored
// invalid UTF-8 tokens as U+FFFD (repeated, accepted here), which loses the byte tokens:
// such a vocabulary decodes like whisper.cpp but only ASCII text encodes exactly, and
// text needing a lost byte token throws. Prefer the .tiktoken file to encode.
BpeTokenizer bpe_from_ggml_vocab(std::span<const std::string> vocab, const std::string& name);

// GPT-2's bytes_to_unicode: byte -> code point of the printable character that stands for
// it in vocab.json / tokenizer.json strings.
char32_t byte_to_unicode(uint8_t byte);
// A token's bytes as that printable text, UTF-8 encoded (how vocab.json spells them).
std::string bytes_to_unicode(std::string_view bytes);
// Inverse over a UTF-8 token string; throws Error(invalid_argument) for a character that
// stands for no byte.
std::string unicode_to_bytes(std::string_view token, const std::string& name);

}  // namespace parley
