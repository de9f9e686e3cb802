// Transcript output formats shared by `parley transcribe` and the server: txt, json,
// verbose_json (OpenAI's audio API shapes, WHISPER.md), srt and vtt (as openai/whisper's
// whisper/utils.py writers: SRT numbered with "HH:MM:SS,mmm", VTT "MM:SS.mmm" below an
// hour, each text stripped and "-->" replaced by "->").
#pragma once

#include <string>
#include <string_view>

#include "whisper/transcribe.h"

namespace parley {

enum class OutputFormat { txt, json, verbose_json, srt, vtt };

// "txt" (also "text"), "json", "verbose_json", "srt", "vtt"; throws invalid_argument.
OutputFormat parse_output_format(std::string_view name);
// The file extension: "txt", "json", "json", "srt", "vtt".
const char* output_extension(OutputFormat f);

struct TranscriptInfo {
  std::string task = "transcribe";
  double duration = 0;  // seconds of audio
  // verbose_json gets "words": per segment as the reference's result ({word, start, end,
  // probability}, the word with its leading space) and for the whole transcript as
  // OpenAI's API ({word, start, end}, the word stripped).
  bool words = false;
  // With words, srt and vtt are made of them as openai/whisper's SubtitlesWriter
  // (utils.py iterate_result): one subtitle per segment unless both max_line_width and
  // max_line_count are set; 0 means unset, as the reference's `or` defaults.
  int max_line_width = 0;        // characters (code points) per line
  int max_line_count = 0;        // lines per subtitle
  int max_words_per_line = 0;    // words per subtitle line (no effect with max_line_width)
  bool highlight_words = false;  // one cue per word with that word in <u></u>
  // json and verbose_json get OpenAI's "usage": {"type": "duration", "seconds": duration}
  // (the server's responses; the reference's files have none).
  bool usage = false;
};

// TranscribeResult::logprobs as OpenAI's JSON array ([{"token", "logprob", "bytes"}]): the
// json format's "logprobs", and the server's transcript.text.done event.
std::string logprobs_json(const TranscribeResult& result);

std::string format_transcript(const TranscribeResult& result, OutputFormat format,
                              const TranscriptInfo& info);

}  // namespace parley
