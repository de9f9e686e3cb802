// Reference: openai/whisper whisper/transcribe.py, transcribe(); word timestamps in
// timing.cpp (window_word_timestamps).
#include "whisper/transcribe.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "audio/mel.h"
#include "audio/mel_device.h"
#include "engine/error.h"
#include "whisper/model.h"
#include "whisper/seek_loop.h"
#include "whisper/tokenizer.h"

namespace parley {
namespace {

// mel[:, seek : seek + frames] zero-padded to 3000 frames: pad_or_trim in the log-mel domain,
// on the mel's device.
Tensor mel_window(const Tensor& mel, int64_t seek, int64_t frames) {
  return mel_columns(mel, seek, frames, kChunkFrames);
}

void check_options(const TranscribeOptions& o) {
  check_arg(!o.temperatures.empty(), "[whisper] temperatures must not be empty");
  for (float t : o.temperatures) {
    check_arg(t >= 0.0f && std::isfinite(t),
              "[whisper] temperatures must be finite and >= 0, got " + std::to_string(t));
  }
  check_arg(o.best_of >= 0, "[whisper] best_of must be >= 1 (or 0: not set)");
  check_arg(o.beam_size >= 0, "[whisper] beam_size must be >= 1 (or 0: not set)");
  check_arg(!o.patience || o.beam_size > 0, "[whisper] patience requires beam_size");
  check_arg(!o.length_penalty || (*o.length_penalty >= 0.0f && *o.length_penalty <= 1.0f),
            "[whisper] length_penalty (alpha) should be a value between 0 and 1");
  for (double c : o.clip_timestamps) {
    check_arg(c >= 0.0 && std::isfinite(c), "[whisper] clip_timestamps must be seconds >= 0");
  }
}

// Python's xs[-n:] for any integer n (0 keeps everything, n < 0 drops -n from the front).
std::vector<int32_t> py_tail(std::span<const int32_t> xs, int64_t n) {
  const int64_t size = int64_t(xs.size());
  int64_t begin = 0;
  if (n > 0) begin = std::max<int64_t>(0, size - n);
  if (n < 0) begin = std::min<int64_t>(size, -n);
  return {xs.begin() + begin, xs.end()};
}

// The reference's seek_clips: pairs of mel frames.
std::vector<std::pair<int64_t, int64_t>> seek_clips(const std::vector<double>& clips,
                                                    int64_t content_frames) {
  std::vector<int64_t> points;
  // round(ts * FRAMES_PER_SECOND): Python rounds halves to even, as nearbyint.
  for (double c : clips) points.push_back(int64_t(std::nearbyint(c * 100.0)));
  if (points.empty()) points.push_back(0);
  if (points.size() % 2 == 1) points.push_back(content_frames);
  std::vector<std::pair<int64_t, int64_t>> out;
  for (size_t i = 0; i + 1 < points.size(); i += 2) {
    // A clip past the end of the audio has nothing to decode (the reference would slice an
    // empty window there and move the seek backwards).
    out.emplace_back(std::min(points[i], content_frames), std::min(points[i + 1], content_frames));
  }
  return out;
}

void print_segment(const Segment& s) {
  std::printf("[%s --> %s] %s\n", format_timestamp(s.start).c_str(),
              format_timestamp(s.end).c_str(), s.text.c_str());
  std::fflush(stdout);
}

}  // namespace

std::vector<double> parse_clip_timestamps(const std::string& text) {
  std::vector<double> out;
  if (text.empty()) return out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    double v = -1;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    check_arg(used > 0 && item.find_first_not_of(" \t", used) == std::string::npos &&
                  std::isfinite(v) && v >= 0.0,
              "[whisper] clip_timestamps: '" + item + "' is not a number of seconds >= 0 in '" +
                  text + "'");
    out.push_back(v);
  }
  return out;
}

