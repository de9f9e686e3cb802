#include "whisper/formats.h"

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

std::string format_transcript(const TranscribeResult& result, OutputFormat format,
                              const TranscriptInfo& info) {
  std::string out;
  switch (format) {
    case OutputFormat::txt:
      for (const auto& s : result.segments) out += strip(s.text) + "\n";
      return out;
    case OutputFormat::json: return nlohmann::json{{"text", json_text(result.text)}}.dump() + "\n";
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
      return doc.dump(2) + "\n";
    }
    case OutputFormat::srt: {
      int i = 1;
      for (const auto& s : result.segments)
        out += std::to_string(i++) + "\n" + format_timestamp(s.start, true, ',') + " --> " +
               format_timestamp(s.end, true, ',') + "\n" + subtitle_text(s.text) + "\n\n";
      return out;
    }
    case OutputFormat::vtt:
      out = "WEBVTT\n\n";
      for (const auto& s : result.segments)
        out += format_timestamp(s.start, false, '.') + " --> " +
               format_timestamp(s.end, false, '.') + "\n" + subtitle_text(s.text) + "\n\n";
      return out;
  }
  return out;
}

}  // namespace parley
