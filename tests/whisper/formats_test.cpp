// Output formats: each format's exact text for a small transcript, parsed back where it
// is JSON, and the subtitle timestamp rules of whisper/utils.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "whisper/formats.h"

namespace parley {
namespace {

TranscribeResult sample_result() {
  TranscribeResult r;
  r.language = "en";
  Segment a;
  a.id = 0;
  a.start = 0.0;
  a.end = 2.5;
  a.text = " Hello there.";
  a.tokens = {50363, 15496, 612, 13, 50488};
  a.avg_logprob = -0.25f;
  Segment b;
  b.id = 1;
  b.seek = 250;
  b.start = 3661.0015;  // over an hour
  b.end = 3662.5;
  b.text = " a --> b";
  b.tokens = {50363, 257};
  r.segments = {a, b};
  r.text = a.text + b.text;
  return r;
}

TEST(Formats, SubtitleTimestamps) {
  EXPECT_EQ(format_timestamp(0.0, false, '.'), "00:00.000");
  EXPECT_EQ(format_timestamp(2.5, true, ','), "00:00:02,500");
  EXPECT_EQ(format_timestamp(61.0, false, '.'), "01:01.000");
  EXPECT_EQ(format_timestamp(3661.0015, false, '.'), "01:01:01.002");  // hours appear
  EXPECT_EQ(format_timestamp(0.0005, false, '.'), "00:00.000");        // round half to even
  EXPECT_EQ(format_timestamp(-0.4, false, '.'), "00:00.000");          // clamped, never an error
}

TEST(Formats, Txt) {
  EXPECT_EQ(format_transcript(sample_result(), OutputFormat::txt, {}), "Hello there.\na --> b\n");
}

TEST(Formats, Srt) {
  EXPECT_EQ(format_transcript(sample_result(), OutputFormat::srt, {}),
            "1\n00:00:00,000 --> 00:00:02,500\nHello there.\n\n"
            "2\n01:01:01,002 --> 01:01:02,500\na -> b\n\n");
}

TEST(Formats, Vtt) {
  EXPECT_EQ(format_transcript(sample_result(), OutputFormat::vtt, {}),
            "WEBVTT\n\n00:00.000 --> 00:02.500\nHello there.\n\n"
            "01:01:01.002 --> 01:01:02.500\na -> b\n\n");
}

TEST(Formats, JsonAndVerboseJsonParse) {
  auto j = nlohmann::json::parse(format_transcript(sample_result(), OutputFormat::json, {}));
  EXPECT_EQ(j, nlohmann::json({{"text", " Hello there. a --> b"}}));
  auto v = nlohmann::json::parse(
      format_transcript(sample_result(), OutputFormat::verbose_json, {"transcribe", 3662.5}));
  EXPECT_EQ(v.at("task"), "transcribe");
  EXPECT_EQ(v.at("language"), "en");
  EXPECT_DOUBLE_EQ(v.at("duration").get<double>(), 3662.5);
  ASSERT_EQ(v.at("segments").size(), 2u);
  EXPECT_EQ(v.at("segments")[0].at("tokens"), nlohmann::json({50363, 15496, 612, 13, 50488}));
  EXPECT_DOUBLE_EQ(v.at("segments")[1].at("start").get<double>(), 3661.0015);
  EXPECT_FLOAT_EQ(v.at("segments")[0].at("avg_logprob").get<float>(), -0.25f);
  for (const char* key : {"id", "seek", "start", "end", "text", "tokens", "temperature",
                          "avg_logprob", "compression_ratio", "no_speech_prob"})
    EXPECT_TRUE(v.at("segments")[1].contains(key)) << key;
}

TEST(Formats, InvalidUtf8BecomesReplacementCharacter) {
  TranscribeResult r = sample_result();
  r.text = "caf\xc3";  // a token boundary inside a two-byte character
  auto j = nlohmann::json::parse(format_transcript(r, OutputFormat::json, {}));
  EXPECT_EQ(j.at("text"), "caf\xef\xbf\xbd");
}

TEST(Formats, ParseNames) {
  EXPECT_EQ(parse_output_format("text"), OutputFormat::txt);
  EXPECT_EQ(parse_output_format("verbose_json"), OutputFormat::verbose_json);
  EXPECT_THROW(parse_output_format("docx"), Error);
}

}  // namespace
}  // namespace parley