std::string format_timestamp(double seconds, bool always_include_hours, char decimal_marker) {
  // A model that samples a timestamp after text in <|notimestamps|> mode gets a segment
  // whose start lies before its window, as in the reference (whose formatter asserts);
  // print such times as 0 rather than fail the whole transcript.
  seconds = std::max(seconds, 0.0);
  // Python's round() rounds halves to even; std::nearbyint does too in the default mode.
  auto ms = int64_t(std::nearbyint(seconds * 1000.0));
  const int64_t hours = ms / 3600000;
  ms -= hours * 3600000;
  const int64_t minutes = ms / 60000;
  ms -= minutes * 60000;
  const int64_t secs = ms / 1000;
  ms -= secs * 1000;
  char buf[128];  // room for any int64 fields (-Wformat-truncation)
  if (always_include_hours || hours > 0) {
    std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld%c%03lld", (long long)hours,
                  (long long)minutes, (long long)secs, decimal_marker, (long long)ms);
  } else {
    std::snprintf(buf, sizeof buf, "%02lld:%02lld%c%03lld", (long long)minutes, (long long)secs,
                  decimal_marker, (long long)ms);
  }
  return buf;
}

DecodingOptions window_decoding_options(const TranscribeOptions& o,
                                        const WhisperTokenizer& tokenizer,
                                        const std::string& language) {
  DecodingOptions d;
  d.task = o.task;
  d.language = language;
  d.without_timestamps = o.without_timestamps;
  d.max_initial_timestamp = o.max_initial_timestamp;
  d.suppress_blank = o.suppress_blank;
  d.suppress_tokens = o.suppress_tokens;
  d.sample_len = o.sample_len;
  d.length_penalty = o.length_penalty;
  d.seed = o.seed;
  if (o.prefix) d.prefix = tokenizer.encode(" " + py_strip(*o.prefix));
  if (o.hotwords) d.hotwords = tokenizer.encode(" " + py_strip(*o.hotwords));
  d.on_token = o.on_token;
  d.on_no_speech_prob = o.on_no_speech_prob;
  d.token_logprobs = o.token_logprobs;
  d.cancelled = o.cancelled;
  return d;
}

