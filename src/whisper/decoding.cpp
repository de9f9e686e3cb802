// Reference: openai/whisper whisper/decoding.py (DecodingTask, GreedyDecoder,
// BeamSearchDecoder, detect_language), whisper/utils.py (compression_ratio); hotwords:
// faster-whisper's WhisperModel.get_prompt (faster_whisper/transcribe.py).
#include "whisper/decoding.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string_view>

#include "engine/env.h"
#include "engine/error.h"
#include "engine/ops/reduce.h"
#include "whisper/beam_search.h"
#include "whisper/encoder.h"
#include "whisper/logit_filters.h"
#include "whisper/model.h"
#include "whisper/sampling.h"
#include "whisper/tokenizer.h"

namespace parley {
namespace {

std::span<const float> row_of(const Tensor& logits, int64_t i) {
  const int64_t n_vocab = logits.dim(1);
  return {logits.data<float>() + i * n_vocab, size_t(n_vocab)};
}

// Python's xs[-n:] for any integer n (n == 0 keeps everything, n < 0 drops -n from the front).
std::vector<int32_t> py_tail(const std::vector<int32_t>& xs, int64_t n) {
  const int64_t size = int64_t(xs.size());
  int64_t begin = 0;
  if (n > 0) begin = std::max<int64_t>(0, size - n);
  if (n < 0) begin = std::min<int64_t>(size, -n);
  return {xs.begin() + begin, xs.end()};
}

void check_options(const WhisperTokenizer& tokenizer, const DecodingOptions& o) {
  check_arg(o.task == "transcribe" || o.task == "translate",
            "[whisper] task must be 'transcribe' or 'translate', got '" + o.task + "'");
  check_arg(
      o.temperature >= 0.0f && std::isfinite(o.temperature),
      "[whisper] temperature must be a finite number >= 0, got " + std::to_string(o.temperature));
  check_arg(o.best_of >= 0, "[whisper] best_of must be >= 1 (or 0: not set)");
  check_arg(o.beam_size >= 0, "[whisper] beam_size must be >= 1 (or 0: not set)");
  // DecodingTask._verify_options.
  check_arg(o.beam_size == 0 || o.best_of == 0,
            "[whisper] beam_size and best_of can't be given together");
  check_arg(o.temperature > 0.0f || o.best_of == 0,
            "[whisper] best_of with greedy sampling (temperature 0) is not compatible");
  check_arg(!o.patience || o.beam_size > 0, "[whisper] patience requires beam_size to be given");
  check_arg(!o.patience || (*o.patience >= 0.0f && std::isfinite(*o.patience)),
            "[whisper] patience must be a finite number >= 0");
  check_arg(!o.length_penalty || (*o.length_penalty >= 0.0f && *o.length_penalty <= 1.0f),
            "[whisper] length_penalty (alpha) should be a value between 0 and 1");
  check_arg(o.sample_len >= 0, "[whisper] sample_len must be >= 0");
  for (const auto* ids : {&o.prompt, &o.prefix, &o.hotwords}) {
    for (int32_t t : *ids) {
      check_arg(t >= 0 && t < tokenizer.n_vocab(), "[whisper] prompt/prefix/hotwords token " +
                                                       std::to_string(t) + " is outside [0, " +
                                                       std::to_string(tokenizer.n_vocab()) + ")");
    }
  }
}

void check_logits(const Tensor& logits, int64_t rows, int64_t n_vocab) {
  if (logits.ndim() != 2 || logits.dim(0) != rows || logits.dim(1) != n_vocab) {
    throw Error(ErrorKind::internal, "[whisper] decoder returned logits " + logits.describe() +
                                         ", expected [" + std::to_string(rows) + ", " +
                                         std::to_string(n_vocab) + "]");
  }
}

// row - logsumexp(row) in f32 (F.log_softmax on the filtered logits).
void log_softmax(std::span<const float> row, std::vector<float>& out) {
  const double lse = logsumexp(row);
  out.resize(row.size());
  for (size_t i = 0; i < row.size(); ++i) out[i] = float(double(row[i]) - lse);
}

}  // namespace

void SessionLogitsSource::encode(const Tensor& mel) { session_.encode(mel); }
Tensor SessionLogitsSource::decode(std::span<const int32_t> tokens) {
  return session_.decode(tokens);
}
Tensor SessionLogitsSource::decode_selected(std::span<const int32_t> tokens,
                                            std::span<const int64_t> rows) {
  return session_.decode(tokens, rows);
}
void SessionLogitsSource::reset() { session_.reset(); }
void SessionLogitsSource::set_full_precision(bool on) { session_.set_full_precision(on); }
void SessionLogitsSource::fork(int n_rows) { session_.fork(n_rows); }
Tensor SessionLogitsSource::decode_rows(std::span<const int32_t> tokens) {
  return session_.decode_rows(tokens);
}
void SessionLogitsSource::reorder_rows(std::span<const int32_t> source) {
  session_.reorder_rows(source);
}

bool device_choice_enabled() {
  static const bool enabled = env_switch_on("PARLEY_DEVICE_CHOICE");
  return enabled;
}

bool SessionLogitsSource::chooses_on_device() const {
  return device_choice_enabled() && session_.model().device() != Device::cpu;
}

bool greedy_pipeline_enabled() {
  static const bool enabled = env_switch_on("PARLEY_GREEDY_PIPELINE");
  return enabled;
}

bool initial_choice_enabled() {
  static const bool enabled = env_switch_on("PARLEY_INITIAL_CHOICE");
  return enabled;
}

bool beam_pipeline_enabled() {
  static const bool enabled = env_switch_on("PARLEY_BEAM_PIPELINE");
  return enabled;
}

bool SessionLogitsSource::chains_greedy() const {
  // Not the virtual call: a source that only turns the device choice on (on the CPU, in
  // tests) keeps its steps one at a time.
  return greedy_pipeline_enabled() && SessionLogitsSource::chooses_on_device();
}

void SessionLogitsSource::chain_begin(const GreedyChainStart& start) {
  session_.chain_begin(start);
  chain_read_ = session_.n_cached();
}

void SessionLogitsSource::chain_begin_initial(std::span<const int32_t> tokens, int64_t sot_index,
                                              const GreedyChainStart& start) {
  session_.chain_begin_initial(tokens, sot_index, start);
  chain_read_ = session_.n_cached() - 1;  // the initial pass's choice is the first read
}

std::span<const float> SessionLogitsSource::chain_initial_logits() {
  return session_.chain_initial_logits();
}

void SessionLogitsSource::chain_launch() { session_.chain_launch(); }

std::pair<int32_t, float> SessionLogitsSource::chain_read() {
  return session_.chain_result(chain_read_++);
}

void SessionLogitsSource::chain_end() { session_.truncate(chain_read_); }

bool SessionLogitsSource::chains_beam() const {
  return beam_pipeline_enabled() && SessionLogitsSource::chooses_on_device();
}

void SessionLogitsSource::beam_chain_begin(const BeamChainStart& start) {
  session_.beam_chain_begin(start);
  chain_read_ = session_.n_cached();
}

void SessionLogitsSource::beam_chain_begin_initial(std::span<const int32_t> tokens,
                                                   int64_t sot_index, int n_rows,
                                                   const BeamChainStart& start) {
  session_.beam_chain_begin_initial(tokens, sot_index, n_rows, start);
  chain_read_ = session_.n_cached() - 1;  // the initial pass's step is the first read
}

std::span<const float> SessionLogitsSource::beam_chain_initial_logits() {
  return session_.beam_chain_initial_logits();
}

void SessionLogitsSource::beam_chain_launch() { session_.beam_chain_launch(); }

const BeamStepRecord& SessionLogitsSource::beam_chain_read() {
  return session_.beam_chain_result(chain_read_++);
}

void SessionLogitsSource::beam_chain_end() { session_.beam_chain_end(); }

namespace {
[[noreturn]] void no_greedy_chain() {
  throw Error(ErrorKind::unsupported, "[whisper] this logits source has no greedy chain");
}
}  // namespace

void LogitsSource::chain_begin(const GreedyChainStart&) { no_greedy_chain(); }
void LogitsSource::chain_begin_initial(std::span<const int32_t>, int64_t, const GreedyChainStart&) {
  no_greedy_chain();
}
std::span<const float> LogitsSource::chain_initial_logits() { no_greedy_chain(); }
void LogitsSource::chain_launch() { no_greedy_chain(); }
std::pair<int32_t, float> LogitsSource::chain_read() { no_greedy_chain(); }
void LogitsSource::chain_end() { no_greedy_chain(); }

namespace {
[[noreturn]] void no_beam_chain() {
  throw Error(ErrorKind::unsupported, "[whisper] this logits source has no beam chain");
}
}  // namespace

void LogitsSource::beam_chain_begin(const BeamChainStart&) { no_beam_chain(); }
void LogitsSource::beam_chain_begin_initial(std::span<const int32_t>, int64_t, int,
                                            const BeamChainStart&) {
  no_beam_chain();
}
std::span<const float> LogitsSource::beam_chain_initial_logits() { no_beam_chain(); }
void LogitsSource::beam_chain_launch() { no_beam_chain(); }
const BeamStepRecord& LogitsSource::beam_chain_read() { no_beam_chain(); }
void LogitsSource::beam_chain_end() { no_beam_chain(); }

void SessionLogitsSource::decode_choose(std::span<const int32_t> tokens,
                                        std::span<const int32_t> always,
                                        std::span<const int32_t> rules, int k,
                                        std::vector<int32_t>& ids, std::vector<float>& logprobs) {
  const WhisperSession::Choices& c = session_.decode_choose(tokens, always, rules, k);
  ids = c.ids;
  logprobs = c.logprobs;
}

Tensor SessionLogitsSource::decode_initial_choose(
    std::span<const int32_t> tokens, int64_t sot_index, std::span<const int32_t> always,
    std::span<const int32_t> rule, int k, std::vector<int32_t>& ids, std::vector<float>& logprobs) {
  Tensor at_sot;
  const WhisperSession::Choices& c =
      session_.decode_initial_choose(tokens, sot_index, always, rule, k, at_sot);
  ids = c.ids;
  logprobs = c.logprobs;
  return at_sot;
}

namespace {

// masked_topk on the CPU of each row of f32 logits [n, n_vocab] with `always` and `rules`
// (kRuleWidth per row): the top k of each row into ids and logprobs.
void choose_on_cpu(const Tensor& logits, std::span<const int32_t> always,
                   std::span<const int32_t> rules, int k, std::vector<int32_t>& ids,
                   std::vector<float>& logprobs) {
  const int64_t n = logits.dim(0);
  whisper::SuppressMask mask;
  Tensor rule_rows = Tensor::empty({n, kRuleWidth}, DType::i32);
  std::copy(rules.begin(), rules.end(), rule_rows.data<int32_t>());
  Tensor lp = Tensor::empty({n, k}, DType::f32), top = Tensor::empty({n, k}, DType::i32);
  masked_topk(logits, &mask.get(always, int(logits.dim(1)), Device::cpu), rule_rows, k, lp, top);
  whisper::read_choices(top, lp, ids, logprobs);
}

}  // namespace

void LogitsSource::decode_choose(std::span<const int32_t> tokens, std::span<const int32_t> always,
                                 std::span<const int32_t> rules, int k, std::vector<int32_t>& ids,
                                 std::vector<float>& logprobs) {
  const int64_t n = int64_t(tokens.size());
  check_arg(int64_t(rules.size()) == n * kRuleWidth,
            "[whisper] decode_choose: " + std::to_string(rules.size()) + " rule values for " +
                std::to_string(n) + " rows");
  const Tensor logits = n == 1 ? decode(tokens) : decode_rows(tokens);
  check_logits(logits, n, logits.dim(1));
  choose_on_cpu(logits, always, rules, k, ids, logprobs);
}

Tensor LogitsSource::decode_initial_choose(std::span<const int32_t> tokens, int64_t sot_index,
                                           std::span<const int32_t> always,
                                           std::span<const int32_t> rule, int k,
                                           std::vector<int32_t>& ids,
                                           std::vector<float>& logprobs) {
  check_arg(rule.size() == size_t(kRuleWidth),
            "[whisper] decode_initial_choose: " + std::to_string(rule.size()) + " rule values");
  const std::array<int64_t, 2> rows = {sot_index, int64_t(tokens.size()) - 1};
  const Tensor two = decode_selected(tokens, rows);
  check_logits(two, 2, two.dim(1));
  choose_on_cpu(two.slice0(1, 2), always, rule, k, ids, logprobs);
  return two.slice0(0, 1).reshape({two.dim(1)});
}

Tensor LogitsSource::decode_selected(std::span<const int32_t> tokens,
                                     std::span<const int64_t> rows) {
  const Tensor all = decode(tokens);
  check_logits(all, int64_t(tokens.size()), all.dim(1));
  Tensor out = Tensor::empty({int64_t(rows.size()), all.dim(1)}, DType::f32);
  for (size_t k = 0; k < rows.size(); ++k) {
    check_arg(rows[k] >= 0 && rows[k] < all.dim(0), "[whisper] decode_selected: row " +
                                                        std::to_string(rows[k]) + " outside [0, " +
                                                        std::to_string(all.dim(0)) + ")");
    const auto row = row_of(all, rows[k]);
    std::copy(row.begin(), row.end(), out.data<float>() + int64_t(k) * all.dim(1));
  }
  return out;
}

void LogitsSource::fork(int) {
  throw Error(ErrorKind::unsupported, "[whisper] this logits source has no batched decoding");
}
Tensor LogitsSource::decode_rows(std::span<const int32_t>) {
  throw Error(ErrorKind::unsupported, "[whisper] this logits source has no batched decoding");
}
void LogitsSource::reorder_rows(std::span<const int32_t>) {
  throw Error(ErrorKind::unsupported, "[whisper] this logits source has no batched decoding");
}
int SessionLogitsSource::n_text_ctx() const { return session_.model().config().n_text_ctx; }
int SessionLogitsSource::n_mels() const { return session_.model().config().n_mels; }
int64_t SessionLogitsSource::window_frames() const {
  return whisper_window_frames(session_.model());
}

std::vector<int32_t> initial_tokens(const WhisperTokenizer& tokenizer,
                                    const DecodingOptions& options,
                                    const std::optional<std::string>& language, int n_text_ctx) {
  std::vector<int32_t> tokens;
  const int budget = n_text_ctx / 2 - 1;  // 223
  std::vector<int32_t> hotwords;
  if (options.prefix.empty() && !options.hotwords.empty()) {
    const size_t n = std::min(options.hotwords.size(), size_t(std::max(budget / 2, 0)));
    hotwords.assign(options.hotwords.begin(), options.hotwords.begin() + int64_t(n));
  }
  if (!options.prompt.empty() || !hotwords.empty()) {
    tokens.push_back(tokenizer.sot_prev());
    tokens.insert(tokens.end(), hotwords.begin(), hotwords.end());
    if (!options.prompt.empty()) {
      const auto prompt = py_tail(options.prompt, budget - int64_t(hotwords.size()));
      tokens.insert(tokens.end(), prompt.begin(), prompt.end());
    }
  }
  const auto sot = tokenizer.sot_sequence(language, options.task);
  tokens.insert(tokens.end(), sot.begin(), sot.end());
  if (options.without_timestamps) tokens.push_back(tokenizer.no_timestamps());
  if (!options.prefix.empty()) {
    const int sample_len = options.sample_len > 0 ? options.sample_len : n_text_ctx / 2;
    const auto prefix = py_tail(options.prefix, n_text_ctx / 2 - sample_len);
    tokens.insert(tokens.end(), prefix.begin(), prefix.end());
  }
  return tokens;
}

LanguageDetection detect_language(LogitsSource& source, const WhisperTokenizer& tokenizer) {
  check(tokenizer.multilingual(), ErrorKind::unsupported,
        "[whisper] this model has no language tokens, so it cannot detect the language");
  source.reset();
  const int32_t sot = tokenizer.sot();
  const Tensor logits = source.decode(std::span<const int32_t>(&sot, 1));
  source.reset();
  const auto row = row_of(logits, 0);

  const auto codes = tokenizer.language_codes();
  std::vector<float> lang_logits;
  for (const auto& code : codes) lang_logits.push_back(row[size_t(tokenizer.language_token(code))]);
  const double lse = logsumexp(lang_logits);
  LanguageDetection out;
  // argmax: the first of equal maxima, as torch.argmax.
  const size_t best =
      size_t(std::max_element(lang_logits.begin(), lang_logits.end()) - lang_logits.begin());
  out.code = codes[best];
  for (size_t i = 0; i < codes.size(); ++i) {
    out.probs.emplace_back(codes[i], float(std::exp(double(lang_logits[i]) - lse)));
  }
  return out;
}

namespace {

// One candidate sequence per row, as the reference's tokens tensor [n_group, length].
struct Rows {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<float> sum_logprobs;  // f32, as the reference's sum_logprobs tensor
};

// GreedyDecoder.update for every row: argmax at T = 0, else a draw from
// softmax(logits / T); the score is the log-softmax of the unscaled logits; a row that has
// ended keeps getting <|endoftext|> and no score.
void greedy_update(Rows& rows, std::span<const std::vector<float>> logits, const DecodingOptions& o,
                   int32_t eot, int step) {
  for (size_t r = 0; r < rows.tokens.size(); ++r) {
    std::vector<int32_t>& seq = rows.tokens[r];
    if (seq.back() == eot) {
      seq.push_back(eot);
      continue;
    }
    const std::vector<float>& row = logits[r];
    const int32_t next =
        o.temperature == 0.0f
            ? argmax(row)
            : sample_token(row, o.temperature,
                           uniform_draw(o.seed, o.sampling_stream, r, uint64_t(step)));
    rows.sum_logprobs[r] += float(double(row[size_t(next)]) - logsumexp(row));
    seq.push_back(next);
  }
}

// The log-probability of each of `tokens` after `initial` under the filtered logits of its
// position: one decoder pass over initial + tokens (the last token's own output is not
// needed), then the filters applied to each row with the tokens before it, as during the
// search.
std::vector<float> score_tokens(LogitsSource& source,
                                std::span<const std::unique_ptr<LogitFilter>> filters,
                                const std::vector<int32_t>& initial,
                                const std::vector<int32_t>& tokens) {
  std::vector<float> out;
  if (tokens.empty()) return out;
  std::vector<int32_t> seq = initial;
  seq.insert(seq.end(), tokens.begin(), tokens.end() - 1);
  source.reset();
  const Tensor logits = source.decode(seq);
  source.reset();
  std::vector<int32_t> prefix = initial;
  std::vector<float> row;
  for (size_t k = 0; k < tokens.size(); ++k) {
    const auto r = row_of(logits, int64_t(initial.size() + k) - 1);
    row.assign(r.begin(), r.end());
    for (const auto& f : filters) f->apply(row, prefix);
    out.push_back(float(double(row[size_t(tokens[k])]) - logsumexp(row)));
    prefix.push_back(tokens[k]);
  }
  return out;
}

// What a window's search starts from: the initial tokens and the logit filters.
struct WindowPlan {
  std::vector<int32_t> initial;
  int sample_begin = 0;
  int sot_index = 0;
  int sample_len = 0;
  std::vector<std::unique_ptr<LogitFilter>> filters;
};

WindowPlan plan_window(const WhisperTokenizer& tokenizer, const DecodingOptions& options,
                       const std::string& language, int n_ctx) {
  WindowPlan p;
  p.sample_len = options.sample_len > 0 ? options.sample_len : n_ctx / 2;
  p.initial = initial_tokens(tokenizer, options, language, n_ctx);
  check_arg(int(p.initial.size()) < n_ctx, "[whisper] " + std::to_string(p.initial.size()) +
                                               " initial tokens leave no room in a context of " +
                                               std::to_string(n_ctx));
  p.sample_begin = int(p.initial.size());
  p.sot_index =
      int(std::find(p.initial.begin(), p.initial.end(), tokenizer.sot()) - p.initial.begin());
  LogitFilterSettings fs;
  fs.suppress_blank = options.suppress_blank;
  fs.suppress_tokens = options.suppress_tokens;
  fs.without_timestamps = options.without_timestamps;
  fs.max_initial_timestamp = options.max_initial_timestamp;
  p.filters = make_logit_filters(tokenizer, fs, p.sample_begin);
  return p;
}

// P(<|nospeech|>) at the <|startoftranscript|> position of the initial tokens' logits.
float no_speech_prob_at(std::span<const float> at_sot, const WhisperTokenizer& tokenizer) {
  return float(std::exp(double(at_sot[size_t(tokenizer.no_speech())]) - logsumexp(at_sot)));
}

float no_speech_prob_of(const Tensor& logits, int sot_index, const WhisperTokenizer& tokenizer) {
  return no_speech_prob_at(row_of(logits, sot_index), tokenizer);
}

// The loop of a chain begun at step `first` (greedy or beam, below): steps [first, end) are
// launched kDepth ahead of the one being read (cancellation polled before each launch); at
// step 0 (the initial pass was the chain's first step) the no-speech probability comes from
// initial_logits(), before the step's result; read() takes the step's result and returns true
// to stop. end() runs however the loop ends.
struct ChainLoop {
  std::function<void()> launch;
  std::function<std::span<const float>()> initial_logits;
  std::function<bool()> read;
  std::function<void()> end;
};

void run_chain_loop(const ChainLoop& chain, const WhisperTokenizer& tokenizer,
                    const DecodingOptions& options, int first, int end, DecodingResult& result) {
  constexpr int kDepth = 2;  // steps in flight: the one being read and the one behind it
  try {
    int launched = first == 0 ? 1 : first;
    for (int i = first; i < end; ++i) {
      for (; launched < std::min(end, i + kDepth); ++launched) {
        check(!options.cancelled || !options.cancelled(), ErrorKind::cancelled,
              "[whisper] decoding cancelled");
        chain.launch();
      }
      if (i == 0) {  // as decode_encoded's initial pass, before the first token
        result.no_speech_prob = no_speech_prob_at(chain.initial_logits(), tokenizer);
        if (options.on_no_speech_prob) options.on_no_speech_prob(result.no_speech_prob);
      }
      if (chain.read()) break;
    }
  } catch (...) {
    chain.end();
    throw;
  }
  chain.end();
}

// decode_encoded's greedy steps `first`, first + 1, ... of one sequence, chained on the
// source's device (LogitsSource::chain_begin): step i + 1 is queued before step i's token is
// read, so the device does not wait for the host between steps; a step queued after the
// sequence ended is dropped. The same tokens, scores, no-speech probability, streaming and
// stopping rules as the step-by-step loop. first == 0: rows.tokens[0] holds the initial
// tokens only, and their pass is the chain's first step (chain_begin_initial); else it holds
// the tokens of steps before `first`. False, having done nothing, where the filters have no
// rule form after the sequence so far.
bool chain_greedy_steps(LogitsSource& source, const WhisperTokenizer& tokenizer,
                        const DecodingOptions& options, const WindowPlan& plan,
                        std::span<const int32_t> always, int n_ctx, int first, bool stream,
                        Rows& rows, DecodingResult& result) {
  std::vector<int32_t>& tokens = rows.tokens[0];
  GreedyChainStart start;
  if (!greedy_chain_start(plan.filters, tokens, plan.sample_begin, !options.without_timestamps,
                          always, {tokenizer.eot(), tokenizer.timestamp_begin()}, start))
    return false;
  // The loop's limits: step i decodes at offset sample_begin + i - 1, which must fit in the
  // context (it stops once the sequence is longer than n_ctx).
  const int end = std::min(plan.sample_len, n_ctx - plan.sample_begin + 1);
  // From step 0 the initial pass is the chain's first step (queued here, not read).
  if (first == 0)
    source.chain_begin_initial(tokens, plan.sot_index, start);
  else
    source.chain_begin(start);
  run_chain_loop({[&] { source.chain_launch(); }, [&] { return source.chain_initial_logits(); },
                  [&] {
                    const auto [id, logprob] = source.chain_read();
                    // GreedyDecoder.update with the choice made next to the logits, as
                    // decode_encoded.
                    tokens.push_back(id);
                    rows.sum_logprobs[0] += logprob;
                    if (stream) options.on_token(id);
                    return id == tokenizer.eot();
                  },
                  [&] { source.chain_end(); }},
                 tokenizer, options, first, end, result);
  return true;
}

// Beam search's steps from `first` chained on the source's device
// (LogitsSource::chains_beam): step t + 1 is queued before step t's record is read and applied
// to rows and beams, as BeamSearch::update would have made it. first = 0: the chain begins at
// the window's initial pass (the search's first step on the device too, the no-speech
// probability read from it); first = 1: after the host's first step (rows forked). False
// (nothing done) where the filters have no rule form after some row; then the steps go one
// at a time.
bool chain_beam_steps(LogitsSource& source, const WhisperTokenizer& tokenizer,
                      const DecodingOptions& options, const WindowPlan& plan,
                      std::span<const int32_t> always, int n_ctx, int first, Rows& rows,
                      BeamSearch& beams, DecodingResult& result) {
  const int end = std::min(plan.sample_len, n_ctx - plan.sample_begin + 1);
  if (first >= end) return false;
  // From the initial pass the start is one row: the rows are one sequence until then.
  const size_t n_start = first == 0 ? 1 : rows.tokens.size();
  BeamChainStart start;
  if (!beam_chain_start(plan.filters, std::span(rows.tokens).first(n_start),
                        std::span(rows.sum_logprobs).first(n_start), plan.sample_begin,
                        !options.without_timestamps, always,
                        {tokenizer.eot(), tokenizer.timestamp_begin()}, beams.n_finished(),
                        beams.max_candidates(), start))
    return false;
  if (first == 0)
    source.beam_chain_begin_initial(rows.tokens[0], plan.sot_index, beams.beam_size(), start);
  else
    source.beam_chain_begin(start);
  run_chain_loop(
      {[&] { source.beam_chain_launch(); }, [&] { return source.beam_chain_initial_logits(); },
       [&] {
         return beams.apply(rows.tokens, source.beam_chain_read(), rows.sum_logprobs).completed;
       },
       [&] { source.beam_chain_end(); }},
      tokenizer, options, first, end, result);
  return true;
}

// Cuts each candidate at its first <|endoftext|>, ranks them (MaximumLikelihoodRanker) and
// fills tokens, text, avg_logprob and compression_ratio of the best.
void finalize(DecodingResult& result, const WhisperTokenizer& tokenizer,
              const DecodingOptions& options, std::vector<BeamCandidate> cands, int sample_begin) {
  const int32_t eot = tokenizer.eot();
  std::vector<size_t> lengths;
  std::vector<float> sums;
  for (auto& c : cands) {
    const auto end = std::find(c.tokens.begin() + sample_begin, c.tokens.end(), eot);
    c.tokens = std::vector<int32_t>(c.tokens.begin() + sample_begin, end);
    lengths.push_back(c.tokens.size());
    sums.push_back(c.sum_logprob);
  }
  const size_t best = rank_candidates(lengths, sums, options.length_penalty);
  result.tokens = std::move(cands[best].tokens);
  result.text = py_strip(reference_decode(tokenizer, result.tokens));
  result.avg_logprob = float(double(sums[best]) / double(result.tokens.size() + 1));
  result.compression_ratio = compression_ratio(result.text);
}

}  // namespace

struct WindowSearch::State {
  State(const WhisperTokenizer& t, const DecodingOptions& o, int n)
      : tokenizer(t), options(o), n_ctx(n) {}
  const WhisperTokenizer& tokenizer;
  DecodingOptions options;
  int n_ctx = 0;
  WindowPlan plan;
  Rows rows;
  std::vector<float> logits;
  std::vector<int32_t> always;  // the filters' ids suppressed at every position
  int step = 0;
  bool done = false;
  DecodingResult result;

