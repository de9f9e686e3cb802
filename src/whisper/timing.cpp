// Word timestamps. Reference: openai/whisper 20250625, whisper/timing.py,
// whisper/tokenizer.py (split_tokens_on_unicode / split_tokens_on_spaces) and
// whisper/transcribe.py (the block under `if word_timestamps:` in the seek loop).
#include "whisper/timing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "engine/error.h"
#include "whisper/alignment_heads.h"
#include "whisper/decoding.h"
#include "whisper/model.h"
#include "whisper/tokenizer.h"

namespace parley {

// --- LogitsSource hooks (declared in decoding.h) ---

CrossAttentionWeights LogitsSource::cross_attention_weights(std::span<const int32_t>,
                                                            std::span<const std::pair<int, int>>) {
  throw Error(ErrorKind::unsupported,
              "[whisper] word timestamps need the model's cross-attention weights, which this "
              "logits source does not provide");
}

CrossAttentionWeights SessionLogitsSource::cross_attention_weights(
    std::span<const int32_t> tokens, std::span<const std::pair<int, int>> heads) {
  if (!heads.empty()) return session_.cross_attention_weights(tokens, heads);
  const AlignmentHeads own = resolve_alignment_heads(session_.model().config());
  return session_.cross_attention_weights(tokens, own);
}

namespace {

constexpr double kTokensPerSecond = 50.0;  // audio.py TOKENS_PER_SECOND
// Python's `needle in haystack` for str: a substring test ("" is in everything).
bool py_in(std::string_view needle, std::string_view haystack) {
  return haystack.find(needle) != std::string_view::npos;
}

// Code points of valid UTF-8 (utf8_replace_invalid's output).
std::u32string code_points(std::string_view s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len && i + size_t(k) < s.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + size_t(k)]) & 0x3F);
    out.push_back(cp);
    i += size_t(len);
  }
  return out;
}

// tokenizer.decode_with_timestamps: tiktoken's decode with errors="replace".
std::string decode_replace(const WhisperTokenizer& tokenizer, std::span<const int32_t> ids) {
  return utf8_replace_invalid(tokenizer.decode_with_timestamps(ids));
}

WordSplit split_tokens_on_unicode(const WhisperTokenizer& tokenizer,
                                  std::span<const int32_t> tokens) {
  constexpr char32_t kReplacement = 0xFFFD;
  const std::u32string full = code_points(decode_replace(tokenizer, tokens));
  WordSplit out;
  std::vector<int32_t> current;
  size_t unicode_offset = 0;
  for (int32_t token : tokens) {
    current.push_back(token);
    const std::string decoded = decode_replace(tokenizer, current);
    const std::u32string cps = code_points(decoded);
    const size_t bad = cps.find(kReplacement);
    // A U+FFFD that the whole text has at the same place is a real one, not a character
    // cut between tokens.
    const bool complete =
        bad == std::u32string::npos ||
        (unicode_offset + bad < full.size() && full[unicode_offset + bad] == kReplacement);
    if (!complete) continue;
    out.words.push_back(decoded);
    out.tokens.push_back(std::move(current));
    current.clear();
    unicode_offset += cps.size();
  }
  return out;
}

WordSplit split_tokens_on_spaces(const WhisperTokenizer& tokenizer,
                                 std::span<const int32_t> tokens) {
  static constexpr std::string_view kPunctuation =  // Python's string.punctuation
      "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
  const WordSplit sub = split_tokens_on_unicode(tokenizer, tokens);
  WordSplit out;
  for (size_t i = 0; i < sub.words.size(); ++i) {
    const std::string& subword = sub.words[i];
    const bool special = sub.tokens[i][0] >= tokenizer.eot();
    const bool with_space = !subword.empty() && subword[0] == ' ';
    const bool punctuation = py_in(py_strip(subword), kPunctuation);
    if (special || with_space || punctuation || out.words.empty()) {
      out.words.push_back(subword);
      out.tokens.push_back(sub.tokens[i]);
    } else {
      out.words.back() += subword;
      out.tokens.back().insert(out.tokens.back().end(), sub.tokens[i].begin(), sub.tokens[i].end());
    }
  }
  return out;
}

