// `parley dictate --server URL`: an utterance sent to a running parley (or any
// OpenAI-compatible) server as POST /v1/audio/transcriptions, multipart/form-data with the
// audio as a 16-bit WAV file, over plain HTTP/1.1 (loopback or LAN; no TLS).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace parley::dictate {

struct HttpEndpoint {
  std::string host;
  int port = 80;
  std::string path;  // the transcription route
};
// "http://host[:port][/prefix]" -> the route prefix + "/v1/audio/transcriptions" (a prefix
// already ending in /v1 gets "/audio/transcriptions"). Error(invalid_argument) for another
// scheme (https included) or a malformed URL.
HttpEndpoint transcription_endpoint(const std::string& url);

// 16 kHz mono float samples as a RIFF/WAVE PCM s16 file (clipped to [-1, 1]).
std::string wav_pcm16(std::span<const float> samples, int sample_rate);

struct RemoteOptions {
  std::string url;
  std::string api_key;  // sent as "Authorization: Bearer" when not empty
  std::string model = "whisper-1";
  std::string language;  // empty: the server's choice
  double timeout_s = 120;
};

// The transcript ("text" of the JSON answer). Error(internal) naming the server's
// error message for a non-2xx answer, Error(not_found) when nothing answers at the URL.
std::string transcribe_remote(const RemoteOptions& o, std::span<const float> samples);

}  // namespace parley::dictate
