// Reference: openai/whisper whisper/decoding.py (SuppressBlank, SuppressTokens,
// ApplyTimestampRules, DecodingTask._get_suppress_tokens).
#include "whisper/logit_filters.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "engine/error.h"
#include "whisper/beam_search.h"
#include "whisper/sampling.h"
#include "whisper/tokenizer.h"

namespace parley {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Seconds per timestamp step: 30 s / n_audio_ctx (1500).
constexpr double kSecondsPerTimestamp = 30.0 / 1500.0;

void fill(std::span<float> logits, int64_t begin, int64_t end) {
  begin = std::clamp<int64_t>(begin, 0, int64_t(logits.size()));
  end = std::clamp<int64_t>(end, begin, int64_t(logits.size()));
  std::fill(logits.begin() + begin, logits.begin() + end, kNegInf);
}

}  // namespace

bool StepRule::add_range(int32_t begin, int32_t end) {
  if (begin >= end) return true;  // nothing to suppress
  if (n_ranges == kRuleRanges) return false;
  v[size_t(1 + 2 * n_ranges)] = begin;
  v[size_t(2 + 2 * n_ranges)] = end;
  ++n_ranges;
  return true;
}

SuppressBlank::SuppressBlank(const WhisperTokenizer& tokenizer, int sample_begin)
    : blank_(tokenizer.encode(" ")), sample_begin_(sample_begin) {
  blank_.push_back(tokenizer.eot());
}

void SuppressBlank::apply(std::span<float> logits, std::span<const int32_t> tokens) const {
  if (int64_t(tokens.size()) != sample_begin_) return;
  for (int32_t id : blank_) fill(logits, id, int64_t(id) + 1);
}

bool SuppressBlank::add_rule(std::span<const int32_t> tokens, StepRule& rule) const {
  if (int64_t(tokens.size()) != sample_begin_) return true;
  for (int32_t id : blank_)
    if (!rule.add_range(id, id + 1)) return false;
  return true;
}

void SuppressTokens::always_masked(std::vector<int32_t>& ids) const {
  ids.insert(ids.end(), ids_.begin(), ids_.end());
}

void SuppressTokens::apply(std::span<float> logits, std::span<const int32_t>) const {
  for (int32_t id : ids_) fill(logits, id, int64_t(id) + 1);
}

ApplyTimestampRules::ApplyTimestampRules(const WhisperTokenizer& tokenizer, int sample_begin,
                                         std::optional<int> max_initial_timestamp_index)
    : eot_(tokenizer.eot()),
      no_timestamps_(tokenizer.no_timestamps()),
      timestamp_begin_(tokenizer.timestamp_begin()),
      sample_begin_(sample_begin),
      max_initial_timestamp_index_(max_initial_timestamp_index) {}

void ApplyTimestampRules::apply(std::span<float> logits, std::span<const int32_t> tokens) const {
  fill(logits, no_timestamps_, int64_t(no_timestamps_) + 1);
  // The grammar's ranges at this position (add_rule below; from an empty row they always
  // fit), then the comparison that masked_topk's split rule makes on the device.
  StepRule rule;
  add_rule(tokens, rule);
  for (int r = 0; r < rule.n_ranges; ++r)
    fill(logits, rule.v[size_t(1 + 2 * r)], rule.v[size_t(2 + 2 * r)]);

  // Comparing log-probabilities (the reference takes log_softmax first) is comparing
  // logsumexp over the timestamps with the best text logit: the normalizer cancels.
  const size_t tb = std::min(logits.size(), size_t(timestamp_begin_));
  const double timestamp_lse = logsumexp(logits.subspan(tb));
  float max_text = kNegInf;
  for (size_t i = 0; i < tb; ++i) max_text = std::max(max_text, logits[i]);
  if (timestamp_lse > double(max_text)) fill(logits, 0, timestamp_begin_);
}

void ApplyTimestampRules::always_masked(std::vector<int32_t>& ids) const {
  ids.push_back(no_timestamps_);
}

// The grammar as ranges: <|notimestamps|> is in always_masked; the final comparison (the
// timestamps' logsumexp against the best text logit) is masked_topk's split rule, and
// apply() makes it on the host.
bool ApplyTimestampRules::add_rule(std::span<const int32_t> tokens, StepRule& rule) const {
  const auto sampled = tokens.subspan(std::min(tokens.size(), size_t(std::max(sample_begin_, 0))));
  const auto is_ts = [&](int32_t t) { return t >= timestamp_begin_; };
  const bool last_was_timestamp = !sampled.empty() && is_ts(sampled.back());
  const bool penultimate_was_timestamp = sampled.size() < 2 || is_ts(sampled[sampled.size() - 2]);
  constexpr int32_t kEnd = std::numeric_limits<int32_t>::max();  // clamped to n_vocab
  bool ok = true;
  // A closed pair: text next; an open timestamp: its closing one or <|endoftext|>.
  if (last_was_timestamp)
    ok &= penultimate_was_timestamp ? rule.add_range(timestamp_begin_, kEnd)
                                    : rule.add_range(0, eot_);
  // Timestamps never decrease; after a closed pair (or text) the next one must be strictly
  // later, so every segment has a nonzero length and the seek loop cannot stall.
  const auto last_ts = std::find_if(sampled.rbegin(), sampled.rend(), is_ts);
  if (last_ts != sampled.rend()) {
    const int32_t last = *last_ts;
    const int32_t limit = (last_was_timestamp && !penultimate_was_timestamp) ? last : last + 1;
    ok &= rule.add_range(timestamp_begin_, limit);
  }
  if (int64_t(tokens.size()) == sample_begin_) {
    ok &= rule.add_range(0, timestamp_begin_);  // the first sampled token is a timestamp
    if (max_initial_timestamp_index_)
      ok &= rule.add_range(timestamp_begin_ + *max_initial_timestamp_index_ + 1, kEnd);
  }
  rule.v[0] = timestamp_begin_;
  return ok;
}

