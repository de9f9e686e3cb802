// transcribe(): the seek loop of openai/whisper's whisper/transcribe.py over audio of any
// length: log-mel of the whole audio (+30 s of zeros), one 30 s window at a time, the
// previous text as the prompt, the temperature fallback, silent windows skipped, segments
// cut at timestamp pairs, clip_timestamps. docs/DECODING.md lists every option against the
// reference.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "whisper/decoding.h"
#include "whisper/segments.h"
#include "whisper/timing.h"

namespace parley {

class WhisperSession;
class WhisperTokenizer;

struct TranscribeOptions {
  // Language code; nullopt: "en" for English-only models, else detected once from the
  // first 30 s.
  std::optional<std::string> language;
  // "transcribe" or "translate".
  std::string task = "transcribe";
  // Decode with <|notimestamps|>: one segment per window.
  bool without_timestamps = false;
  // Temperatures tried in order until a result passes the thresholds (the reference's
  // temperature tuple; its CLI: --temperature 0 --temperature_increment_on_fallback 0.2).
  // At 0: greedy, or beam search with beam_size; above 0: sampling, best_of candidates.
  std::vector<float> temperatures = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f};
  // Candidates sampled per attempt at a temperature > 0; 0: one (the reference API's None;
  // its CLI's default is 5).
  int best_of = 0;
  // Beam search at temperature 0 with this many beams; 0: greedy (the API's None; the
  // CLI's default is 5).
  int beam_size = 0;
  // Beam search patience (nullopt: 1.0) and ranking length_penalty (nullopt: divide by the
  // length); see DecodingOptions.
  std::optional<float> patience;
  std::optional<float> length_penalty;
  // Seed of the sampling at temperatures > 0 (sampling.h): each window and temperature draws
  // from its own stream, so the same seed gives the same transcript on every run.
  uint64_t seed = 0;
  // Retry at the next temperature when the text's compression ratio (utf-8 bytes / zlib
  // bytes) exceeds this (nullopt: never).
  std::optional<float> compression_ratio_threshold = 2.4f;
  // Retry when avg_logprob is below this; also the silence test's second half (nullopt: off).
  std::optional<float> logprob_threshold = -1.0f;
  // A window is silent when no_speech_prob > this and avg_logprob < logprob_threshold
  // (nullopt: never skip).
  std::optional<float> no_speech_threshold = 0.6f;
  // Feed the previous windows' tokens as the prompt.
  bool condition_on_previous_text = true;
  // Text put before the first window's prompt (encoded as " " + strip(text)).
  std::optional<std::string> initial_prompt;
  // Token ids in place of initial_prompt's encoding: a transcript resumed at a later seek
  // (streaming sessions) passes the earlier windows' tokens, timestamps included, which is
  // the prompt the seek loop would have built itself. Empty: initial_prompt.
  std::vector<int32_t> prompt_tokens;
  // Put initial_prompt before every window's prompt, the previous text filling the rest of
  // the 223-token budget (the reference's carry_initial_prompt).
  bool carry_initial_prompt = false;
  // Text every window's transcript is forced to start with (" " + strip(text)).
  std::optional<std::string> prefix;
  // Vocabulary hints (" " + strip(text)), e.g. "ComfyUI, Kubernetes": in every window after
  // <|startofprev|>, before the previous text, within the same 223-token budget (at most
  // 111 tokens; see initial_tokens in decoding.h); ignored with a prefix (faster-whisper).
  std::optional<std::string> hotwords;
  // Seconds: start,end,start,end,... of the parts of the audio to transcribe; an odd count
  // ends at the end of the audio; empty: all of it (the reference's "0").
  std::vector<double> clip_timestamps;
  // DecodingOptions passed through to every window (see decoding.h for their defaults).
  float max_initial_timestamp = 1.0f;
  bool suppress_blank = true;
  std::string suppress_tokens = "-1";
  int sample_len = 0;
  // Word timestamps (timing.h): fills Segment::words, moves segment times to the words and
  // the seek to the last word's end, as the reference's word_timestamps=True.
  bool word_timestamps = false;
  // Fill TranscribeResult::logprobs (OpenAI's include[]=logprobs): one more decoder pass per
  // window over its chosen tokens (DecodingOptions::token_logprobs).
  bool token_logprobs = false;
  // Punctuation merged into neighbouring words, alignment heads (see timing.h defaults).
  WordTimestampOptions word_options;
  // With word_timestamps: skip silences longer than this many seconds around a possible
  // hallucination (the reference's hallucination_silence_threshold; nullopt: off).
  std::optional<float> hallucination_silence_threshold;
  // Stop before a window that would have less than its full 30 s of audio (streaming
  // sessions during capture: every window decoded is one the whole file's seek loop decodes
  // alike, and none is decoded only to be thrown away); TranscribeResult::next_seek says
  // where the next window starts.
  bool complete_windows_only = false;
  // Encode each window over only as much of the encoder's context as the file's audio needs
  // (fitted_audio_ctx, model.h: the audio plus 2 s, in steps of 5 s, at least 15 s), not
  // the whole 30 s: a live turn of a few seconds costs about half of the encoder's work
  // (whisper.cpp's audio_ctx, chosen per file). Speed for fidelity: the text can differ
  // from the full context's (docs/DECODING.md). Honoured by the batched paths
  // (BatchTranscriber: the server); a window they hand to the one-window session (the
  // temperature fallback, word timestamps) and transcribe() use the full context.
  bool fit_audio_ctx = false;
  // Print "[00:00.000 --> 00:02.000] text" to stdout per segment, as the reference's
  // verbose=True.
  bool verbose = false;
  // Called with every segment as soon as its window is done (after the empty-segment
  // clean-up), in order.
  std::function<void(const Segment&)> on_segment;
  // Passed to every window's DecodingOptions (see decoding.h): every sampled token as it
  // is chosen, each attempt's no-speech probability before its first token, and a poll
  // that stops the transcript with Error(cancelled).
  std::function<void(int32_t)> on_token;
  std::function<void(float)> on_no_speech_prob;
  std::function<bool()> cancelled;
};