// torch.sort order: NaN after every number.
bool nan_last_less(float a, float b) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return a < b;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;  // np.median
}

}  // namespace

void median_filter(std::span<float> x, int64_t rows, int64_t cols, int width) {
  check_arg(width > 0 && width % 2 == 1, "[whisper] median filter width must be odd");
  check_arg(int64_t(x.size()) == rows * cols, "[whisper] median filter: size mismatch");
  const int64_t pad = width / 2;
  if (cols <= pad) return;  // F.pad's reflect mode needs pad < cols
  std::vector<float> row(static_cast<size_t>(cols)), window(static_cast<size_t>(width));
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x.data() + r * cols;
    std::copy(xr, xr + cols, row.begin());
    for (int64_t c = 0; c < cols; ++c) {
      for (int64_t k = 0; k < width; ++k) {
        int64_t i = c - pad + k;
        if (i < 0) i = -i;  // reflect: no edge repeat
        if (i >= cols) i = 2 * (cols - 1) - i;
        window[size_t(k)] = row[size_t(i)];
      }
      std::nth_element(window.begin(), window.begin() + pad, window.end(), nan_last_less);
      xr[c] = window[size_t(pad)];
    }
  }
}

DtwPath dtw(std::span<const double> x, int64_t n, int64_t m) {
  check_arg(n > 0 && m > 0 && int64_t(x.size()) == n * m, "[whisper] dtw: bad cost matrix");
  const int64_t w = m + 1;
  // The reference keeps cost and trace in float32 arrays (x itself is float64).
  std::vector<float> cost(size_t((n + 1) * w), INFINITY);
  std::vector<int8_t> trace(size_t((n + 1) * w), -1);
  cost[0] = 0.0f;
  for (int64_t j = 1; j <= m; ++j) {
    for (int64_t i = 1; i <= n; ++i) {
      const float c0 = cost[size_t((i - 1) * w + j - 1)];
      const float c1 = cost[size_t((i - 1) * w + j)];
      const float c2 = cost[size_t(i * w + j - 1)];
      float c;
      int8_t t;
      if (c0 < c1 && c0 < c2) {
        c = c0, t = 0;
      } else if (c1 < c0 && c1 < c2) {
        c = c1, t = 1;
      } else {
        c = c2, t = 2;
      }
      cost[size_t(i * w + j)] = float(x[size_t((i - 1) * m + j - 1)] + double(c));
      trace[size_t(i * w + j)] = t;
    }
  }
  // backtrace
  for (int64_t j = 0; j <= m; ++j) trace[size_t(j)] = 2;
  for (int64_t i = 0; i <= n; ++i) trace[size_t(i * w)] = 1;
  DtwPath path;
  int64_t i = n, j = m;
  while (i > 0 || j > 0) {
    path.text_indices.push_back(int32_t(i - 1));
    path.time_indices.push_back(int32_t(j - 1));
    switch (trace[size_t(i * w + j)]) {
      case 0: --i, --j; break;
      case 1: --i; break;
      case 2: --j; break;
      default: throw Error(ErrorKind::internal, "[whisper] dtw: unexpected trace value");
    }
  }
  std::reverse(path.text_indices.begin(), path.text_indices.end());
  std::reverse(path.time_indices.begin(), path.time_indices.end());
  return path;
}

WordSplit split_to_word_tokens(const WhisperTokenizer& tokenizer, std::span<const int32_t> tokens,
                               std::string_view language) {
  for (std::string_view l : {"zh", "ja", "th", "lo", "my", "yue"})
    if (language == l) return split_tokens_on_unicode(tokenizer, tokens);
  return split_tokens_on_spaces(tokenizer, tokens);
}

