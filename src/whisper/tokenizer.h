// WhisperTokenizer: Whisper's byte-level BPE text tokenizer plus its special tokens
// (<|endoftext|>, <|startoftranscript|>, languages, tasks, <|nospeech|>, timestamps).
// Ids follow openai/whisper's whisper/tokenizer.py: the specials are appended after the
// last BPE rank in a fixed order, so every model size (n_vocab 51864 for .en, 51865
// multilingual, 51866 large-v3 with yue) gets the right ids.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace parley {

class BpeTokenizer;

class WhisperTokenizer {
 public:
  // ranks_path: a .tiktoken file (multilingual.tiktoken, or gpt2.tiktoken for .en models).
  // n_vocab: the model's vocabulary size; decides the number of languages (100 for 51866).
  static WhisperTokenizer from_tiktoken(const std::string& ranks_path, bool multilingual,
                                        int n_vocab);
  // A Hugging Face tokenizer.json of a Whisper model; special ids come from its added
  // tokens and are checked against the layout implied by n_vocab.
  static WhisperTokenizer from_hf_json(const std::string& tokenizer_json_path, int n_vocab);

  // whisper.cpp ggml model vocabulary (io::GgmlWhisperFile::vocab, bytes by id). Entries
  // from "<|endoftext|>" on (English-only files list it at 50256) are not BPE ranks.
  // Older files are lossy (see bpe_from_ggml_vocab): prefer from_tiktoken to encode.
  static WhisperTokenizer from_ggml_vocab(std::span<const std::string> vocab, bool multilingual,
                                          int n_vocab, const std::string& name);

  // Plain text to BPE ids; special-token strings in the text are encoded as text
  // (tiktoken's encode_ordinary; whisper's encode would raise on them).
  std::vector<int32_t> encode(std::string_view text) const;
  // Concatenated token bytes; ids >= eot() (specials and timestamps) are dropped. The
  // result may be invalid UTF-8 when ids end mid-character.
  std::string decode(std::span<const int32_t> ids) const;
  // Every id's text, timestamps as "<|1.08|>" and the other specials as "<|en|>" etc.,
  // as whisper's decode_with_timestamps.
  std::string decode_with_timestamps(std::span<const int32_t> ids) const;
  // The bytes of one id: BPE bytes, or the special's text ("<|en|>", "<|0.02|>").
  std::string token_bytes(int32_t id) const;

  int32_t eot() const { return eot_; }
  int32_t sot() const { return eot_ + 1; }
  int32_t translate() const { return translate_; }
  int32_t transcribe() const { return translate_ + 1; }
  int32_t sot_lm() const { return translate_ + 2; }
  int32_t sot_prev() const { return translate_ + 3; }
  int32_t no_speech() const { return translate_ + 4; }
  int32_t no_timestamps() const { return translate_ + 5; }
  int32_t timestamp_begin() const { return translate_ + 6; }

  // "en" -> id of <|en|>; throws Error(invalid_argument) for an unknown code.
  int32_t language_token(std::string_view code) const;
  // The codes in id order ("en", "zh", "de", ...).
  std::vector<std::string> language_codes() const;
  // "en" for the id of <|en|>; "" when id is not a language token.
  std::string language_of_token(int32_t id) const;

  bool multilingual() const { return multilingual_; }
  int n_vocab() const { return n_vocab_; }

  // <|startoftranscript|> [<|lang|> <|task|>] as whisper's tokenizer.sot_sequence; the
  // language and task appear only for multilingual models (language: a code; nullopt
  // leaves it out). task: "transcribe" or "translate".
  std::vector<int32_t> sot_sequence(std::optional<std::string> language,
                                    std::string_view task) const;
  // whisper's tokenizer.non_speech_tokens: ids of the symbol list (and their
  // leading-space variants), sorted ascending, exactly as the reference computes them.
  // Encoded at the first call and kept (every window's logit filters use them); copies
  // of the tokenizer share the result. Thread-safe.
  const std::vector<int32_t>& non_speech_tokens() const;

 private:
  WhisperTokenizer() = default;
  // Lays out the specials after the last BPE rank; num_languages follows from n_vocab.
  void init_specials(bool multilingual, int n_vocab, int32_t first_special,
                     const std::string& name);

  std::string special_text(int32_t id) const;
  std::vector<int32_t> compute_non_speech_tokens() const;

  std::shared_ptr<const BpeTokenizer> bpe_;
  bool multilingual_ = false;
  int n_vocab_ = 0;
  int num_languages_ = 0;
  int32_t eot_ = 0;
  int32_t translate_ = 0;
  struct NonSpeechCache {
    std::once_flag once;
    std::vector<int32_t> ids;
  };
  std::shared_ptr<NonSpeechCache> non_speech_ = std::make_shared<NonSpeechCache>();
};

}  // namespace parley