namespace whisper {

bool needs_fallback(const DecodingResult& result, const TranscribeOptions& o) {
  bool fallback = false;
  if (o.compression_ratio_threshold && result.compression_ratio > *o.compression_ratio_threshold) {
    fallback = true;  // too repetitive
  }
  if (o.logprob_threshold && result.avg_logprob < *o.logprob_threshold) {
    fallback = true;  // too unlikely
  }
  if (o.no_speech_threshold && result.no_speech_prob > *o.no_speech_threshold &&
      o.logprob_threshold && result.avg_logprob < *o.logprob_threshold) {
    fallback = false;  // silence
  }
  return fallback;
}

DecodingOptions attempt_options(DecodingOptions decode, const TranscribeOptions& o, size_t k,
                                int64_t seek) {
  const float t = o.temperatures[k];
  decode.temperature = t;
  decode.best_of = t > 0.0f ? o.best_of : 0;
  decode.beam_size = t > 0.0f ? 0 : o.beam_size;
  decode.patience = t > 0.0f ? std::nullopt : o.patience;
  // Each window and temperature draws from its own stream.
  decode.sampling_stream = (uint64_t(seek) << 8) | uint64_t(k);
  return decode;
}

DecodingResult decode_with_fallback(LogitsSource& source, const WhisperTokenizer& tokenizer,
                                    const Tensor& window, const DecodingOptions& decode,
                                    const TranscribeOptions& o, int64_t seek, size_t first) {
  source.encode(window);
  DecodingResult result;
  for (size_t k = first; k < o.temperatures.size(); ++k) {
    result = decode_encoded(source, tokenizer, attempt_options(decode, o, k, seek));
    if (!needs_fallback(result, o)) break;
  }
  return result;
}

SeekLoop::SeekLoop(const WhisperTokenizer& tokenizer, const Tensor& mel, const TranscribeOptions& o,
                   std::string language, int n_text_ctx, int64_t window_frames)
    : tokenizer_(tokenizer),
      mel_(mel),
      o_(o),
      content_frames_(mel.dim(1) - kChunkFrames),
      window_frames_(std::clamp<int64_t>(window_frames, 1, kChunkFrames)) {
  out_.language = std::move(language);
  decode_ = window_decoding_options(o, tokenizer, out_.language);

  if (!o.prompt_tokens.empty()) {
    all_tokens_ = o.prompt_tokens;
  } else if (o.initial_prompt) {
    all_tokens_ = tokenizer.encode(" " + py_strip(*o.initial_prompt));
  }
  n_initial_prompt_ = all_tokens_.size();
  remaining_prompt_length_ = int64_t(n_text_ctx / 2 - 1) - int64_t(n_initial_prompt_);
  sot_sequence_ = tokenizer.sot_sequence(out_.language, o.task);
  clips_ = seek_clips(o.clip_timestamps, content_frames_);
  seek_ = clips_[0].first;
}

bool SeekLoop::next_window() {
  // The reference's flattened loop over clips: for (start, end) in clips, while seek < end.
  while (clip_idx_ < clips_.size()) {
    const auto [clip_start, clip_end] = clips_[clip_idx_];
    if (seek_ < clip_start) seek_ = clip_start;
    if (seek_ >= clip_end) {
      if (++clip_idx_ < clips_.size()) seek_ = clips_[clip_idx_].first;
      continue;
    }
    if (o_.complete_windows_only && content_frames_ - seek_ < window_frames_) break;
    window_.seek = seek_;
    window_.time_offset = frame_time(seek_);
    window_.size = std::min({window_frames_, content_frames_ - seek_, clip_end - seek_});
    if (o_.carry_initial_prompt) {
      const size_t ignored = std::max(n_initial_prompt_, prompt_reset_since_);
      const auto recent =
          py_tail(std::span<const int32_t>(all_tokens_).subspan(ignored), remaining_prompt_length_);
      decode_.prompt.assign(all_tokens_.begin(), all_tokens_.begin() + int64_t(n_initial_prompt_));
      decode_.prompt.insert(decode_.prompt.end(), recent.begin(), recent.end());
    } else {
      decode_.prompt.assign(all_tokens_.begin() + int64_t(prompt_reset_since_), all_tokens_.end());
    }
    return true;
  }
  return false;
}

Tensor SeekLoop::window_mel() const { return mel_window(mel_, window_.seek, window_.size); }

void SeekLoop::accept(const DecodingResult& result, LogitsSource* source) {
  const TranscribeOptions& o = o_;
  const int64_t segment_size = window_.size;
  if (o.no_speech_threshold) {
    bool should_skip = result.no_speech_prob > *o.no_speech_threshold;
    if (o.logprob_threshold && result.avg_logprob > *o.logprob_threshold) should_skip = false;
    if (should_skip) {
      seek_ += segment_size;  // a silent window: on to the next one
      return;
    }
  }

  const int64_t window_seek = window_.seek;
  const WindowCut cut = cut_window(result.tokens, tokenizer_.timestamp_begin(), window_.time_offset,
                                   int(segment_size));
  seek_ += cut.seek_advance;

  std::vector<Segment> current;
  for (const TokenSlice& slice : cut.slices) {
    Segment& s = current.emplace_back();
    s.seek = int(window_seek);
    s.start = slice.start;
    s.end = slice.end_time;
    s.tokens.assign(result.tokens.begin() + int64_t(slice.begin),
                    result.tokens.begin() + int64_t(slice.end));
    if (!result.token_logprobs.empty()) {
      s.token_logprobs.assign(result.token_logprobs.begin() + int64_t(slice.begin),
                              result.token_logprobs.begin() + int64_t(slice.end));
    }
    std::vector<int32_t> text_tokens;
    for (int32_t t : s.tokens) {
      if (t < tokenizer_.eot()) text_tokens.push_back(t);
    }
    s.text = reference_decode(tokenizer_, text_tokens);
    s.temperature = result.temperature;
    s.avg_logprob = result.avg_logprob;
    s.compression_ratio = result.compression_ratio;
    s.no_speech_prob = result.no_speech_prob;
  }
  if (o.word_timestamps) {
    check(source != nullptr, ErrorKind::internal,
          "[whisper] word timestamps need the window's decoder");
    WindowWordState words{result.tokens,   window_seek, segment_size,
                          content_frames_, seek_,       last_speech_timestamp_};
    const bool keep =
        window_word_timestamps(current, words, *source, tokenizer_, sot_sequence_, out_.language,
                               o.word_options, o.hallucination_silence_threshold);
    seek_ = words.seek;
    if (!keep) return;
    last_speech_timestamp_ = words.last_speech_timestamp;
  }
  for (Segment& s : current) {
    s.id = int(out_.segments.size());
    if (o.verbose) print_segment(s);  // the reference prints before the clean-up below
    // An instantaneous or textless segment keeps its times but loses text and tokens.
    if (s.start == s.end || py_strip(s.text).empty()) {
      s.text.clear();
      s.tokens.clear();
      s.words.clear();
      s.token_logprobs.clear();
    }
    for (size_t i = 0; i < s.token_logprobs.size(); ++i) {
      if (s.tokens[i] < tokenizer_.eot()) {
        out_.logprobs.push_back({tokenizer_.token_bytes(s.tokens[i]), s.token_logprobs[i]});
      }
    }
    all_tokens_.insert(all_tokens_.end(), s.tokens.begin(), s.tokens.end());
    if (o.on_segment) o.on_segment(s);
    out_.segments.push_back(std::move(s));
  }
  if (!o.condition_on_previous_text || result.temperature > 0.5f) {
    prompt_reset_since_ = all_tokens_.size();  // no prompt after a high temperature
  }
}

TranscribeResult SeekLoop::finish() {
  out_.text = reference_decode(tokenizer_,
                               std::span<const int32_t>(all_tokens_).subspan(n_initial_prompt_));
  out_.next_seek = std::min(seek_, content_frames_);
  return std::move(out_);
}

std::string transcript_language(LogitsSource& source, const WhisperTokenizer& tokenizer,
                                const Tensor& mel, const TranscribeOptions& o) {
  if (o.language) return *o.language;
  if (!tokenizer.multilingual()) return "en";
  // The first 30 s of the padded mel, not the decoder's zero-padded window.
  source.encode(mel_window(mel, 0, kChunkFrames));
  return detect_language(source, tokenizer).code;
}

void check_transcribe_input(const Tensor& mel, int n_mels, const TranscribeOptions& o) {
  check_arg(mel.dtype() == DType::f32 && mel.ndim() == 2 && mel.dim(0) == n_mels &&
                mel.dim(1) >= kChunkFrames,
            "[whisper] transcribe: expected a padded log-mel f32 [" + std::to_string(n_mels) +
                ", >= 3000], got " + mel.describe());
  check_options(o);
}

}  // namespace whisper