void merge_punctuations(std::vector<WordTiming>& alignment, std::string_view prepended,
                        std::string_view appended) {
  // prepended punctuation joins the following word
  for (int64_t i = int64_t(alignment.size()) - 2, j = i + 1; i >= 0; --i) {
    WordTiming& previous = alignment[size_t(i)];
    WordTiming& following = alignment[size_t(j)];
    if (!previous.word.empty() && previous.word[0] == ' ' &&
        py_in(py_strip(previous.word), prepended)) {
      following.word = previous.word + following.word;
      following.tokens.insert(following.tokens.begin(), previous.tokens.begin(),
                              previous.tokens.end());
      previous.word.clear();
      previous.tokens.clear();
    } else {
      j = i;
    }
  }
  // appended punctuation joins the previous word
  for (size_t i = 0, j = 1; j < alignment.size(); ++j) {
    WordTiming& previous = alignment[i];
    WordTiming& following = alignment[j];
    const bool ends_with_space = !previous.word.empty() && previous.word.back() == ' ';
    if (!ends_with_space && py_in(following.word, appended)) {
      previous.word += following.word;
      previous.tokens.insert(previous.tokens.end(), following.tokens.begin(),
                             following.tokens.end());
      following.word.clear();
      following.tokens.clear();
    } else {
      i = j;
    }
  }
}

