// Decoding one 30 s window the way openai/whisper's DecodingTask does (whisper/decoding.py),
// greedy at temperature 0 on the parity path: initial tokens, no_speech_prob at the
// <|startoftranscript|> position, the logit filters (logit_filters.h), argmax with the
// KV cache, avg_logprob and compression_ratio; and language detection.
//
// The decoder is reached through LogitsSource so tests can script logits; a WhisperSession
// is adapted by SessionLogitsSource.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace parley {

class WhisperSession;
class WhisperTokenizer;
struct CrossAttentionWeights;  // model.h

// What a decoding loop needs from a model: encode a window, then decode tokens after the
// cached ones.
class LogitsSource {
 public:
  virtual ~LogitsSource() = default;
  // mel: f32 [n_mels, 3000]. Drops cached tokens.
  virtual void encode(const Tensor& mel) = 0;
  // f32 [tokens.size(), n_vocab] on the CPU for positions n_cached .. n_cached + size - 1;
  // the tokens join the cache.
  virtual Tensor decode(std::span<const int32_t> tokens) = 0;
  // Drops cached tokens, keeps the encoded audio.
  virtual void reset() = 0;
  virtual int n_text_ctx() const = 0;  // decoder positions (448)
  virtual int n_mels() const = 0;      // 80 or 128
  // Word timestamps (timing.h): the decoder over `tokens` from position 0 on the encoded
  // audio, with the cross-attention scores of `heads` (empty: the model's, by
  // resolve_alignment_heads); see WhisperSession::cross_attention_weights. Drops cached
  // tokens. Default: throws Error(unsupported). Defined in timing.cpp.
  virtual CrossAttentionWeights cross_attention_weights(std::span<const int32_t> tokens,
                                                        std::span<const std::pair<int, int>> heads);
};

// The real decoder.
class SessionLogitsSource : public LogitsSource {
 public:
  explicit SessionLogitsSource(WhisperSession& session) : session_(session) {}
  void encode(const Tensor& mel) override;
  Tensor decode(std::span<const int32_t> tokens) override;
  void reset() override;
  int n_text_ctx() const override;
  int n_mels() const override;
  CrossAttentionWeights cross_attention_weights(
      std::span<const int32_t> tokens, std::span<const std::pair<int, int>> heads) override;

 private:
  WhisperSession& session_;
};

// Options of one window's decoding (the reference's DecodingOptions, greedy subset).
struct DecodingOptions {
  // "transcribe" (X -> X) or "translate" (X -> English).
  std::string task = "transcribe";
  // Language code ("en"); nullopt: detected from this window on multilingual models,
  // "en" on English-only ones.
  std::optional<std::string> language;
  // Sampling temperature; only 0 (greedy) is implemented: anything else throws
  // Error(unsupported).
  float temperature = 0.0f;
  // Adds <|notimestamps|> and leaves out the timestamp rules.
  bool without_timestamps = false;
  // Latest first timestamp, in seconds (rounded to 20 ms steps); 0: no limit.
  float max_initial_timestamp = 1.0f;
  // Suppresses " " and <|endoftext|> at the first sampled position.
  bool suppress_blank = true;
  // Comma-separated ids never sampled; "-1" = the non-speech symbols. The special tokens
  // are added unless this is empty (see resolve_suppress_tokens).
  std::string suppress_tokens = "-1";
  // Previous text as ids; the last n_text_ctx/2 - 1 (223) go after <|startofprev|>.
  std::vector<int32_t> prompt;
  // Forced first tokens of the transcript (after the sot sequence).
  std::vector<int32_t> prefix;
  // Most tokens sampled; 0: n_text_ctx / 2 (224).
  int sample_len = 0;
  // Called with every sampled token of this attempt as soon as it is chosen (before the
  // fallback decides whether the attempt is kept), <|endoftext|> included.
  std::function<void(int32_t)> on_token;
  // Polled before every decoder step; when it returns true decoding throws
  // Error(cancelled).
  std::function<bool()> cancelled;
};

struct DecodingResult {
  std::vector<int32_t> tokens;  // sampled ids, without <|endoftext|>
  std::string text;             // decoded, stripped (invalid UTF-8 replaced by U+FFFD)
  std::string language;         // code of the language used
  float avg_logprob = 0;        // sum of chosen log-probs / (len(tokens) + 1)
  float no_speech_prob = 0;     // P(<|nospeech|>) at the <|startoftranscript|> position
  float temperature = 0;
  float compression_ratio = 0;  // utf-8 bytes of text / zlib-compressed bytes
};

struct LanguageDetection {
  std::string code;                                  // the most probable language
  std::vector<std::pair<std::string, float>> probs;  // per language, in token order
};

// One decoder step on <|startoftranscript|> over already-encoded audio; softmax over the
// language tokens only. Resets the cache before and after. Throws Error(unsupported) for
// English-only models.
LanguageDetection detect_language(LogitsSource& source, const WhisperTokenizer& tokenizer);

// Encodes mel_window (f32 [n_mels, 3000]) and decodes it.
DecodingResult decode_window(LogitsSource& source, const WhisperTokenizer& tokenizer,
                             const Tensor& mel_window, const DecodingOptions& options);
DecodingResult decode_window(WhisperSession& session, const WhisperTokenizer& tokenizer,
                             const Tensor& mel_window, const DecodingOptions& options);
// Decodes audio already encoded in `source` (temperature fallback re-decodes this way).
DecodingResult decode_encoded(LogitsSource& source, const WhisperTokenizer& tokenizer,
                              const DecodingOptions& options);

// The initial tokens: [<|startofprev|>, prompt[-(n_text_ctx/2-1):]...] + sot sequence
// (+ <|notimestamps|>) + prefix. `language` is the code written into the sot sequence.
std::vector<int32_t> initial_tokens(const WhisperTokenizer& tokenizer,
                                    const DecodingOptions& options,
                                    const std::optional<std::string>& language, int n_text_ctx);

// Whisper's Tokenizer.decode: ids from timestamp_begin on are dropped, other specials keep
// their text ("<|en|>"), and the bytes become text as bytes.decode("utf-8", "replace").
std::string reference_decode(const WhisperTokenizer& tokenizer, std::span<const int32_t> ids);

// len(text) / len(zlib.compress(text)) at zlib's default level, as whisper/utils.py.
float compression_ratio(std::string_view text);
// Python's bytes.decode("utf-8", errors="replace"): each maximal invalid subsequence
// becomes U+FFFD (what tiktoken's decode returns to the reference).
std::string utf8_replace_invalid(std::string_view bytes);
// Python's str.strip(): leading and trailing Unicode whitespace removed.
std::string py_strip(std::string_view text);

}  // namespace parley
