// Whisper's logit filters, applied in order to one row of next-token logits before the
// token is chosen, exactly as openai/whisper whisper/decoding.py does: SuppressBlank,
// SuppressTokens, ApplyTimestampRules. Rows are f32 on the host; a suppressed token gets
// -infinity.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace parley {

class WhisperTokenizer;

class LogitFilter {
 public:
  virtual ~LogitFilter() = default;
  // logits: [n_vocab] for the next position; tokens: the whole sequence so far (initial
  // tokens, then the sampled ones).
  virtual void apply(std::span<float> logits, std::span<const int32_t> tokens) const = 0;
};

// At the first sampled position, suppresses encode(" ") and <|endoftext|>, so a window
// never starts with a blank or ends empty.
class SuppressBlank : public LogitFilter {
 public:
  SuppressBlank(const WhisperTokenizer& tokenizer, int sample_begin);
  void apply(std::span<float> logits, std::span<const int32_t> tokens) const override;

 private:
  std::vector<int32_t> blank_;
  int sample_begin_;
};

// Suppresses a fixed set of ids at every position.
class SuppressTokens : public LogitFilter {
 public:
  explicit SuppressTokens(std::vector<int32_t> ids) : ids_(std::move(ids)) {}
  void apply(std::span<float> logits, std::span<const int32_t> tokens) const override;
  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  std::vector<int32_t> ids_;
};

// The timestamp grammar: <|notimestamps|> never; timestamps in pairs except right before
// <|endoftext|>; timestamps never decrease (and a closed segment is never empty); the first
// sampled token is a timestamp at most max_initial_timestamp_index steps in; a timestamp is
// forced when the timestamps together are likelier than the best text token.
class ApplyTimestampRules : public LogitFilter {
 public:
  // max_initial_timestamp_index: in 20 ms steps (nullopt: no limit).
  ApplyTimestampRules(const WhisperTokenizer& tokenizer, int sample_begin,
                      std::optional<int> max_initial_timestamp_index);
  void apply(std::span<float> logits, std::span<const int32_t> tokens) const override;

 private:
  int32_t eot_;
  int32_t no_timestamps_;
  int32_t timestamp_begin_;
  int sample_begin_;
  std::optional<int> max_initial_timestamp_index_;
};

// The ids that DecodingOptions::suppress_tokens names, as the reference's
// DecodingTask._get_suppress_tokens: a comma-separated list of ids where "-1" stands for
// tokenizer.non_speech_tokens(); <|transcribe|>, <|translate|>, <|startoftranscript|>,
// <|startofprev|>, <|startoflm|> and <|nospeech|> are always added. Sorted, unique.
// Throws Error(invalid_argument) for text that is not a list of integers or an id outside
// [0, n_vocab).
std::vector<int32_t> resolve_suppress_tokens(const WhisperTokenizer& tokenizer,
                                             const std::string& spec);

// The filters the reference's DecodingTask builds, in its order.
struct LogitFilterSettings {
  bool suppress_blank = true;          // SuppressBlank
  std::string suppress_tokens = "-1";  // "" leaves SuppressTokens out entirely
  bool without_timestamps = false;     // true leaves ApplyTimestampRules out
  float max_initial_timestamp = 1.0f;  // seconds; 0 means no limit (as the reference)
};
std::vector<std::unique_ptr<LogitFilter>> make_logit_filters(const WhisperTokenizer& tokenizer,
                                                             const LogitFilterSettings& settings,
                                                             int sample_begin);

}  // namespace parley