std::vector<WordTiming> find_alignment(LogitsSource& source, const WhisperTokenizer& tokenizer,
                                       std::span<const int32_t> sot_sequence,
                                       std::span<const int32_t> text_tokens, int num_frames,
                                       std::string_view language,
                                       const WordTimestampOptions& options) {
  if (text_tokens.empty()) return {};
  std::vector<int32_t> tokens(sot_sequence.begin(), sot_sequence.end());
  tokens.push_back(tokenizer.no_timestamps());
  tokens.insert(tokens.end(), text_tokens.begin(), text_tokens.end());
  tokens.push_back(tokenizer.eot());
  const int64_t t = int64_t(tokens.size()), n_sot = int64_t(sot_sequence.size());
  const int64_t n_text = int64_t(text_tokens.size());

  const CrossAttentionWeights cw = source.cross_attention_weights(tokens, options.alignment_heads);
  const int64_t n_heads = cw.qk.dim(0), n_ctx = cw.qk.dim(2), n_vocab = cw.logits.dim(1);
  // Under audio_ctx the attention covers n_ctx < 1500 positions: align within those.
  const int64_t frames = std::min<int64_t>(num_frames / 2, n_ctx);
  check_arg(n_heads > 0 && cw.qk.dim(1) == t && frames > 0 && frames <= n_ctx,
            "[whisper] find_alignment: " + std::to_string(num_frames) +
                " frames or the cross-attention weights " + cw.qk.describe() + " do not fit");

  // Probability of each text token: softmax over the text vocabulary (ids < eot) at the
  // position before it.
  std::vector<double> token_probs(static_cast<size_t>(n_text));
  const float* logits = cw.logits.data<float>();
  const int64_t n_text_vocab = std::min<int64_t>(tokenizer.eot(), n_vocab);
  for (int64_t i = 0; i < n_text; ++i) {
    const float* row = logits + (n_sot + i) * n_vocab;
    const float mx = *std::max_element(row, row + n_text_vocab);
    double sum = 0;
    for (int64_t v = 0; v < n_text_vocab; ++v) sum += std::exp(double(row[v]) - double(mx));
    token_probs[size_t(i)] =
        double(float(std::exp(double(row[text_tokens[size_t(i)]]) - double(mx)) / sum));
  }

  // weights [heads, T, frames]: softmax over the window's frames, then per (head, frame)
  // standardized over the tokens (population std), then median-filtered along time.
  std::vector<float> weights(size_t(n_heads * t * frames));
  const float* qk = cw.qk.data<float>();
  for (int64_t r = 0; r < n_heads * t; ++r) {
    const float* in = qk + r * n_ctx;
    float* out = weights.data() + r * frames;
    float mx = -INFINITY;
    for (int64_t f = 0; f < frames; ++f) mx = std::max(mx, in[f] * options.qk_scale);
    double sum = 0;
    for (int64_t f = 0; f < frames; ++f) {
      out[f] = std::exp(in[f] * options.qk_scale - mx);
      sum += out[f];
    }
    for (int64_t f = 0; f < frames; ++f) out[f] = float(out[f] / sum);
  }
  for (int64_t h = 0; h < n_heads; ++h) {
    float* w = weights.data() + h * t * frames;
    for (int64_t f = 0; f < frames; ++f) {
      double mean = 0, var = 0;
      for (int64_t k = 0; k < t; ++k) mean += w[k * frames + f];
      mean /= double(t);
      for (int64_t k = 0; k < t; ++k)
        var += (w[k * frames + f] - mean) * (w[k * frames + f] - mean);
      const float sd = float(std::sqrt(var / double(t))), mu = float(mean);
      for (int64_t k = 0; k < t; ++k) w[k * frames + f] = (w[k * frames + f] - mu) / sd;
    }
  }
  median_filter(weights, n_heads * t, frames, options.medfilt_width);

  // cost = -(mean over heads), rows n_sot .. T-2: <|notimestamps|> and the text tokens.
  const int64_t n_rows = t - n_sot - 1;
  std::vector<double> cost(size_t(n_rows * frames));
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t f = 0; f < frames; ++f) {
      float s = 0;
      for (int64_t h = 0; h < n_heads; ++h) s += weights[size_t((h * t + n_sot + r) * frames + f)];
      cost[size_t(r * frames + f)] = -double(s / float(n_heads));
    }
  }
  const DtwPath path = dtw(cost, n_rows, frames);

  std::vector<int32_t> with_eot(text_tokens.begin(), text_tokens.end());
  with_eot.push_back(tokenizer.eot());
  const WordSplit split = split_to_word_tokens(tokenizer, with_eot, language);
  if (split.tokens.size() <= 1) return {};

  // The first frame of each DTW row: a new text index is a "jump".
  std::vector<double> jump_times;
  for (size_t k = 0; k < path.text_indices.size(); ++k)
    if (k == 0 || path.text_indices[k] != path.text_indices[k - 1])
      jump_times.push_back(double(path.time_indices[k]) / kTokensPerSecond);

  std::vector<WordTiming> out;
  size_t boundary = 0;
  for (size_t w = 0; w + 1 < split.tokens.size(); ++w) {
    const size_t next = boundary + split.tokens[w].size();
    check(next < jump_times.size(), ErrorKind::internal, "[whisper] find_alignment: path");
    WordTiming word;
    word.word = split.words[w];
    word.tokens = split.tokens[w];
    word.start = jump_times[boundary];
    word.end = jump_times[next];
    double p = 0;
    for (size_t k = boundary; k < next; ++k) p += token_probs[k];
    word.probability = p / double(next - boundary);
    out.push_back(std::move(word));
    boundary = next;
  }
  return out;
}

double round2(double x) {
  // printf rounds the exact binary value correctly (halves to even), as Python's round.
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  return std::strtod(buf, nullptr);
}

