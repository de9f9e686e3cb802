#include "server/audio_request.h"

#include "text/base64.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "server/api_error.h"
#include "server/multipart.h"
#include "text/base64.h"

namespace parley::server {
namespace {

// Every field but `file`, as strings: multipart values as sent; JSON scalars as text
// (true/false, numbers), arrays as one value per element, objects as their JSON text.
// Keys lose a trailing "[]" (OpenAI's SDKs send arrays as `name[]`).
using Fields = std::map<std::string, std::vector<std::string>>;

struct RawRequest {
  Fields fields;
  std::optional<std::vector<uint8_t>> audio;
  std::string filename;
};

std::string field_key(std::string name) {
  if (name.size() > 2 && name.ends_with("[]")) name.resize(name.size() - 2);
  return name;
}

RawRequest from_multipart(std::string_view content_type, std::string_view body) {
  RawRequest raw;
  std::vector<MultipartPart> parts;
  try {
    parts = parse_multipart(body, multipart_boundary(content_type));
  } catch (const Error& e) {
    throw ApiException(bad_request(e.what(), std::nullopt, "invalid_multipart"));
  }
  for (const auto& p : parts) {
    if (p.name == "file") {
      if (raw.audio) throw ApiException(bad_request("[request] more than one 'file' part", "file"));
      raw.audio.emplace(p.data.begin(), p.data.end());
      raw.filename = p.filename;
      continue;
    }
    raw.fields[field_key(p.name)].emplace_back(p.data);
  }
  return raw;
}

RawRequest from_json(std::string_view body) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    throw ApiException(bad_request(std::string("[request] body is not valid JSON: ") + e.what(),
                                   std::nullopt, "invalid_json"));
  }
  if (!doc.is_object()) throw ApiException(bad_request("[request] JSON body must be an object"));
  RawRequest raw;
  for (const auto& [key, value] : doc.items()) {
    if (key == "file") {
      if (!value.is_object() || !value.contains("data") || !value["data"].is_string()) {
        throw ApiException(bad_request(
            "[request] 'file' must be an object {\"data\": \"<base64>\", \"filename\": \"x.wav\"}",
            "file"));
      }
      const auto bytes = base64_decode(value["data"].get<std::string>(),
                                       {.skip_whitespace = true, .require_padding = false});
      if (!bytes)
        throw ApiException(bad_request("[request] 'file.data' is not valid base64", "file"));
      raw.audio.emplace(bytes->begin(), bytes->end());
      if (value.contains("filename")) {
        if (!value["filename"].is_string())
          throw ApiException(bad_request("[request] 'file.filename' must be a string", "file"));
        raw.filename = value["filename"].get<std::string>();
      }
      continue;
    }
    auto& out = raw.fields[field_key(key)];
    const auto add = [&](const nlohmann::json& v) {
      if (v.is_string()) {
        out.push_back(v.get<std::string>());
      } else if (v.is_null()) {
        // null: as if absent (the SDKs send none; some clients do)
      } else {
        out.push_back(v.dump());
      }
    };
    if (value.is_array()) {
      for (const auto& v : value) add(v);
    } else {
      add(value);
    }
    if (out.empty()) raw.fields.erase(field_key(key));
  }
  return raw;
}

