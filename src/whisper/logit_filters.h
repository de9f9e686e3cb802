// Whisper's logit filters, applied in order to one row of next-token logits before the
// token is chosen, exactly as openai/whisper whisper/decoding.py does: SuppressBlank,
// SuppressTokens, ApplyTimestampRules. Rows are f32 on the host; a suppressed token gets
// -infinity.
//
// The same filters can also be stated as the inputs of the engine's masked_topk
// (engine/ops/reduce.h), so a device session makes the choice next to the logits and only
// token ids cross to the host: the ids suppressed at every position (always_masked), and per
// position a rule row, the timestamp split point and up to kRuleRanges suppressed ranges
// (add_rule). Both forms suppress the same ids and apply the same timestamp rule.
// Past the first sampled token the rule rows of greedy decoding follow from a small state
// that the engine's advance_timestamp_rule carries on the device (GreedyChainStart), so
// greedy steps can follow each other there without the host.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/ops/timestamp_rule.h"

namespace parley {

class WhisperTokenizer;

// One position's rule row for masked_topk: [split, b0, e0, b1, e1, ...]; split <= 0: none;
// unused pairs are (0, 0).
constexpr int kRuleRanges = 4;
constexpr int kRuleWidth = 1 + 2 * kRuleRanges;
struct StepRule {
  std::array<int32_t, kRuleWidth> v{};
  int n_ranges = 0;
  // Suppresses [begin, end); false when the row is full.
  bool add_range(int32_t begin, int32_t end);
};

class LogitFilter {
 public:
  virtual ~LogitFilter() = default;
  // logits: [n_vocab] for the next position; tokens: the whole sequence so far (initial
  // tokens, then the sampled ones).
  virtual void apply(std::span<float> logits, std::span<const int32_t> tokens) const = 0;
  // The masked_topk form: ids suppressed at every position go to `ids`; the rest, at the
  // position after `tokens`, into `rule`. add_rule returns false where the filter has no
  // such form (the caller then applies the filters on the host).
  virtual void always_masked(std::vector<int32_t>& ids) const { (void)ids; }
  virtual bool add_rule(std::span<const int32_t> tokens, StepRule& rule) const {
    (void)tokens;
    (void)rule;
    return false;
  }
};

// At the first sampled position, suppresses encode(" ") and <|endoftext|>, so a window
// never starts with a blank or ends empty.
class SuppressBlank : public LogitFilter {
 public:
  SuppressBlank(const WhisperTokenizer& tokenizer, int sample_begin);
  void apply(std::span<float> logits, std::span<const int32_t> tokens) const override;
  bool add_rule(std::span<const int32_t> tokens, StepRule& rule) const override;

 private:
  std::vector<int32_t> blank_;
  int sample_begin_;
};

// Suppresses a fixed set of ids at every position.
class SuppressTokens : public LogitFilter {
 public:
  explicit SuppressTokens(std::vector<int32_t> ids) : ids_(std::move(ids)) {}
  void apply(std::span<float> logits, std::span<const int32_t> tokens) const override;
  void always_masked(std::vector<int32_t>& ids) const override;
  bool add_rule(std::span<const int32_t>, StepRule&) const override { return true; }
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
  void always_masked(std::vector<int32_t>& ids) const override;
  bool add_rule(std::span<const int32_t> tokens, StepRule& rule) const override;

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

// The filters' masked_topk form: the ids suppressed at every position (sorted, unique), and
// the rule row of the position after `tokens` (false when some filter has none there).
std::vector<int32_t> always_masked(std::span<const std::unique_ptr<LogitFilter>> filters);
bool step_rule(std::span<const std::unique_ptr<LogitFilter>> filters,
               std::span<const int32_t> tokens, StepRule& rule);
// step_rule for each of several sequences (beam rows): their rule rows into `rules`
// (kRuleWidth each, replacing its contents); false when one of them has none.
bool step_rules(std::span<const std::unique_ptr<LogitFilter>> filters,
                std::span<const std::vector<int32_t>> sequences, std::vector<int32_t>& rules);

// advance_timestamp_rule's state (engine/ops/timestamp_rule.h) for the tokens sampled so far
// (the sequence after sample_begin): (timestamps on, the last token, the last timestamp),
// -1 for none. From it the op writes the rule rows ApplyTimestampRules::add_rule writes for
// every later position (with timestamps off: the empty row, as the other filters have no
// rule after the first sampled position).
std::array<int32_t, kTimestampRuleState> timestamp_rule_state(std::span<const int32_t> sampled,
                                                              bool timestamps,
                                                              int32_t timestamp_begin);

struct BeamChainStart;  // beam_search.h

// Where greedy decoding chained on a device starts (LogitsSource::chain_begin,
// WhisperSession::chain_begin), after at least one sampled token.
struct GreedyChainStart {
  int32_t token = 0;  // the last sampled token: the chain's first step decodes it
  StepRule rule;      // that step's rule row (step_rule after the sequence so far)
  std::array<int32_t, kTimestampRuleState> state{};  // timestamp_rule_state of that sequence
  std::span<const int32_t> always;  // the ids suppressed at every position (always_masked)
  TimestampRuleParams grammar;      // the tokenizer's eot and timestamp_begin
};
// The start of a greedy chain after `tokens` (the initial tokens, then the tokens sampled
// from sample_begin on: none when the chain begins at the initial pass), with the timestamp
// grammar on or off: false where the filters have no rule form there.
bool greedy_chain_start(std::span<const std::unique_ptr<LogitFilter>> filters,
                        std::span<const int32_t> tokens, int sample_begin, bool timestamps,
                        std::span<const int32_t> always, TimestampRuleParams grammar,
                        GreedyChainStart& start);
// The start of a beam chain (beam_search.h BeamChainStart) after `rows` (each the initial
// tokens and its sampled ones; one row at a window's initial pass) with their scores `sums`,
// as greedy_chain_start of each row, and the search's finished count and limit: false where
// one row has no rule form.
bool beam_chain_start(std::span<const std::unique_ptr<LogitFilter>> filters,
                      std::span<const std::vector<int32_t>> rows, std::span<const float> sums,
                      int sample_begin, bool timestamps, std::span<const int32_t> always,
                      TimestampRuleParams grammar, int finished, int max_finished,
                      BeamChainStart& start);

}  // namespace parley
