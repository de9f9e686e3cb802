// One /v1/audio/transcriptions or /v1/audio/translations request, parsed and validated
// from either body the server accepts: multipart/form-data (OpenAI's fields) or JSON with
// the audio in base64 ({"file": {"data": "<base64>", "filename": "x.mp3"}, ...}). Every
// field is checked here, before any work is queued; a bad one throws ApiException (400,
// OpenAI's error shape, `param` naming the field). docs/SERVER.md lists the fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "whisper/formats.h"
#include "whisper/transcribe.h"

namespace parley::server {

struct AudioRequest {
  std::string task = "transcribe";  // "transcribe" | "translate" (the route)
  std::vector<uint8_t> audio;       // the uploaded file, as sent
  std::string filename;             // its name: a format hint for the decoder
  std::string model;
  std::optional<std::string> language;
  std::optional<std::string> prompt;
  std::string response_format = "json";  // json | text | srt | verbose_json | vtt
  float temperature = 0;
  bool stream = false;
  bool segment_timestamps = false;  // timestamp_granularities[] contained "segment"
  bool word_timestamps = false;     // timestamp_granularities[] contained "word"
  bool logprobs = false;            // include[] contained "logprobs"
  // parley's extra fields (docs/SERVER.md).
  int beam_size = 0;                    // 0 or 1: greedy; > 1: beam search at temperature 0
  std::optional<std::string> hotwords;  // vocabulary hints (TranscribeOptions::hotwords)
  std::optional<bool> vad;              // nullopt: the server's default (`--vad`)
};

// The request's TranscribeOptions (language, task, prompt, temperature: 0 keeps the
// fallback ladder 0, 0.2 .. 1.0 as OpenAI's "automatic" temperature, > 0 decodes at that
// temperature only; beam_size, hotwords, word timestamps).
TranscribeOptions transcribe_options(const AudioRequest& r);
OutputFormat output_format(const AudioRequest& r);

// content_type: the request's Content-Type header; task: "transcribe" or "translate".
// Throws ApiException: 415 for a body that is neither multipart/form-data nor JSON, 400 for
// malformed bodies, missing or invalid fields, unknown fields, and parley features this
// build does not have yet.
AudioRequest parse_audio_request(std::string_view content_type, std::string_view body,
                                 const std::string& task);

// A form or query field's number (finite), else ApiException 400 naming `param`.
double parse_number(const std::string& v, const std::string& param);
// json, text, srt, verbose_json or vtt, else ApiException 400 naming response_format.
void check_response_format(const std::string& v);

}  // namespace parley::server