// The one value of a field (the last when repeated, as form parsers do), or nullopt.
std::optional<std::string> single(const Fields& f, const std::string& key) {
  const auto it = f.find(key);
  if (it == f.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

bool parse_bool(const std::string& v, const std::string& param) {
  std::string s = v;
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  if (s == "true" || s == "1") return true;
  if (s == "false" || s == "0") return false;
  throw ApiException(bad_request("[request] '" + param + "' must be true or false, got '" + v + "'",
                                 param, "invalid_value"));
}

ApiError not_yet(const std::string& what, const std::string& param) {
  return bad_request("[request] " + what + " is not supported yet by this parley server", param,
                     "unsupported");
}

// OpenAI's fields for the route, and parley's extras (docs/SERVER.md).
const std::vector<std::string>& known_fields(const std::string& task) {
  static const std::vector<std::string> transcribe = {
      "model",           "language",    "prompt",
      "response_format", "temperature", "timestamp_granularities",
      "stream",          "include",     "chunking_strategy",
      "beam_size",       "hotwords",    "vad"};
  static const std::vector<std::string> translate = {
      "model", "prompt", "response_format", "temperature", "beam_size", "hotwords", "vad"};
  return task == "translate" ? translate : transcribe;
}

void apply_extras(const Fields& f, AudioRequest& r) {
  if (const auto v = single(f, "beam_size")) {
    const double b = parse_number(*v, "beam_size");
    if (b != std::floor(b) || b < 1 || b > 16)
      throw ApiException(bad_request("[request] 'beam_size' must be an integer in [1, 16]",
                                     "beam_size", "invalid_value"));
    r.beam_size = int(b);
  }
  if (const auto v = single(f, "hotwords"); v && !v->empty()) r.hotwords = *v;
  if (const auto v = single(f, "vad")) r.vad = parse_bool(*v, "vad");
}

AudioRequest validate(RawRequest raw, const std::string& task) {
  const auto& known = known_fields(task);
  for (const auto& [key, values] : raw.fields) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      throw ApiException(
          bad_request("Unrecognized request argument supplied: " + key, key, "unknown_parameter"));
    }
  }
  const Fields& f = raw.fields;
  if (!raw.audio) {
    throw ApiException(bad_request("[request] no audio: the request needs a 'file' field", "file",
                                   "missing_file"));
  }
  if (raw.audio->empty())
    throw ApiException(bad_request("[request] the uploaded 'file' is empty", "file", "empty_file"));

  AudioRequest r;
  r.task = task;
  r.audio = std::move(*raw.audio);
  r.filename = raw.filename.empty() ? "upload" : raw.filename;
  const auto model = single(f, "model");
  if (!model || model->empty()) {
    throw ApiException(
        bad_request("[request] you must provide a 'model' parameter", "model", "missing_model"));
  }
  r.model = *model;
  if (const auto v = single(f, "language"); v && !v->empty()) r.language = *v;
  if (const auto v = single(f, "prompt"); v && !v->empty()) r.prompt = *v;
  if (const auto v = single(f, "response_format")) {
    check_response_format(*v);
    r.response_format = *v;
  }
  if (const auto v = single(f, "temperature")) {
    const double t = parse_number(*v, "temperature");
    if (t < 0 || t > 1) {
      throw ApiException(bad_request("[request] 'temperature' must be in [0, 1], got " + *v,
                                     "temperature", "invalid_value"));
    }
    r.temperature = float(t);
  }
  if (const auto v = single(f, "stream")) r.stream = parse_bool(*v, "stream");
  if (const auto it = f.find("timestamp_granularities"); it != f.end()) {
    for (const auto& g : it->second) {
      if (g == "segment") {
        r.segment_timestamps = true;
      } else if (g == "word") {
        r.word_timestamps = true;
      } else {
        throw ApiException(bad_request(
            "[request] 'timestamp_granularities[]' values are 'segment' or 'word', got '" + g + "'",
            "timestamp_granularities", "invalid_value"));
      }
    }
    if (r.response_format != "verbose_json") {
      throw ApiException(
          bad_request("[request] timestamp_granularities[] needs response_format=verbose_json",
                      "timestamp_granularities", "invalid_value"));
    }
  }
  if (const auto it = f.find("include"); it != f.end()) {
    for (const auto& v : it->second) {
      if (v == "logprobs") {
        r.logprobs = true;
        continue;
      }
      throw ApiException(bad_request("[request] unknown 'include[]' value '" + v + "'", "include",
                                     "invalid_value"));
    }
  }
  if (r.logprobs && !r.stream && r.response_format != "json") {
    throw ApiException(bad_request("[request] include[]=logprobs needs response_format=json",
                                   "include", "invalid_value"));
  }
  if (const auto v = single(f, "chunking_strategy"); v && *v != "auto" && *v != "\"auto\"") {
    // {"type": "server_vad", ...} would cut the audio at the VAD's silences; parley's VAD
    // is the `vad` gate (and `parley transcribe --vad-filter`), not this chunking yet.
    throw ApiException(
        not_yet("chunking_strategy other than \"auto\" (server_vad)", "chunking_strategy"));
  }
  apply_extras(f, r);
  return r;
}

}  // namespace

double parse_number(const std::string& v, const std::string& param) {
  double x = 0;
  const char* end = v.data() + v.size();
  const auto [ptr, ec] = std::from_chars(v.data(), end, x);
  if (ec != std::errc() || ptr != end || !std::isfinite(x)) {
    throw ApiException(bad_request("[request] '" + param + "' must be a number, got '" + v + "'",
                                   param, "invalid_value"));
  }
  return x;
}

void check_response_format(const std::string& v) {
  static const std::vector<std::string> formats = {"json", "text", "srt", "verbose_json", "vtt"};
  if (std::find(formats.begin(), formats.end(), v) == formats.end()) {
    throw ApiException(bad_request(
        "[request] 'response_format' must be one of json, text, srt, verbose_json, vtt; got '" + v +
            "'",
        "response_format", "invalid_value"));
  }
}

AudioRequest parse_audio_request(std::string_view content_type, std::string_view body,
                                 const std::string& task) {
  std::string type(content_type.substr(0, content_type.find(';')));
  type.erase(
      std::remove_if(type.begin(), type.end(), [](unsigned char c) { return std::isspace(c); }),
      type.end());
  std::transform(type.begin(), type.end(), type.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  if (type == "multipart/form-data") return validate(from_multipart(content_type, body), task);
  if (type == "application/json") return validate(from_json(body), task);
  throw ApiException(ApiError{415,
                              "[request] Content-Type must be multipart/form-data or "
                              "application/json, got '" +
                                  type + "'",
                              "invalid_request_error", std::nullopt, "unsupported_media_type"});
}

TranscribeOptions transcribe_options(const AudioRequest& r) {
  TranscribeOptions o;
  o.task = r.task;
  o.language = r.language;
  o.initial_prompt = r.prompt;
  // OpenAI: temperature 0 means "automatic": the fallback ladder (TranscribeOptions'
  // default, 0, 0.2 .. 1.0); above 0, that temperature only.
  if (r.temperature > 0) o.temperatures = {r.temperature};
  o.beam_size = r.beam_size > 1 ? r.beam_size : 0;
  o.hotwords = r.hotwords;
  o.word_timestamps = r.word_timestamps;
  o.token_logprobs = r.logprobs;
  return o;
}

OutputFormat output_format(const AudioRequest& r) { return parse_output_format(r.response_format); }

}  // namespace parley::server