// One text token of the transcript and its log-probability (OpenAI's logprobs entry).
struct TokenLogprob {
  std::string bytes;  // the token's bytes (a piece of UTF-8, possibly not a whole character)
  float logprob = 0;
};

struct TranscribeResult {
  std::string text;  // every segment's text, joined, without the initial prompt
  std::vector<Segment> segments;
  std::string language;
  // With TranscribeOptions::token_logprobs: every text token of `segments`, in order
  // (timestamps and other special tokens left out).
  std::vector<TokenLogprob> logprobs;
  // The mel frame (10 ms) the seek loop stopped at: the end of the audio, or with
  // complete_windows_only the first window it left undecoded.
  int64_t next_seek = 0;
};

// The DecodingOptions every window of a transcript starts from (before its prompt and the
// temperature of each attempt): the options transcribe() passes through, prefix and
// hotwords encoded with `tokenizer`, the transcript's language.
DecodingOptions window_decoding_options(const TranscribeOptions& options,
                                        const WhisperTokenizer& tokenizer,
                                        const std::string& language);

// 16 kHz mono samples -> transcript.
TranscribeResult transcribe(WhisperSession& session, const WhisperTokenizer& tokenizer,
                            std::span<const float> samples, const TranscribeOptions& options);
TranscribeResult transcribe(LogitsSource& source, const WhisperTokenizer& tokenizer,
                            std::span<const float> samples, const TranscribeOptions& options);
// From the log-mel of the audio with 30 s of padding, f32 [n_mels, content_frames + 3000]
// (log_mel_spectrogram(samples, n_mels, kChunkSamples)) on any device: windows are cut on
// the mel's device. transcribe(WhisperSession&) computes it on the model's device
// (log_mel_spectrogram_for).
TranscribeResult transcribe_mel(LogitsSource& source, const WhisperTokenizer& tokenizer,
                                const Tensor& padded_mel, const TranscribeOptions& options);

// The reference's clip_timestamps string: "" or comma-separated seconds ("0", "5.5,10").
// Throws Error(invalid_argument) for anything but non-negative numbers.
std::vector<double> parse_clip_timestamps(const std::string& text);

// "MM:SS.mmm", or "HH:MM:SS.mmm" from an hour on or when always_include_hours, rounded to
// the millisecond (whisper/utils.py format_timestamp; SRT uses hours and ',').
std::string format_timestamp(double seconds, bool always_include_hours = false,
                             char decimal_marker = '.');

}  // namespace parley