void add_word_timestamps(std::span<Segment> segments, LogitsSource& source,
                         const WhisperTokenizer& tokenizer, std::span<const int32_t> sot_sequence,
                         int num_frames, std::string_view language,
                         const WordTimestampOptions& options, double last_speech_timestamp) {
  if (segments.empty()) return;
  std::vector<size_t> text_counts;
  std::vector<int32_t> text_tokens;
  for (const Segment& s : segments) {
    size_t n = 0;
    for (int32_t tok : s.tokens)
      if (tok < tokenizer.eot()) text_tokens.push_back(tok), ++n;
    text_counts.push_back(n);
  }
  std::vector<WordTiming> alignment =
      find_alignment(source, tokenizer, sot_sequence, text_tokens, num_frames, language, options);
  std::vector<double> durations;
  for (const WordTiming& w : alignment)
    if (w.end - w.start != 0) durations.push_back(w.end - w.start);
  const double median_duration = std::min(0.7, durations.empty() ? 0.0 : median_of(durations));
  const double max_duration = median_duration * 2;

  // Truncate long words at sentence boundaries.
  if (!durations.empty()) {
    static constexpr std::string_view kSentenceEnd = ".\u3002!\uff01?\uff1f";
    for (size_t i = 1; i < alignment.size(); ++i) {
      if (alignment[i].end - alignment[i].start <= max_duration) continue;
      if (py_in(alignment[i].word, kSentenceEnd))
        alignment[i].end = alignment[i].start + max_duration;
      else if (py_in(alignment[i - 1].word, kSentenceEnd))
        alignment[i].start = alignment[i].end - max_duration;
    }
  }
  merge_punctuations(alignment, options.prepend_punctuations, options.append_punctuations);

  const double time_offset = frame_time(segments[0].seek);
  size_t word_index = 0;
  for (size_t si = 0; si < segments.size(); ++si) {
    Segment& segment = segments[si];
    std::vector<Word> words;
    for (size_t saved = 0; word_index < alignment.size() && saved < text_counts[si]; ++word_index) {
      const WordTiming& timing = alignment[word_index];
      if (!timing.word.empty())
        words.push_back({timing.word, round2(time_offset + timing.start),
                         round2(time_offset + timing.end), timing.probability});
      saved += timing.tokens.size();
    }
    if (!words.empty()) {
      // The first and second word after a pause are at most twice the median duration.
      if (words[0].end - last_speech_timestamp > median_duration * 4 &&
          (words[0].end - words[0].start > max_duration ||
           (words.size() > 1 && words[1].end - words[0].start > max_duration * 2))) {
        if (words.size() > 1 && words[1].end - words[1].start > max_duration) {
          const double boundary = std::max(words[1].end / 2, words[1].end - max_duration);
          words[0].end = words[1].start = boundary;
        }
        words[0].start = std::max(0.0, words[0].end - max_duration);
      }
      // Prefer the segment's own start / end when the first / last word is too long.
      if (segment.start < words[0].end && segment.start - 0.5 > words[0].start) {
        words[0].start = std::max(0.0, std::min(words[0].end - median_duration, segment.start));
      } else {
        segment.start = words[0].start;
      }
      if (segment.end > words.back().start && segment.end + 0.5 < words.back().end) {
        words.back().end = std::max(words.back().start + median_duration, segment.end);
      } else {
        segment.end = words.back().end;
      }
      last_speech_timestamp = segment.end;
    }
    segment.words = std::move(words);
  }
}

namespace {

// utils.py get_end: the last word's end, else the last segment's end.
std::optional<double> get_end(std::span<const Segment> segments) {
  for (size_t i = segments.size(); i-- > 0;)
    if (!segments[i].words.empty()) return segments[i].words.back().end;
  if (segments.empty()) return std::nullopt;
  return segments.back().end;
}

double word_anomaly_score(const Word& word) {
  const double duration = word.end - word.start;
  double score = 0;
  if (word.probability < 0.15) score += 1.0;
  if (duration < 0.133) score += (0.133 - duration) * 15;
  if (duration > 2.0) score += duration - 2.0;
  return score;
}

const Segment* next_words_segment(std::span<const Segment> segments) {
  for (const Segment& s : segments)
    if (!s.words.empty()) return &s;
  return nullptr;
}

}  // namespace