std::vector<int32_t> resolve_suppress_tokens(const WhisperTokenizer& tokenizer,
                                             const std::string& spec) {
  std::vector<int64_t> ids;
  bool non_speech = false;
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    const bool rest_blank = item.find_first_not_of(" \t", used) == std::string::npos;
    check_arg(used > 0 && rest_blank,
              "[whisper] suppress_tokens: '" + item + "' is not an integer in '" + spec + "'");
    if (v == -1) {
      non_speech = true;
    } else if (v >= 0) {
      ids.push_back(v);
    }
  }
  // The reference keeps negative ids other than -1 only when -1 is absent, where they would
  // index from the end; we reject them instead.
  if (non_speech) {
    for (int32_t t : tokenizer.non_speech_tokens()) ids.push_back(t);
  }
  for (int32_t t : {tokenizer.transcribe(), tokenizer.translate(), tokenizer.sot(),
                    tokenizer.sot_prev(), tokenizer.sot_lm(), tokenizer.no_speech()}) {
    ids.push_back(t);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::vector<int32_t> out;
  for (int64_t v : ids) {
    check_arg(v < tokenizer.n_vocab(), "[whisper] suppress_tokens: id " + std::to_string(v) +
                                           " is outside the vocabulary of " +
                                           std::to_string(tokenizer.n_vocab()));
    out.push_back(int32_t(v));
  }
  return out;
}

std::vector<std::unique_ptr<LogitFilter>> make_logit_filters(const WhisperTokenizer& tokenizer,
                                                             const LogitFilterSettings& settings,
                                                             int sample_begin) {
  std::vector<std::unique_ptr<LogitFilter>> filters;
  if (settings.suppress_blank) {
    filters.push_back(std::make_unique<SuppressBlank>(tokenizer, sample_begin));
  }
  if (!settings.suppress_tokens.empty()) {
    filters.push_back(std::make_unique<SuppressTokens>(
        resolve_suppress_tokens(tokenizer, settings.suppress_tokens)));
  }
  if (!settings.without_timestamps) {
    std::optional<int> max_initial;
    if (settings.max_initial_timestamp != 0.0f) {
      // Python's round(): half to even, which nearbyint does in the default rounding mode.
      max_initial =
          int(std::nearbyint(double(settings.max_initial_timestamp) / kSecondsPerTimestamp));
    }
    filters.push_back(std::make_unique<ApplyTimestampRules>(tokenizer, sample_begin, max_initial));
  }
  return filters;
}

std::vector<int32_t> always_masked(std::span<const std::unique_ptr<LogitFilter>> filters) {
  std::vector<int32_t> ids;
  for (const auto& f : filters) f->always_masked(ids);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

bool step_rule(std::span<const std::unique_ptr<LogitFilter>> filters,
               std::span<const int32_t> tokens, StepRule& rule) {
  rule = StepRule{};
  for (const auto& f : filters)
    if (!f->add_rule(tokens, rule)) return false;
  return true;
}

bool step_rules(std::span<const std::unique_ptr<LogitFilter>> filters,
                std::span<const std::vector<int32_t>> sequences, std::vector<int32_t>& rules) {
  rules.clear();
  StepRule rule;
  for (const auto& seq : sequences) {
    if (!step_rule(filters, seq, rule)) return false;
    rules.insert(rules.end(), rule.v.begin(), rule.v.end());
  }
  return true;
}

std::array<int32_t, kTimestampRuleState> timestamp_rule_state(std::span<const int32_t> sampled,
                                                              bool timestamps,
                                                              int32_t timestamp_begin) {
  const auto last_ts = std::find_if(sampled.rbegin(), sampled.rend(),
                                    [&](int32_t t) { return t >= timestamp_begin; });
  return {int32_t(timestamps), sampled.empty() ? -1 : sampled.back(),
          last_ts == sampled.rend() ? -1 : *last_ts};
}

bool greedy_chain_start(std::span<const std::unique_ptr<LogitFilter>> filters,
                        std::span<const int32_t> tokens, int sample_begin, bool timestamps,
                        std::span<const int32_t> always, TimestampRuleParams grammar,
                        GreedyChainStart& start) {
  if (!step_rule(filters, tokens, start.rule)) return false;
  start.token = tokens.back();
  start.state = timestamp_rule_state(tokens.subspan(size_t(sample_begin)), timestamps,
                                     grammar.timestamp_begin);
  start.always = always;
  start.grammar = grammar;
  return true;
}

bool beam_chain_start(std::span<const std::unique_ptr<LogitFilter>> filters,
                      std::span<const std::vector<int32_t>> rows, std::span<const float> sums,
                      int sample_begin, bool timestamps, std::span<const int32_t> always,
                      TimestampRuleParams grammar, int finished, int max_finished,
                      BeamChainStart& start) {
  start = BeamChainStart{};
  for (const std::vector<int32_t>& seq : rows) {
    GreedyChainStart row;
    if (!greedy_chain_start(filters, seq, sample_begin, timestamps, always, grammar, row))
      return false;
    start.tokens.push_back(row.token);
    start.rules.insert(start.rules.end(), row.rule.v.begin(), row.rule.v.end());
    start.states.insert(start.states.end(), row.state.begin(), row.state.end());
  }
  start.sums.assign(sums.begin(), sums.end());
  start.finished = finished;
  start.max_finished = max_finished;
  start.always = always;
  start.grammar = grammar;
  return true;
}

}  // namespace parley
