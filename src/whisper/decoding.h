// Decoding one 30 s window the way openai/whisper's DecodingTask does (whisper/decoding.py):
// initial tokens (prompt, hotwords, sot sequence, prefix), no_speech_prob at the
// <|startoftranscript|> position, the logit filters (logit_filters.h), then greedy (T = 0),
// sampling (T > 0, best_of candidates, sampling.h) or beam search (beam_size, patience,
// beam_search.h), candidates ranked by MaximumLikelihoodRanker (length_penalty);
// avg_logprob and compression_ratio; and language detection.
//
// The decoder is reached through LogitsSource so tests can script logits; a WhisperSession
// is adapted by SessionLogitsSource. Several candidates (beams, best_of samples) are decoded
// as one batch: one decoder call per step for all of them (LogitsSource::decode_rows).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
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
struct StepRule;          // logit_filters.h
struct GreedyChainStart;  // logit_filters.h
struct BeamChainStart;    // beam_search.h
struct BeamStepRecord;    // beam_search.h

// Whether device sessions make the token choice next to the logits (masked_topk on the
// device; PARLEY_DEVICE_CHOICE=0 turns it off, to compare with the host filters).
bool device_choice_enabled();
// Whether greedy windows on device sessions chain their steps on the device, the host reading
// each token one step behind (LogitsSource::chains_greedy; PARLEY_GREEDY_PIPELINE=0 turns it
// off, to compare with one step at a time).
bool greedy_pipeline_enabled();
// Whether device sessions choose a window's first token on the device too (the initial pass
// with decode_initial_choose, or as the greedy chain's first step; PARLEY_INITIAL_CHOICE=0
// turns it off: the initial pass's two rows of logits then go to the host filters).
bool initial_choice_enabled();
// Whether beam search on device sessions chains its steps after the first on the device, the
// host reading each step's record one step behind (LogitsSource::chains_beam;
// PARLEY_BEAM_PIPELINE=0 turns it off, to compare with one step at a time).
bool beam_pipeline_enabled();
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
  // decode() returning only the logits of `rows` (indices into tokens, in order), f32
  // [rows.size(), n_vocab] on the CPU: a window's initial pass reads two rows. Default:
  // decode() and a copy of those rows.
  virtual Tensor decode_selected(std::span<const int32_t> tokens, std::span<const int64_t> rows);
  // Drops cached tokens, keeps the encoded audio.
  virtual void reset() = 0;
  // The decoding about to run samples at a temperature (true) or chooses greedily or by
  // beam search (false): with int8 weights (LoadOptions::int8) it then runs on the f32
  // weights, or the q8_0 ones. Default: nothing to do.
  virtual void set_full_precision(bool) {}
  // Batched decoding (beam search, best_of). fork(n) after decode() of the initial tokens
  // makes n rows that share the cached positions; decode_rows gives one token per row, all
  // at the next position, and returns f32 [n, n_vocab] on the CPU; reorder_rows makes row
  // i continue former row source[i]. The defaults throw Error(unsupported).
  virtual void fork(int n_rows);
  virtual Tensor decode_rows(std::span<const int32_t> tokens);
  virtual void reorder_rows(std::span<const int32_t> source);
  // The token choice next to the logits (WhisperSession::decode_choose): true where the
  // source makes it on its device (CUDA sessions; PARLEY_DEVICE_CHOICE=0 turns it off).
  // decode_encoded's greedy steps (temperature 0) and beam steps then call decode_choose
  // instead of decode / decode_rows + the host filters; their tokens are the same.
  virtual bool chooses_on_device() const { return false; }
  // One step with the choice: `tokens` one per row (a single token continues decode(),
  // several continue decode_rows() after fork()), then the engine's masked_topk of each row's
  // logits with `always` (ids suppressed at every position) and `rules` (kRuleWidth per row,
  // logit_filters.h); ids and logprobs get the top k of each row, [rows * k]. Default:
  // decode() / decode_rows(), then masked_topk on the CPU.
  virtual void decode_choose(std::span<const int32_t> tokens, std::span<const int32_t> always,
                             std::span<const int32_t> rules, int k, std::vector<int32_t>& ids,
                             std::vector<float>& logprobs);
  // A window's initial pass with the choice (WhisperSession::decode_initial_choose):
  // decode() of the initial `tokens`, the top k of the last position's logits under `always`
  // and `rule` (the first sampled position's rule row) into ids and logprobs, and position
  // sot_index's logits returned (f32 [n_vocab] on the CPU, for the no-speech probability).
  // Default: decode_selected(), then masked_topk on the CPU.
  virtual Tensor decode_initial_choose(std::span<const int32_t> tokens, int64_t sot_index,
                                       std::span<const int32_t> always,
                                       std::span<const int32_t> rule, int k,
                                       std::vector<int32_t>& ids, std::vector<float>& logprobs);
  // Greedy steps chained on the source's device (WhisperSession::chain_begin): true where the
  // source runs them (CUDA sessions, unless PARLEY_GREEDY_PIPELINE=0 or
  // PARLEY_DEVICE_CHOICE=0). decode_encoded's greedy windows (temperature 0, one sequence)
  // then queue step t + 1 before they read step t's token; the tokens, scores and callbacks
  // are the same. chain_begin starts a chain after the cached tokens; chain_launch queues its
  // next step (one token, masked_topk with k = 1, the next rule row on the device) without
  // waiting; chain_read returns the id and log-probability of the oldest step launched and not
  // yet read, waiting for that step only; chain_end drops the steps launched and not read (the
  // cache ends after the last one read). chain_begin_initial starts the chain at a window's
  // initial pass instead (WhisperSession::chain_begin_initial): the first chain_read is the
  // first sampled token, and chain_initial_logits() position sot_index's logits (f32
  // [n_vocab], for the no-speech probability), waiting for that pass only. The defaults
  // throw Error(unsupported).
  virtual bool chains_greedy() const { return false; }
  virtual void chain_begin(const GreedyChainStart& start);
  virtual void chain_begin_initial(std::span<const int32_t> tokens, int64_t sot_index,
                                   const GreedyChainStart& start);
  virtual std::span<const float> chain_initial_logits();
  virtual void chain_launch();
  virtual std::pair<int32_t, float> chain_read();
  virtual void chain_end();
  // Beam search chained on the source's device (WhisperSession::beam_chain_begin_initial):
  // true where the source runs it (CUDA sessions, unless PARLEY_BEAM_PIPELINE=0 or
  // PARLEY_DEVICE_CHOICE=0). decode_encoded's beam search (2 <= beam_size <=
  // kBeamChainMaxRows) then runs as a chain on the device: the device ranks the candidates
  // and moves the rows, the host follows each step from its record (BeamSearch::apply) one
  // step behind; the result is the same. beam_chain_begin_initial starts it at a window's
  // initial pass (the pass, the fork and the search's first step on the device: the first
  // beam_chain_read is that step, and beam_chain_initial_logits() position sot_index's logits,
  // f32 [n_vocab] for the no-speech probability, waiting for that pass only);
  // beam_chain_begin starts it after the cached tokens with the rows forked (with
  // PARLEY_INITIAL_CHOICE=0: after the host's first step). beam_chain_launch queues the next
  // step; beam_chain_read returns the record of the oldest step launched and not yet read,
  // waiting for that step only; beam_chain_end ends the chain and the rows. The defaults
  // throw Error(unsupported).
  virtual bool chains_beam() const { return false; }
  virtual void beam_chain_begin(const BeamChainStart& start);
  virtual void beam_chain_begin_initial(std::span<const int32_t> tokens, int64_t sot_index,
                                        int n_rows, const BeamChainStart& start);
  virtual std::span<const float> beam_chain_initial_logits();
  virtual void beam_chain_launch();
  virtual const BeamStepRecord& beam_chain_read();
  virtual void beam_chain_end();
  virtual int n_text_ctx() const = 0;  // decoder positions (448)
  virtual int n_mels() const = 0;      // 80 or 128
  // Mel frames of audio one window holds: 3000 (30 s); 2 * N under LoadOptions::audio_ctx N,
  // so the seek loop cuts the audio into windows the encoder hears whole.
  virtual int64_t window_frames() const { return 3000; }
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
  Tensor decode_selected(std::span<const int32_t> tokens, std::span<const int64_t> rows) override;
  void reset() override;
  void set_full_precision(bool on) override;
  void fork(int n_rows) override;
  Tensor decode_rows(std::span<const int32_t> tokens) override;
  void reorder_rows(std::span<const int32_t> source) override;
  bool chooses_on_device() const override;
  void decode_choose(std::span<const int32_t> tokens, std::span<const int32_t> always,
                     std::span<const int32_t> rules, int k, std::vector<int32_t>& ids,
                     std::vector<float>& logprobs) override;
  Tensor decode_initial_choose(std::span<const int32_t> tokens, int64_t sot_index,
                               std::span<const int32_t> always, std::span<const int32_t> rule,
                               int k, std::vector<int32_t>& ids,
                               std::vector<float>& logprobs) override;
  bool chains_greedy() const override;
  void chain_begin(const GreedyChainStart& start) override;
  void chain_begin_initial(std::span<const int32_t> tokens, int64_t sot_index,
                           const GreedyChainStart& start) override;
  std::span<const float> chain_initial_logits() override;
  void chain_launch() override;
  std::pair<int32_t, float> chain_read() override;
  void chain_end() override;
  bool chains_beam() const override;
  void beam_chain_begin(const BeamChainStart& start) override;
  void beam_chain_begin_initial(std::span<const int32_t> tokens, int64_t sot_index, int n_rows,
                                const BeamChainStart& start) override;
  std::span<const float> beam_chain_initial_logits() override;
  void beam_chain_launch() override;
  const BeamStepRecord& beam_chain_read() override;
  void beam_chain_end() override;
  int n_text_ctx() const override;
  int n_mels() const override;
  int64_t window_frames() const override;
  CrossAttentionWeights cross_attention_weights(
      std::span<const int32_t> tokens, std::span<const std::pair<int, int>> heads) override;

 private:
  WhisperSession& session_;
  int chain_read_ = 0;  // the offset of the next chained step to read (greedy or beam)
};