TranscribeResult transcribe_mel(LogitsSource& source, const WhisperTokenizer& tokenizer,
                                const Tensor& mel, const TranscribeOptions& o) {
  using namespace whisper;
  check_transcribe_input(mel, source.n_mels(), o);
  SeekLoop loop(tokenizer, mel, o, transcript_language(source, tokenizer, mel, o),
                source.n_text_ctx(), source.window_frames());
  while (loop.next_window()) {
    const DecodingResult result = decode_with_fallback(
        source, tokenizer, loop.window_mel(), loop.decode_options(), o, loop.window().seek);
    loop.accept(result, &source);
  }
  return loop.finish();
}

TranscribeResult transcribe(LogitsSource& source, const WhisperTokenizer& tokenizer,
                            std::span<const float> samples, const TranscribeOptions& options) {
  const Tensor mel = log_mel_spectrogram(samples, source.n_mels(), kChunkSamples);
  return transcribe_mel(source, tokenizer, mel, options);
}

TranscribeResult transcribe(WhisperSession& session, const WhisperTokenizer& tokenizer,
                            std::span<const float> samples, const TranscribeOptions& options) {
  SessionLogitsSource source(session);
  // On the model's device: a CUDA model's features never visit the host.
  const Tensor mel =
      log_mel_spectrogram_for(session.model().device(), samples, source.n_mels(), kChunkSamples);
  return transcribe_mel(source, tokenizer, mel, options);
}

}  // namespace parley
