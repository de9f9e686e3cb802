// Request parsing without a server: multipart splitting, base64, field validation, and the
// streaming text splitter (a UTF-8 character cut across tokens).
#include <gtest/gtest.h>

#include <string>

#include "engine/error.h"
#include "server/api_error.h"
#include "server/audio_request.h"
#include "server/multipart.h"
#include "serving/whisper_service.h"

namespace parley::server {
namespace {

std::string form(const std::string& boundary, const std::string& extra_field = "") {
  std::string b = "--" + boundary + "\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n" +
                  "whisper-1\r\n";
  if (!extra_field.empty())
    b += "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + extra_field +
         "\"\r\n\r\nx\r\n";
  b += "--" + boundary +
       "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a \\\"b\\\".wav\"\r\n"
       "Content-Type: audio/wav\r\n\r\nRIFF\r\n--not-the-boundary\r\n--" +
       boundary + "--\r\n";
  return b;
}

TEST(Multipart, SplitsPartsAndKeepsBinaryData) {
  const std::string body = form("XyZ");
  const auto parts = parse_multipart(body, multipart_boundary("multipart/form-data; boundary=XyZ"));
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].name, "model");
  EXPECT_EQ(parts[0].data, "whisper-1");
  EXPECT_FALSE(parts[0].has_filename);
  EXPECT_EQ(parts[1].name, "file");
  EXPECT_EQ(parts[1].filename, "a \"b\".wav");
  EXPECT_EQ(parts[1].content_type, "audio/wav");
  EXPECT_EQ(parts[1].data, "RIFF\r\n--not-the-boundary");
}

TEST(Multipart, QuotedBoundaryAndCase) {
  EXPECT_EQ(multipart_boundary("Multipart/Form-Data; charset=utf-8; BOUNDARY=\"a b\""), "a b");
}

TEST(Multipart, RejectsEveryTruncation) {
  const std::string body = form("B");
  // Any cut before the closing delimiter's end leaves a part unclosed or no delimiter.
  for (size_t n = 0; n + 4 < body.size(); ++n) {
    EXPECT_THROW(parse_multipart(std::string_view(body).substr(0, n), "B"), Error) << n;
  }
  EXPECT_THROW(multipart_boundary("multipart/form-data"), Error);
  EXPECT_THROW(multipart_boundary("application/json; boundary=x"), Error);
}

int status_of(const std::string& ctype, const std::string& body, const std::string& task) {
  try {
    parse_audio_request(ctype, body, task);
  } catch (const ApiException& e) {
    return e.error().status;
  }
  return 200;
}

TEST(AudioRequest, FieldsFromMultipartAndJson) {
  const AudioRequest r =
      parse_audio_request("multipart/form-data; boundary=B", form("B"), "transcribe");
  EXPECT_EQ(r.model, "whisper-1");
  EXPECT_EQ(r.response_format, "json");
  EXPECT_EQ(std::string(r.audio.begin(), r.audio.end()), "RIFF\r\n--not-the-boundary");

  const AudioRequest j = parse_audio_request(
      "application/json",
      R"({"model":"m","file":{"data":"UklGRg==","filename":"x.wav"},"temperature":0,)"
      R"("stream":true,"language":"en","prompt":"p","response_format":"verbose_json",)"
      R"("timestamp_granularities":["segment"]})",
      "transcribe");
  EXPECT_EQ(std::string(j.audio.begin(), j.audio.end()), "RIFF");
  EXPECT_EQ(j.filename, "x.wav");
  EXPECT_TRUE(j.stream);
  EXPECT_TRUE(j.segment_timestamps);
  EXPECT_EQ(j.language.value_or(""), "en");
  const TranscribeOptions o = transcribe_options(j);
  EXPECT_EQ(o.initial_prompt.value_or(""), "p");
  EXPECT_EQ(o.task, "transcribe");
}

TEST(AudioRequest, StatusPerProblem) {
  EXPECT_EQ(status_of("text/plain", "x", "transcribe"), 415);
  EXPECT_EQ(status_of("application/json", "[1]", "transcribe"), 400);
  EXPECT_EQ(status_of("multipart/form-data; boundary=B", form("B", "unknown"), "transcribe"), 400);
  EXPECT_EQ(status_of("multipart/form-data; boundary=B", form("B", "language"), "translate"), 400);
  EXPECT_EQ(status_of("multipart/form-data; boundary=B", form("B", "language"), "transcribe"), 200);
}

TEST(TextStreamer, HoldsBackSplitCharacters) {
  TextStreamer s;
  EXPECT_EQ(s.push(" a"), " a");
  EXPECT_EQ(s.push("\xe7\xa0"), "");  // the first two bytes of U+7838
  EXPECT_EQ(s.push("\xb8\xe8"), "\xe7\xa0\xb8");
  EXPECT_EQ(s.push("\x87\xaa"), "\xe8\x87\xaa");
  EXPECT_EQ(s.push("\xf0\x9f"), "");
  EXPECT_EQ(s.flush(), "\xf0\x9f");
  EXPECT_EQ(s.flush(), "");
}

}  // namespace
}  // namespace parley::server