// Options of one window's decoding: the reference's DecodingOptions (whisper/decoding.py),
// with its defaults; its None is 0 or nullopt here. docs/DECODING.md compares them option
// by option. Invalid combinations throw Error(invalid_argument) as the reference raises.
struct DecodingOptions {
  // "transcribe" (X -> X) or "translate" (X -> English).
  std::string task = "transcribe";
  // Language code ("en"); nullopt: detected from this window on multilingual models,
  // "en" on English-only ones.
  std::optional<std::string> language;
  // 0: the most likely token (greedy) or beam search; > 0: sampling from
  // softmax(logits / temperature). Must be >= 0.
  float temperature = 0.0f;
  // Candidates sampled at temperature > 0 (decoded as one batch), the best kept by
  // MaximumLikelihoodRanker; 0: one (the reference's None). Needs temperature > 0, and not
  // with beam_size.
  int best_of = 0;
  // Beams of a beam search (decoded as one batch); 0: no beam search (None). Beam search
  // ignores the temperature, as the reference's BeamSearchDecoder.
  int beam_size = 0;
  // Beam search stops when round(beam_size * patience) sequences have finished
  // (arxiv:2204.05424); nullopt: 1.0. Needs beam_size.
  std::optional<float> patience;
  // Ranking of finished candidates: nullopt: sum_logprob / length; a in [0, 1]:
  // sum_logprob / ((5 + length) / 6) ** a (Google NMT).
  std::optional<float> length_penalty;
  // Sampling: the same seed and sampling_stream give the same draws (sampling.h) on any
  // thread count. transcribe() sets the stream per window and temperature.
  uint64_t seed = 0;
  uint64_t sampling_stream = 0;
  // Adds <|notimestamps|> and leaves out the timestamp rules.
  bool without_timestamps = false;
  // Latest first timestamp, in seconds (rounded to 20 ms steps); 0: no limit.
  float max_initial_timestamp = 1.0f;
  // Suppresses " " and <|endoftext|> at the first sampled position.
  bool suppress_blank = true;
  // Comma-separated ids never sampled; "-1" = the non-speech symbols. The special tokens
  // are added unless this is empty (see resolve_suppress_tokens).
  std::string suppress_tokens = "-1";
  // Previous text as ids; the last n_text_ctx/2 - 1 (223) go after <|startofprev|>, fewer
  // when there are hotwords (see initial_tokens).
  std::vector<int32_t> prompt;
  // Vocabulary hints as ids (faster-whisper's hotwords): after <|startofprev|>, before the
  // prompt, in every window; ignored when there is a prefix, as faster-whisper.
  std::vector<int32_t> hotwords;
  // Forced first tokens of the transcript (after the sot sequence); at most
  // n_text_ctx/2 - sample_len of its last tokens (all of them by default).
  std::vector<int32_t> prefix;
  // Most tokens sampled; 0: n_text_ctx / 2 (224).
  int sample_len = 0;
  // Called with every sampled token of this attempt (before the fallback decides whether
  // the attempt is kept), <|endoftext|> included: as soon as it is chosen with one
  // candidate; with several (beams, best_of) the chosen candidate's tokens once it is
  // chosen.
  std::function<void(int32_t)> on_token;
  // Called once per attempt with its no-speech probability, right after the initial pass
  // and before any token is sampled (streaming: a window that may be judged silent can be
  // held back from the start).
  std::function<void(float)> on_no_speech_prob;
  // Polled before every decoder step; when it returns true decoding throws
  // Error(cancelled).
  std::function<bool()> cancelled;
  // Fill DecodingResult::token_logprobs (one more decoder pass over the chosen tokens).
  bool token_logprobs = false;
};