  // After the step's token joined rows: streaming, the stopping rules, the result.
  void after_token() {
    const int32_t eot = tokenizer.eot();
    if (options.on_token) options.on_token(rows.tokens[0].back());
    const bool completed = rows.tokens[0].back() == eot;
    ++step;
    if (completed || int(rows.tokens[0].size()) > n_ctx || step >= plan.sample_len) {
      done = true;
      std::vector<BeamCandidate> cands{{rows.tokens[0], rows.sum_logprobs[0]}};
      cands[0].tokens.push_back(eot);  // GreedyDecoder.finalize pads with one
      finalize(result, tokenizer, options, std::move(cands), plan.sample_begin);
    }
  }
};

WindowSearch::WindowSearch(const WhisperTokenizer& tokenizer, const DecodingOptions& options,
                           int n_text_ctx) {
  check_options(tokenizer, options);
  check_arg(options.language.has_value(), "[whisper] WindowSearch: the language must be set");
  check_arg(options.beam_size == 0 && options.best_of <= 1,
            "[whisper] WindowSearch: one candidate only (no beam_size, best_of <= 1)");
  s_ = std::make_unique<State>(tokenizer, options, n_text_ctx);
  s_->plan = plan_window(tokenizer, options, *options.language, n_text_ctx);
  s_->always = parley::always_masked(s_->plan.filters);
  s_->rows = Rows{{s_->plan.initial}, {0.0f}};
  s_->result.temperature = options.temperature;
  s_->result.language = *options.language;
}

WindowSearch::~WindowSearch() = default;
WindowSearch::WindowSearch(WindowSearch&&) noexcept = default;
WindowSearch& WindowSearch::operator=(WindowSearch&&) noexcept = default;

const std::vector<int32_t>& WindowSearch::initial_tokens() const { return s_->plan.initial; }

void WindowSearch::first(const Tensor& logits) {
  check_logits(logits, int64_t(s_->plan.initial.size()), s_->tokenizer.n_vocab());
  first(row_of(logits, s_->plan.sot_index), row_of(logits, logits.dim(0) - 1));
}

void WindowSearch::first(std::span<const float> at_sot, std::span<const float> last) {
  check_arg(s_->step == 0 && !s_->done, "[whisper] WindowSearch::first: already started");
  check_arg(int64_t(at_sot.size()) == s_->tokenizer.n_vocab(),
            "[whisper] WindowSearch::first: " + std::to_string(at_sot.size()) +
                " logits, expected " + std::to_string(s_->tokenizer.n_vocab()));
  s_->result.no_speech_prob = no_speech_prob_at(at_sot, s_->tokenizer);
  if (s_->options.on_no_speech_prob) s_->options.on_no_speech_prob(s_->result.no_speech_prob);
  next(last);
}

int WindowSearch::sot_index() const { return s_->plan.sot_index; }

void WindowSearch::next(std::span<const float> logits) {
  State& s = *s_;
  check_arg(!s.done, "[whisper] WindowSearch::next: the search has ended");
  check_arg(int64_t(logits.size()) == s.tokenizer.n_vocab(),
            "[whisper] WindowSearch::next: " + std::to_string(logits.size()) +
                " logits, expected " + std::to_string(s.tokenizer.n_vocab()));
  // The body of decode_encoded's loop for one candidate.
  s.logits.assign(logits.begin(), logits.end());
  for (const auto& f : s.plan.filters) f->apply(s.logits, s.rows.tokens[0]);
  greedy_update(s.rows, std::span<const std::vector<float>>(&s.logits, 1), s.options,
                s.tokenizer.eot(), s.step);
  s.after_token();
}

bool WindowSearch::next_rule(StepRule& rule) const {
  check_arg(!s_->done, "[whisper] WindowSearch::next_rule: the search has ended");
  return s_->options.temperature == 0.0f && step_rule(s_->plan.filters, s_->rows.tokens[0], rule);
}

const std::vector<int32_t>& WindowSearch::always_masked() const { return s_->always; }

void WindowSearch::next_chosen(int32_t token, float logprob) {
  State& s = *s_;
  check_arg(!s.done, "[whisper] WindowSearch::next_chosen: the search has ended");
  check_arg(token >= 0 && token < s.tokenizer.n_vocab(),
            "[whisper] WindowSearch::next_chosen: token " + std::to_string(token) +
                " outside the vocabulary");
  // GreedyDecoder.update with the choice made elsewhere (one row, not ended).
  s.rows.tokens[0].push_back(token);
  s.rows.sum_logprobs[0] += logprob;
  s.after_token();
}

bool WindowSearch::done() const { return s_->done; }
int32_t WindowSearch::last_token() const { return s_->rows.tokens[0].back(); }
const DecodingResult& WindowSearch::result() const {
  check_arg(s_->done, "[whisper] WindowSearch::result: the search has not ended");
  return s_->result;
}

DecodingResult decode_encoded(LogitsSource& source, const WhisperTokenizer& tokenizer,
                              const DecodingOptions& options) {
  check_options(tokenizer, options);
  const int n_ctx = source.n_text_ctx();
  const int32_t eot = tokenizer.eot();
  const int64_t n_vocab = tokenizer.n_vocab();
  const bool beam = options.beam_size > 0;
  const int n_group = beam ? options.beam_size : std::max(options.best_of, 1);

  DecodingResult result;
  result.temperature = options.temperature;
  std::optional<std::string> language = options.language;
  if (!language && !tokenizer.multilingual()) language = "en";
  if (!language) language = detect_language(source, tokenizer).code;
  result.language = *language;

  WindowPlan plan = plan_window(tokenizer, options, *language, n_ctx);
  const std::vector<int32_t>& initial = plan.initial;
  const int sample_begin = plan.sample_begin;
  const int sample_len = plan.sample_len;
  const auto& filters = plan.filters;

  std::optional<BeamSearch> beams;
  if (beam) beams.emplace(options.beam_size, eot, options.patience);
  Rows rows{std::vector<std::vector<int32_t>>(size_t(n_group), initial),
            std::vector<float>(size_t(n_group), 0.0f)};
  // Stream tokens as they are chosen only when there is one candidate.
  const bool stream = options.on_token && n_group == 1 && !beam;

  source.reset();
  source.set_full_precision(options.temperature > 0.0f);
  std::vector<std::vector<float>> logits(static_cast<size_t>(n_group));
  std::vector<std::vector<float>> logprobs(beam ? size_t(n_group) : 0);
  std::vector<int32_t> last(static_cast<size_t>(n_group));
  // Steps after the first may make the choice on the source's device (greedy and beam
  // search; sampling draws on the host): the filters go there as masked_topk's inputs.
  const bool on_device =
      source.chooses_on_device() && (beam || (n_group == 1 && options.temperature == 0.0f));
  const std::vector<int32_t> always = on_device ? always_masked(filters) : std::vector<int32_t>{};
  const int top_k = beam ? options.beam_size + 1 : 1;
  std::vector<int32_t> rules, chosen_ids;
  std::vector<float> chosen_logprobs;
  // Greedy steps after the first may run as a chain on the source's device.
  const bool chained = on_device && !beam && source.chains_greedy() && options.temperature == 0.0f;
  // Beam steps after the first may run as a chain on the source's device.
  // (Beam size 1 has no rows: fork() makes them from 2 on.)
  const bool beam_chained = on_device && beam && options.beam_size >= 2 &&
                            options.beam_size <= kBeamChainMaxRows && source.chains_beam();
  for (int i = 0; i < sample_len; ++i) {
    if (i == 1 && beam_chained &&
        chain_beam_steps(source, tokenizer, options, plan, always, n_ctx, i, rows, *beams, result))
      break;
    if (i == 1 && chained &&
        chain_greedy_steps(source, tokenizer, options, plan, always, n_ctx, i, stream, rows,
                           result))
      break;
    check(!options.cancelled || !options.cancelled(), ErrorKind::cancelled,
          "[whisper] decoding cancelled");
    bool chosen = false;  // the step's choice came from decode_choose
    if (i == 0) {
      // The initial tokens are the same for every row: one pass, then the rows share them.
      // Two rows of it are read: no_speech_prob at <|startoftranscript|>, the first token.
      // On the device (where the filters have a rule form at the first sampled position)
      // that token's choice is made there, from the pass itself when greedy steps chain.
      StepRule first_rule;
      chosen = on_device && initial_choice_enabled() && step_rule(filters, initial, first_rule);
      if (chosen && chained &&
          chain_greedy_steps(source, tokenizer, options, plan, always, n_ctx, 0, stream, rows,
                             result))
        break;
      if (chosen && beam_chained &&
          chain_beam_steps(source, tokenizer, options, plan, always, n_ctx, 0, rows, *beams,
                           result))
        break;
      if (chosen) {
        const Tensor at_sot =
            source
                .decode_initial_choose(initial, plan.sot_index, always, first_rule.v, top_k,
                                       chosen_ids, chosen_logprobs)
                .reshape({1, n_vocab});
        check_logits(at_sot, 1, n_vocab);
        result.no_speech_prob = no_speech_prob_of(at_sot, 0, tokenizer);
        // Every row starts from the same choices (row 0's, copied to the others).
        chosen_ids.resize(size_t(n_group * top_k));
        chosen_logprobs.resize(size_t(n_group * top_k));
        for (int r = 1; r < n_group; ++r) {
          std::copy_n(chosen_ids.begin(), top_k, chosen_ids.begin() + r * top_k);
          std::copy_n(chosen_logprobs.begin(), top_k, chosen_logprobs.begin() + r * top_k);
        }
      } else {
        const std::array<int64_t, 2> wanted = {plan.sot_index, int64_t(initial.size()) - 1};
        const Tensor out = source.decode_selected(initial, wanted);
        check_logits(out, 2, n_vocab);
        result.no_speech_prob = no_speech_prob_of(out, 0, tokenizer);
        const auto row = row_of(out, 1);
        for (auto& l : logits) l.assign(row.begin(), row.end());
      }
      if (options.on_no_speech_prob) options.on_no_speech_prob(result.no_speech_prob);
      if (n_group > 1) source.fork(n_group);
    } else {
      for (size_t r = 0; r < size_t(n_group); ++r) last[r] = rows.tokens[r].back();
      chosen = on_device && step_rules(filters, rows.tokens, rules);
      if (chosen) {
        source.decode_choose(last, always, rules, top_k, chosen_ids, chosen_logprobs);
      } else {
        const Tensor out = n_group == 1 ? source.decode(std::span<const int32_t>(last.data(), 1))
                                        : source.decode_rows(last);
        check_logits(out, n_group, n_vocab);
        for (size_t r = 0; r < size_t(n_group); ++r) {
          const auto row = row_of(out, int64_t(r));
          logits[r].assign(row.begin(), row.end());
        }
      }
    }
    if (!chosen) {
      for (size_t r = 0; r < size_t(n_group); ++r) {
        for (const auto& f : filters) f->apply(logits[r], rows.tokens[r]);
      }
    }

    bool completed = false;
    if (beam) {
      BeamSearch::Step step;
      if (chosen) {
        step = beams->update(rows.tokens, chosen_ids, chosen_logprobs, top_k, rows.sum_logprobs);
      } else {
        for (size_t r = 0; r < size_t(n_group); ++r) log_softmax(logits[r], logprobs[r]);
        step = beams->update(rows.tokens, logprobs, rows.sum_logprobs);
      }
      bool identity = true;
      for (size_t r = 0; r < step.source.size(); ++r) identity &= step.source[r] == int32_t(r);
      if (!identity) source.reorder_rows(step.source);
      completed = step.completed;
    } else {
      if (chosen) {
        // GreedyDecoder.update with the choice made next to the logits (one row, not ended),
        // as WindowSearch::next_chosen.
        rows.tokens[0].push_back(chosen_ids[0]);
        rows.sum_logprobs[0] += chosen_logprobs[0];
      } else {
        greedy_update(rows, logits, options, eot, i);
      }
      if (stream) options.on_token(rows.tokens[0].back());
      completed = std::all_of(rows.tokens.begin(), rows.tokens.end(),
                              [&](const auto& t) { return t.back() == eot; });
    }
    if (completed || int(rows.tokens[0].size()) > n_ctx) break;
  }
  source.reset();

  // finalize, cut each candidate at its first <|endoftext|>, rank.
  std::vector<BeamCandidate> cands;
  if (beam) {
    cands = beams->finalize(rows.tokens, rows.sum_logprobs);
  } else {
    for (size_t r = 0; r < rows.tokens.size(); ++r) {
      cands.push_back({rows.tokens[r], rows.sum_logprobs[r]});
      cands.back().tokens.push_back(eot);  // GreedyDecoder.finalize pads with one
    }
  }
  finalize(result, tokenizer, options, std::move(cands), sample_begin);
  if (options.token_logprobs) {
    result.token_logprobs = score_tokens(source, filters, initial, result.tokens);
  }
  if (options.on_token && !stream) {
    for (int32_t t : result.tokens) options.on_token(t);
    options.on_token(eot);
  }
  return result;
}

DecodingResult decode_window(LogitsSource& source, const WhisperTokenizer& tokenizer,
                             const Tensor& mel_window, const DecodingOptions& options) {
  source.encode(mel_window);
  return decode_encoded(source, tokenizer, options);
}

DecodingResult decode_window(WhisperSession& session, const WhisperTokenizer& tokenizer,
                             const Tensor& mel_window, const DecodingOptions& options) {
  SessionLogitsSource source(session);
  return decode_window(source, tokenizer, mel_window, options);
}

std::string reference_decode(const WhisperTokenizer& tokenizer, std::span<const int32_t> ids) {
  std::string bytes;
  size_t run = 0;  // start of the current run of plain BPE ids
  for (size_t i = 0; i <= ids.size(); ++i) {
    if (i < ids.size() && ids[i] < tokenizer.eot()) continue;
    bytes += tokenizer.decode(ids.subspan(run, i - run));
    if (i < ids.size() && ids[i] < tokenizer.timestamp_begin()) {
      bytes += tokenizer.token_bytes(ids[i]);
    }
    run = i + 1;
  }
  return utf8_replace_invalid(bytes);
}

float compression_ratio(std::string_view text) {
  // Python's zlib.compress(data) is compress2 at Z_DEFAULT_COMPRESSION (windowBits 15,
  // memLevel 8), so the size matches the reference for the same zlib.
  uLongf size = compressBound(uLong(text.size()));
  std::vector<Bytef> out(size);
  const int rc = compress2(out.data(), &size, reinterpret_cast<const Bytef*>(text.data()),
                           uLong(text.size()), Z_DEFAULT_COMPRESSION);
  check(rc == Z_OK, ErrorKind::internal, "[whisper] zlib compress2 failed: " + std::to_string(rc));
  return float(double(text.size()) / double(size));
}

std::string utf8_replace_invalid(std::string_view s) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto c = uint8_t(s[i]);
    int need = 0;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c < 0x80) {
      out += char(c);
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      need = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      need = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      out += kReplacement;  // 0x80..0xC1, 0xF5..0xFF never start a character
      ++i;
      continue;
    }
    size_t j = i + 1;
    int got = 0;
    while (got < need && j < s.size()) {
      const auto b = uint8_t(s[j]);
      const bool ok = got == 0 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
      if (!ok) break;
      ++j;
      ++got;
    }
    if (got == need) {
      out.append(s.substr(i, j - i));
    } else {
      out += kReplacement;  // the maximal invalid prefix is one replacement
    }
    i = j;
  }
  return out;
}

