// Reference: openai/whisper whisper/transcribe.py, transcribe() with clip_timestamps "0"
// and carry_initial_prompt off; word timestamps in timing.cpp (window_word_timestamps).
#include "whisper/transcribe.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "audio/mel.h"
#include "engine/error.h"
#include "whisper/model.h"
#include "whisper/tokenizer.h"

namespace parley {
namespace {

// mel[:, seek : seek + frames] zero-padded to 3000 frames: pad_or_trim in the log-mel domain.
Tensor mel_window(const Tensor& mel, int64_t seek, int64_t frames) {
  const int64_t n_mels = mel.dim(0), total = mel.dim(1);
  Tensor out = Tensor::zeros({n_mels, kChunkFrames}, DType::f32);
  const float* src = mel.data<float>();
  float* dst = out.data<float>();
  for (int64_t m = 0; m < n_mels; ++m) {
    std::memcpy(dst + m * kChunkFrames, src + m * total + seek, size_t(frames) * sizeof(float));
  }
  return out;
}

// decode_with_fallback: tries options.temperatures in order; a result at one temperature
// is kept when it is neither too repetitive nor too unlikely, or when it is silence.
DecodingResult decode_with_fallback(LogitsSource& source, const WhisperTokenizer& tokenizer,
                                    const Tensor& window, DecodingOptions decode,
                                    const TranscribeOptions& o) {
  check_arg(!o.temperatures.empty(), "[whisper] temperatures must not be empty");
  source.encode(window);
  DecodingResult result;
  for (float t : o.temperatures) {
    decode.temperature = t;
    result = decode_encoded(source, tokenizer, decode);
    bool needs_fallback = false;
    if (o.compression_ratio_threshold &&
        result.compression_ratio > *o.compression_ratio_threshold) {
      needs_fallback = true;  // too repetitive
    }
    if (o.logprob_threshold && result.avg_logprob < *o.logprob_threshold) {
      needs_fallback = true;  // too unlikely
    }
    if (o.no_speech_threshold && result.no_speech_prob > *o.no_speech_threshold &&
        o.logprob_threshold && result.avg_logprob < *o.logprob_threshold) {
      needs_fallback = false;  // silence
    }
    if (!needs_fallback) break;
  }
  return result;
}

void print_segment(const Segment& s) {
  std::printf("[%s --> %s] %s\n", format_timestamp(s.start).c_str(),
              format_timestamp(s.end).c_str(), s.text.c_str());
  std::fflush(stdout);
}

}  // namespace

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

TranscribeResult transcribe_mel(LogitsSource& source, const WhisperTokenizer& tokenizer,
                                const Tensor& mel, const TranscribeOptions& o) {
  check_arg(mel.dtype() == DType::f32 && !mel.is_cuda() && mel.ndim() == 2 &&
                mel.dim(0) == source.n_mels() && mel.dim(1) >= kChunkFrames,
            "[whisper] transcribe: expected a padded log-mel f32 [" +
                std::to_string(source.n_mels()) + ", >= 3000] on the CPU, got " + mel.describe());
  const int64_t content_frames = mel.dim(1) - kChunkFrames;

  TranscribeResult out;
  if (o.language) {
    out.language = *o.language;
  } else if (!tokenizer.multilingual()) {
    out.language = "en";
  } else {
    // The first 30 s of the padded mel, not the decoder's zero-padded window.
    source.encode(mel_window(mel, 0, kChunkFrames));
    out.language = detect_language(source, tokenizer).code;
  }

  DecodingOptions decode;
  decode.task = o.task;
  decode.language = out.language;
  decode.without_timestamps = o.without_timestamps;
  decode.max_initial_timestamp = o.max_initial_timestamp;
  decode.suppress_blank = o.suppress_blank;
  decode.suppress_tokens = o.suppress_tokens;
  decode.sample_len = o.sample_len;
  decode.on_token = o.on_token;
  decode.cancelled = o.cancelled;

  std::vector<int32_t> all_tokens;
  size_t prompt_reset_since = 0;
  if (o.initial_prompt) all_tokens = tokenizer.encode(" " + py_strip(*o.initial_prompt));
  const size_t n_initial_prompt = all_tokens.size();

  int64_t seek = 0;
  double last_speech_timestamp = 0;  // end of the last word, with word timestamps
  const std::vector<int32_t> sot_sequence = tokenizer.sot_sequence(out.language, o.task);
  while (seek < content_frames) {
    const double time_offset = frame_time(seek);
    const int64_t segment_size = std::min(kChunkFrames, content_frames - seek);
    decode.prompt.assign(all_tokens.begin() + int64_t(prompt_reset_since), all_tokens.end());
    const DecodingResult result =
        decode_with_fallback(source, tokenizer, mel_window(mel, seek, segment_size), decode, o);

    if (o.no_speech_threshold) {
      bool should_skip = result.no_speech_prob > *o.no_speech_threshold;
      if (o.logprob_threshold && result.avg_logprob > *o.logprob_threshold) should_skip = false;
      if (should_skip) {
        seek += segment_size;  // a silent window: on to the next one
        continue;
      }
    }

    const int64_t window_seek = seek;
    const WindowCut cut =
        cut_window(result.tokens, tokenizer.timestamp_begin(), time_offset, int(segment_size));
    seek += cut.seek_advance;

    std::vector<Segment> current;
    for (const TokenSlice& slice : cut.slices) {
      Segment& s = current.emplace_back();
      s.seek = int(window_seek);
      s.start = slice.start;
      s.end = slice.end_time;
      s.tokens.assign(result.tokens.begin() + int64_t(slice.begin),
                      result.tokens.begin() + int64_t(slice.end));
      std::vector<int32_t> text_tokens;
      for (int32_t t : s.tokens) {
        if (t < tokenizer.eot()) text_tokens.push_back(t);
      }
      s.text = reference_decode(tokenizer, text_tokens);
      s.temperature = result.temperature;
      s.avg_logprob = result.avg_logprob;
      s.compression_ratio = result.compression_ratio;
      s.no_speech_prob = result.no_speech_prob;
    }
    if (o.word_timestamps) {
      WindowWordState words{result.tokens,  window_seek, segment_size,
                            content_frames, seek,        last_speech_timestamp};
      const bool keep =
          window_word_timestamps(current, words, source, tokenizer, sot_sequence, out.language,
                                 o.word_options, o.hallucination_silence_threshold);
      seek = words.seek;
      if (!keep) continue;
      last_speech_timestamp = words.last_speech_timestamp;
    }
    for (Segment& s : current) {
      s.id = int(out.segments.size());
      if (o.verbose) print_segment(s);  // the reference prints before the clean-up below
      // An instantaneous or textless segment keeps its times but loses text and tokens.
      if (s.start == s.end || py_strip(s.text).empty()) {
        s.text.clear();
        s.tokens.clear();
        s.words.clear();
      }
      all_tokens.insert(all_tokens.end(), s.tokens.begin(), s.tokens.end());
      if (o.on_segment) o.on_segment(s);
      out.segments.push_back(std::move(s));
    }
    if (!o.condition_on_previous_text || result.temperature > 0.5f) {
      prompt_reset_since = all_tokens.size();  // no prompt after a high temperature
    }
  }

  out.text =
      reference_decode(tokenizer, std::span<const int32_t>(all_tokens).subspan(n_initial_prompt));
  return out;
}

TranscribeResult transcribe(LogitsSource& source, const WhisperTokenizer& tokenizer,
                            std::span<const float> samples, const TranscribeOptions& options) {
  const Tensor mel = log_mel_spectrogram(samples, source.n_mels(), kChunkSamples);
  return transcribe_mel(source, tokenizer, mel, options);
}

TranscribeResult transcribe(WhisperSession& session, const WhisperTokenizer& tokenizer,
                            std::span<const float> samples, const TranscribeOptions& options) {
  SessionLogitsSource source(session);
  return transcribe(source, tokenizer, samples, options);
}

}  // namespace parley