struct DecodingResult {
  std::vector<int32_t> tokens;  // sampled ids, without <|endoftext|>
  std::string text;             // decoded, stripped (invalid UTF-8 replaced by U+FFFD)
  std::string language;         // code of the language used
  float avg_logprob = 0;        // sum of chosen log-probs / (len(tokens) + 1)
  float no_speech_prob = 0;     // P(<|nospeech|>) at the <|startoftranscript|> position
  float temperature = 0;
  float compression_ratio = 0;  // utf-8 bytes of text / zlib-compressed bytes
  // With DecodingOptions::token_logprobs: per entry of `tokens`, its log-probability under
  // the filtered logits of its position (log-softmax over the vocabulary, temperature 1),
  // from one teacher-forced decoder pass over the chosen sequence (so also for beam search
  // and sampling); empty otherwise.
  std::vector<float> token_logprobs;
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

// One greedy (temperature 0) or sampled candidate of one window (beam_size 0, best_of <= 1),
// stepped by the caller: batched transcription (transcribe_batch.h) feeds each window's
// search the logits of its row. The same initial tokens, logit filters, draws, stopping rules
// and result fields as decode_encoded with the same options (they share those steps), except
// token_logprobs (not filled). options.language must be set.
class WindowSearch {
 public:
  WindowSearch(const WhisperTokenizer& tokenizer, const DecodingOptions& options, int n_text_ctx);
  ~WindowSearch();
  WindowSearch(WindowSearch&&) noexcept;
  WindowSearch& operator=(WindowSearch&&) noexcept;