namespace {
// Length of the whitespace character (Python str.isspace) at the start of s, or 0.
size_t space_at_front(std::string_view s) {
  if (s.empty()) return 0;
  const auto c = uint8_t(s[0]);
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return 1;
  static constexpr std::string_view kMultiByte[] = {
      "\xC2\x85",     "\xC2\xA0",     "\xE1\x9A\x80", "\xE2\x80\x80", "\xE2\x80\x81",
      "\xE2\x80\x82", "\xE2\x80\x83", "\xE2\x80\x84", "\xE2\x80\x85", "\xE2\x80\x86",
      "\xE2\x80\x87", "\xE2\x80\x88", "\xE2\x80\x89", "\xE2\x80\x8A", "\xE2\x80\xA8",
      "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80"};
  for (auto ws : kMultiByte) {
    if (s.starts_with(ws)) return ws.size();
  }
  return 0;
}
size_t space_at_back(std::string_view s) {
  for (size_t n = 1; n <= 3 && n <= s.size(); ++n) {
    const auto tail = s.substr(s.size() - n);
    if (space_at_front(tail) == n) return n;
  }
  return 0;
}
}  // namespace

std::string py_strip(std::string_view text) {
  while (const size_t n = space_at_front(text)) text.remove_prefix(n);
  while (const size_t n = space_at_back(text)) text.remove_suffix(n);
  return std::string(text);
}

}  // namespace parley
