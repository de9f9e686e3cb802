#include "whisper/formats.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/error.h"

namespace parley {

namespace {

std::string strip(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  size_t b = 0, e = s.size();
  while (b < e && space(s[b])) ++b;
  while (e > b && space(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

std::string subtitle_text(const std::string& text) {
  std::string s = strip(text);
  for (size_t pos = 0; (pos = s.find("-->", pos)) != std::string::npos;) s.replace(pos, 3, "->");
  return s;
}

// Text as valid UTF-8 for JSON: invalid bytes (a token may end mid-character) become U+FFFD,
// as Python's decode(errors="replace") does.
nlohmann::json json_text(const std::string& s) {
  const auto dumped =
      nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return nlohmann::json::parse(dumped);
}

// OpenAI's include[]=logprobs shape: token text, log-probability, raw bytes.
// OpenAI's usage object of models billed by audio duration.
nlohmann::json usage_json(const TranscriptInfo& info) {
  return {{"type", "duration"}, {"seconds", std::round(info.duration * 1000.0) / 1000.0}};
}

nlohmann::json logprobs_array(const TranscribeResult& result) {
  nlohmann::json out = nlohmann::json::array();
  for (const TokenLogprob& t : result.logprobs) {
    nlohmann::json bytes = nlohmann::json::array();
    for (const char c : t.bytes) bytes.push_back(int(static_cast<unsigned char>(c)));
    out.push_back({{"token", json_text(t.bytes)}, {"logprob", t.logprob}, {"bytes", bytes}});
  }
  return out;
}

// Python's len() of UTF-8 text: code points.
int64_t py_len(std::string_view s) {
  int64_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

struct Cue {
  double start, end;
  std::string text;  // formatted later: start and end stay numbers until then
};

using Subtitle = std::vector<Word>;

// utils.py SubtitlesWriter.iterate_result's iterate_subtitles(): words grouped into
// subtitles, each word with its line breaks ("\n" before a word that starts a line).
std::vector<Subtitle> subtitles_from_words(const TranscribeResult& r, const TranscriptInfo& o) {
  const bool preserve_segments = o.max_line_count <= 0 || o.max_line_width <= 0;
  const int64_t max_line_width = o.max_line_width > 0 ? o.max_line_width : 1000;
  const size_t max_words_per_line = o.max_words_per_line > 0 ? size_t(o.max_words_per_line) : 1000;
  const bool has_line_count = o.max_line_count > 0;
  std::vector<Subtitle> out;
  Subtitle subtitle;
  int64_t line_len = 0;
  int line_count = 1;
  double last = r.segments.empty() ? 0.0 : r.segments[0].start;  // utils.py get_start
  for (const Segment& s : r.segments)
    if (!s.words.empty()) {
      last = s.words[0].start;
      break;
    }
  for (const Segment& segment : r.segments) {
    const size_t n = segment.words.size();
    size_t words_count = max_words_per_line;
    for (size_t chunk = 0; chunk < n; chunk += max_words_per_line) {
      if (max_words_per_line > n - chunk) words_count = n - chunk;
      const size_t end = std::min(n, chunk + words_count);
      for (size_t i = 0; chunk + i < end; ++i) {
        Word timing = segment.words[chunk + i];
        const bool long_pause = !preserve_segments && timing.start - last > 3.0;
        const bool has_room = line_len + py_len(timing.word) <= max_line_width;
        const bool seg_break = i == 0 && !subtitle.empty() && preserve_segments;
        if (line_len > 0 && has_room && !long_pause && !seg_break) {
          line_len += py_len(timing.word);  // the line goes on
        } else {
          timing.word = strip(timing.word);
          if ((!subtitle.empty() && has_line_count &&
               (long_pause || line_count >= o.max_line_count)) ||
              seg_break) {
            out.push_back(std::move(subtitle));  // a new subtitle
            subtitle.clear();
            line_count = 1;
          } else if (line_len > 0) {
            ++line_count;  // a new line
            timing.word = "\n" + timing.word;
          }
          line_len = py_len(strip(timing.word));
        }
        last = timing.start;
        subtitle.push_back(std::move(timing));
      }
    }
  }
  if (!subtitle.empty()) out.push_back(std::move(subtitle));
  return out;
}

// re.sub(r"^(\s*)(.*)$", r"\1<u>\2</u>", word)
std::string underline(const std::string& word) {
  size_t b = 0;
  while (b < word.size() && (word[b] == ' ' || word[b] == '\n' || word[b] == '\t')) ++b;
  return word.substr(0, b) + "<u>" + word.substr(b) + "</u>";
}

// The cues of srt / vtt: from the words when there are any (the reference's
// `"words" in segments[0]`), else one per segment (text stripped, "-->" -> "->").
std::vector<Cue> subtitle_cues(const TranscribeResult& r, const TranscriptInfo& info,
                               bool always_include_hours, char marker) {
  std::vector<Cue> cues;
  if (!info.words || r.segments.empty()) {
    for (const auto& s : r.segments) cues.push_back({s.start, s.end, subtitle_text(s.text)});
    return cues;
  }
  const auto fmt = [&](double t) { return format_timestamp(t, always_include_hours, marker); };
  for (const Subtitle& sub : subtitles_from_words(r, info)) {
    std::string text;
    for (const Word& w : sub) text += w.word;
    if (!info.highlight_words) {
      cues.push_back({sub.front().start, sub.back().end, text});
      continue;
    }
    // Highlighted: one cue per word, and the plain text over any gap between words (the
    // reference compares the formatted times).
    double last = sub.front().start;
    for (size_t i = 0; i < sub.size(); ++i) {
      if (fmt(last) != fmt(sub[i].start)) cues.push_back({last, sub[i].start, text});
      std::string marked;
      for (size_t j = 0; j < sub.size(); ++j)
        marked += j == i ? underline(sub[j].word) : sub[j].word;
      cues.push_back({sub[i].start, sub[i].end, marked});
      last = sub[i].end;
    }
  }
  return cues;
}

}  // namespace

OutputFormat parse_output_format(std::string_view name) {
  if (name == "txt" || name == "text") return OutputFormat::txt;
  if (name == "json") return OutputFormat::json;
  if (name == "verbose_json") return OutputFormat::verbose_json;
  if (name == "srt") return OutputFormat::srt;
  if (name == "vtt") return OutputFormat::vtt;
  throw Error(ErrorKind::invalid_argument, "[format] unknown output format '" + std::string(name) +
                                               "' (txt, json, verbose_json, srt, vtt)");
}

const char* output_extension(OutputFormat f) {
  switch (f) {
    case OutputFormat::txt: return "txt";
    case OutputFormat::json: return "json";
    case OutputFormat::verbose_json: return "json";
    case OutputFormat::srt: return "srt";
    case OutputFormat::vtt: return "vtt";
  }
  return "txt";
}

std::string logprobs_json(const TranscribeResult& result) { return logprobs_array(result).dump(); }

std::string format_transcript(const TranscribeResult& result, OutputFormat format,
                              const TranscriptInfo& info) {
  std::string out;
  switch (format) {
    case OutputFormat::txt:
      for (const auto& s : result.segments) out += strip(s.text) + "\n";
      return out;
    case OutputFormat::json: {
      nlohmann::json doc{{"text", json_text(result.text)}};
      if (!result.logprobs.empty()) doc["logprobs"] = logprobs_array(result);
      if (info.usage) doc["usage"] = usage_json(info);
      return doc.dump() + "\n";
    }
    case OutputFormat::verbose_json: {
      nlohmann::json segments = nlohmann::json::array();
      nlohmann::json words = nlohmann::json::array();
      for (const auto& s : result.segments) {
        segments.push_back({{"id", s.id},
                            {"seek", s.seek},
                            {"start", s.start},
                            {"end", s.end},
                            {"text", json_text(s.text)},
                            {"tokens", s.tokens},
                            {"temperature", s.temperature},
                            {"avg_logprob", s.avg_logprob},
                            {"compression_ratio", s.compression_ratio},
                            {"no_speech_prob", s.no_speech_prob}});
        if (!info.words) continue;
        nlohmann::json segment_words = nlohmann::json::array();
        for (const Word& w : s.words) {
          segment_words.push_back({{"word", json_text(w.word)},
                                   {"start", w.start},
                                   {"end", w.end},
                                   {"probability", w.probability}});
          words.push_back({{"word", json_text(strip(w.word))}, {"start", w.start}, {"end", w.end}});
        }
        segments.back()["words"] = std::move(segment_words);
      }
      nlohmann::json doc = {{"task", info.task},
                            {"language", result.language},
                            {"duration", info.duration},
                            {"text", json_text(result.text)},
                            {"segments", segments}};
      if (info.words) doc["words"] = std::move(words);
      if (info.usage) doc["usage"] = usage_json(info);
      return doc.dump(2) + "\n";
    }
    case OutputFormat::srt: {
      int i = 1;
      for (const Cue& c : subtitle_cues(result, info, true, ','))
        out += std::to_string(i++) + "\n" + format_timestamp(c.start, true, ',') + " --> " +
               format_timestamp(c.end, true, ',') + "\n" + c.text + "\n\n";
      return out;
    }
    case OutputFormat::vtt:
      out = "WEBVTT\n\n";
      for (const Cue& c : subtitle_cues(result, info, false, '.'))
        out += format_timestamp(c.start, false, '.') + " --> " +
               format_timestamp(c.end, false, '.') + "\n" + c.text + "\n\n";
      return out;
  }
  return out;
}

}  // namespace parley