  // What to decode first (prompt, sot sequence, prefix).
  const std::vector<int32_t>& initial_tokens() const;
  // The logits of the initial tokens, f32 [initial_tokens().size(), n_vocab]: no_speech_prob
  // and the first token.
  void first(const Tensor& logits);
  // The same from the only two rows it reads: the logits at sot_index() (no_speech_prob) and
  // at the last initial token (the first token).
  void first(std::span<const float> at_sot, std::span<const float> last);
  int sot_index() const;  // the index of <|startoftranscript|> in initial_tokens()
  // The logits of the position after last_token(): the next token.
  void next(std::span<const float> logits);
  // The same step with the choice made next to the logits (WhisperBatchSession::
  // step_choose): next_rule gives the rule row of the position after last_token() and
  // returns false where the choice must stay on the host (sampling, or a filter without a
  // rule form there); always_masked() the ids suppressed at every position. next_chosen
  // takes the chosen token and its log-probability under the filtered logits.
  bool next_rule(StepRule& rule) const;
  const std::vector<int32_t>& always_masked() const;
  void next_chosen(int32_t token, float logprob);
  bool done() const;
  int32_t last_token() const;            // the token to decode next while !done()
  const DecodingResult& result() const;  // once done()

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// The initial tokens: [<|startofprev|>, hotwords..., prompt tail...] + sot sequence
// (+ <|notimestamps|>) + prefix. `language` is the code written into the sot sequence.
// The prompt budget is n_text_ctx/2 - 1 (223) tokens after <|startofprev|>, as the
// reference's prompt[-223:]. Hotwords (not with a prefix) take at most half of it: their
// first min(len, 111) tokens; the prompt keeps its most recent 223 - that many tokens, so
// the latest context always keeps at least 112 tokens, and without hotwords the prompt is
// cut exactly as the reference cuts it.
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
