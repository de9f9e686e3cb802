// Reference: openai/whisper whisper/decoding.py (DecodingTask, GreedyDecoder,
// detect_language) and whisper/utils.py (compression_ratio).
#include "whisper/decoding.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/error.h"
#include "whisper/logit_filters.h"
#include "whisper/model.h"
#include "whisper/tokenizer.h"

namespace parley {
namespace {

// log(sum(exp(row))) in double.
double logsumexp(std::span<const float> row) {
  float m = -std::numeric_limits<float>::infinity();
  for (float x : row) m = std::max(m, x);
  if (std::isinf(m)) return double(m);
  double sum = 0;
  for (float x : row) sum += std::exp(double(x) - double(m));
  return double(m) + std::log(sum);
}

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
  check(o.temperature == 0.0f, ErrorKind::unsupported,
        "[whisper] only greedy decoding (temperature 0) is implemented, got temperature " +
            std::to_string(o.temperature));
  check_arg(o.sample_len >= 0, "[whisper] sample_len must be >= 0");
  for (const auto* ids : {&o.prompt, &o.prefix}) {
    for (int32_t t : *ids) {
      check_arg(t >= 0 && t < tokenizer.n_vocab(), "[whisper] prompt/prefix token " +
                                                       std::to_string(t) + " is outside [0, " +
                                                       std::to_string(tokenizer.n_vocab()) + ")");
    }
  }
}

}  // namespace

void SessionLogitsSource::encode(const Tensor& mel) { session_.encode(mel); }
Tensor SessionLogitsSource::decode(std::span<const int32_t> tokens) {
  return session_.decode(tokens);
}
void SessionLogitsSource::reset() { session_.reset(); }
int SessionLogitsSource::n_text_ctx() const { return session_.model().config().n_text_ctx; }
int SessionLogitsSource::n_mels() const { return session_.model().config().n_mels; }

std::vector<int32_t> initial_tokens(const WhisperTokenizer& tokenizer,
                                    const DecodingOptions& options,
                                    const std::optional<std::string>& language, int n_text_ctx) {
  std::vector<int32_t> tokens;
  if (!options.prompt.empty()) {
    tokens.push_back(tokenizer.sot_prev());
    const auto prompt = py_tail(options.prompt, n_text_ctx / 2 - 1);
    tokens.insert(tokens.end(), prompt.begin(), prompt.end());
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

DecodingResult decode_encoded(LogitsSource& source, const WhisperTokenizer& tokenizer,
                              const DecodingOptions& options) {
  check_options(tokenizer, options);
  const int n_ctx = source.n_text_ctx();
  const int sample_len = options.sample_len > 0 ? options.sample_len : n_ctx / 2;

  DecodingResult result;
  result.temperature = options.temperature;
  std::optional<std::string> language = options.language;
  if (!language && !tokenizer.multilingual()) language = "en";
  if (!language) language = detect_language(source, tokenizer).code;
  result.language = *language;

  std::vector<int32_t> tokens = initial_tokens(tokenizer, options, language, n_ctx);
  check_arg(int(tokens.size()) < n_ctx, "[whisper] " + std::to_string(tokens.size()) +
                                            " initial tokens leave no room in a context of " +
                                            std::to_string(n_ctx));
  const int sample_begin = int(tokens.size());
  const int sot_index =
      int(std::find(tokens.begin(), tokens.end(), tokenizer.sot()) - tokens.begin());

  LogitFilterSettings fs;
  fs.suppress_blank = options.suppress_blank;
  fs.suppress_tokens = options.suppress_tokens;
  fs.without_timestamps = options.without_timestamps;
  fs.max_initial_timestamp = options.max_initial_timestamp;
  const auto filters = make_logit_filters(tokenizer, fs, sample_begin);

  source.reset();
  float sum_logprobs = 0;  // f32, as the reference's sum_logprobs tensor
  std::vector<float> row;
  for (int i = 0; i < sample_len; ++i) {
    check(!options.cancelled || !options.cancelled(), ErrorKind::cancelled,
          "[whisper] decoding cancelled");
    const Tensor logits =
        i == 0 ? source.decode(tokens) : source.decode(std::span<const int32_t>(&tokens.back(), 1));
    const int64_t want_rows = i == 0 ? int64_t(tokens.size()) : 1;
    if (logits.ndim() != 2 || logits.dim(0) != want_rows || logits.dim(1) != tokenizer.n_vocab()) {
      throw Error(ErrorKind::internal, "[whisper] decoder returned logits " + logits.describe() +
                                           ", expected [" + std::to_string(want_rows) + ", " +
                                           std::to_string(tokenizer.n_vocab()) + "]");
    }
    if (i == 0) {
      const auto at_sot = row_of(logits, sot_index);
      result.no_speech_prob =
          float(std::exp(double(at_sot[size_t(tokenizer.no_speech())]) - logsumexp(at_sot)));
    }
    const auto last = row_of(logits, logits.dim(0) - 1);
    row.assign(last.begin(), last.end());
    for (const auto& f : filters) f->apply(row, tokens);

    const int32_t next = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
    sum_logprobs += float(double(row[size_t(next)]) - logsumexp(row));
    tokens.push_back(next);
    if (options.on_token) options.on_token(next);
    if (next == tokenizer.eot() || int(tokens.size()) > n_ctx) break;
  }
  source.reset();

  const auto eot = std::find(tokens.begin() + sample_begin, tokens.end(), tokenizer.eot());
  result.tokens.assign(tokens.begin() + sample_begin, eot);
  result.text = py_strip(reference_decode(tokenizer, result.tokens));
  result.avg_logprob = float(double(sum_logprobs) / double(result.tokens.size() + 1));
  result.compression_ratio = compression_ratio(result.text);
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