bool is_segment_anomaly(const Segment* segment) {
  static constexpr std::string_view kPunctuation =  // transcribe.py `punctuation`
      "\"'\u201c\u00bf([{-\"'.\u3002,\uff0c!\uff01?\uff1f:\uff1a\u201d)]}\u3001";
  if (segment == nullptr || segment->words.empty()) return false;
  double score = 0;
  int n = 0;
  for (const Word& w : segment->words) {
    if (py_in(w.word, kPunctuation)) continue;
    if (n == 8) break;
    score += word_anomaly_score(w);
    ++n;
  }
  return score >= 3 || score + 0.01 >= n;
}

bool window_word_timestamps(std::vector<Segment>& segments, WindowWordState& st,
                            LogitsSource& source, const WhisperTokenizer& tokenizer,
                            std::span<const int32_t> sot_sequence, std::string_view language,
                            const WordTimestampOptions& options,
                            std::optional<float> hallucination_silence_threshold) {
  add_word_timestamps(segments, source, tokenizer, sot_sequence, int(st.segment_size), language,
                      options, st.last_speech_timestamp);
  const double time_offset = frame_time(st.previous_seek);
  const double window_end_time = frame_time(st.previous_seek + 3000);
  const double segment_duration = frame_time(st.segment_size);
  const double content_duration = frame_time(st.content_frames);
  const size_t n = st.tokens.size();
  const int32_t ts = tokenizer.timestamp_begin();
  const bool single_timestamp_ending = n >= 2 && st.tokens[n - 2] < ts && st.tokens[n - 1] >= ts;
  const auto to_frames = [](double seconds) { return int64_t(std::nearbyint(seconds * 100)); };

  if (!single_timestamp_ending) {
    const auto last_word_end = get_end(segments);
    if (last_word_end && *last_word_end > time_offset) st.seek = to_frames(*last_word_end);
  }
  if (hallucination_silence_threshold) {
    const double threshold = *hallucination_silence_threshold;
    if (!single_timestamp_ending) {
      const auto last_word_end = get_end(segments);
      if (last_word_end && *last_word_end > time_offset) {
        const double remaining_duration = window_end_time - *last_word_end;
        st.seek = remaining_duration > threshold ? to_frames(*last_word_end)
                                                 : st.previous_seek + st.segment_size;
      }
    }
    // A first segment that might be a hallucination: skip the silence before it.
    const Segment* first = next_words_segment(segments);
    if (first != nullptr && is_segment_anomaly(first)) {
      const double gap = first->start - time_offset;
      if (gap > threshold) {
        st.seek = st.previous_seek + to_frames(gap);
        return false;
      }
    }
    // Skip the silence before a possible hallucination surrounded by silence or by more
    // hallucinations, and drop it and what follows.
    double hal_last_end = st.last_speech_timestamp;
    for (size_t si = 0; si < segments.size(); ++si) {
      const Segment& segment = segments[si];
      if (segment.words.empty()) continue;
      if (is_segment_anomaly(&segment)) {
        const Segment* next =
            next_words_segment(std::span<const Segment>(segments).subspan(si + 1));
        const double hal_next_start =
            next != nullptr ? next->words[0].start : time_offset + segment_duration;
        const bool silence_before = segment.start - hal_last_end > threshold ||
                                    segment.start < threshold || segment.start - time_offset < 2.0;
        const bool silence_after = hal_next_start - segment.end > threshold ||
                                   is_segment_anomaly(next) || window_end_time - segment.end < 2.0;
        if (silence_before && silence_after) {
          st.seek = to_frames(std::max(time_offset + 1, segment.start));
          if (content_duration - segment.end < threshold) st.seek = st.content_frames;
          segments.erase(segments.begin() + int64_t(si), segments.end());
          break;
        }
      }
      hal_last_end = segment.end;
    }
  }
  if (const auto last_word_end = get_end(segments)) st.last_speech_timestamp = *last_word_end;
  return true;
}

}  // namespace parley
