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

// A transcript with words: the second segment was cleared (no words), the third follows a
// pause of 3.5 s and has a "-->" word and non-ASCII words.
TranscribeResult word_result() {
  TranscribeResult r;
  const auto seg = [](double start, double end, std::string text, std::vector<Word> words) {
    Segment s;
    s.start = start;
    s.end = end;
    s.text = std::move(text);
    s.words = std::move(words);
    return s;
  };
  r.segments = {seg(0.0, 2.5, " Hello there, my friend.",
                    {{" Hello", 0.0, 0.5, 0.9},
                     {" there,", 0.6, 1.0, 0.9},
                     {" my", 1.2, 1.5, 0.9},
                     {" friend.", 1.5, 2.5, 0.9}}),
                seg(2.5, 3.0, "", {}),
                seg(6.0, 8.2, " \u00dcber --> na\u00efve caf\u00e9",
                    {{" \u00dcber", 6.0, 6.4, 0.9},
                     {" -->", 6.4, 6.5, 0.9},
                     {" na\u00efve", 6.5, 7.0, 0.9},
                     {" caf\u00e9", 7.2, 8.2, 0.9}})};
  return r;
}

// Expected texts: openai-whisper 20250625's WriteSRT / WriteVTT write_result on the same
// result with the same options (run by hand in .venv-ref).
TEST(Formats, SubtitlesFromWordsAsTheReference) {
  const TranscribeResult r = word_result();
  {
    TranscriptInfo info;
    info.words = true;

    EXPECT_EQ(format_transcript(r, OutputFormat::srt, info),
              "1\n"
              "00:00:00,000 --> 00:00:02,500\n"
              "Hello there, my friend.\n"
              "\n"
              "2\n"
              "00:00:06,000 --> 00:00:08,200\n"
              "Über --> naïve café\n"
              "\n"
              "")
        << "default";
    EXPECT_EQ(format_transcript(r, OutputFormat::vtt, info),
              "WEBVTT\n"
              "\n"
              "00:00.000 --> 00:02.500\n"
              "Hello there, my friend.\n"
              "\n"
              "00:06.000 --> 00:08.200\n"
              "Über --> naïve café\n"
              "\n"
              "")
        << "default";
  }
  {
    TranscriptInfo info;
    info.words = true;
    info.highlight_words = true;
    EXPECT_EQ(format_transcript(r, OutputFormat::srt, info),
              "1\n"
              "00:00:00,000 --> 00:00:00,500\n"
              "<u>Hello</u> there, my friend.\n"
              "\n"
              "2\n"
              "00:00:00,500 --> 00:00:00,600\n"
              "Hello there, my friend.\n"
              "\n"
              "3\n"
              "00:00:00,600 --> 00:00:01,000\n"
              "Hello <u>there,</u> my friend.\n"
              "\n"
              "4\n"
              "00:00:01,000 --> 00:00:01,200\n"
              "Hello there, my friend.\n"
              "\n"
              "5\n"
              "00:00:01,200 --> 00:00:01,500\n"
              "Hello there, <u>my</u> friend.\n"
              "\n"
              "6\n"
              "00:00:01,500 --> 00:00:02,500\n"
              "Hello there, my <u>friend.</u>\n"
              "\n"
              "7\n"
              "00:00:06,000 --> 00:00:06,400\n"
              "<u>Über</u> --> naïve café\n"
              "\n"
              "8\n"
              "00:00:06,400 --> 00:00:06,500\n"
              "Über <u>--></u> naïve café\n"
              "\n"
              "9\n"
              "00:00:06,500 --> 00:00:07,000\n"
              "Über --> <u>naïve</u> café\n"
              "\n"
              "10\n"
              "00:00:07,000 --> 00:00:07,200\n"
              "Über --> naïve café\n"
              "\n"
              "11\n"
              "00:00:07,200 --> 00:00:08,200\n"
              "Über --> naïve <u>café</u>\n"
              "\n"
              "")
        << "highlight";
    EXPECT_EQ(format_transcript(r, OutputFormat::vtt, info),
              "WEBVTT\n"
              "\n"
              "00:00.000 --> 00:00.500\n"
              "<u>Hello</u> there, my friend.\n"
              "\n"
              "00:00.500 --> 00:00.600\n"
              "Hello there, my friend.\n"
              "\n"
              "00:00.600 --> 00:01.000\n"
              "Hello <u>there,</u> my friend.\n"
              "\n"
              "00:01.000 --> 00:01.200\n"
              "Hello there, my friend.\n"
              "\n"
              "00:01.200 --> 00:01.500\n"
              "Hello there, <u>my</u> friend.\n"
              "\n"
              "00:01.500 --> 00:02.500\n"
              "Hello there, my <u>friend.</u>\n"
              "\n"
              "00:06.000 --> 00:06.400\n"
              "<u>Über</u> --> naïve café\n"
              "\n"
              "00:06.400 --> 00:06.500\n"
              "Über <u>--></u> naïve café\n"
              "\n"
              "00:06.500 --> 00:07.000\n"
              "Über --> <u>naïve</u> café\n"
              "\n"
              "00:07.000 --> 00:07.200\n"
              "Über --> naïve café\n"
              "\n"
              "00:07.200 --> 00:08.200\n"
              "Über --> naïve <u>café</u>\n"
              "\n"
              "")
        << "highlight";
  }
  {
    TranscriptInfo info;
    info.words = true;
    info.max_line_width = 12;
    info.max_line_count = 2;
    EXPECT_EQ(format_transcript(r, OutputFormat::srt, info),
              "1\n"
              "00:00:00,000 --> 00:00:02,500\n"
              "Hello there,\n"
              "my friend.\n"
              "\n"
              "2\n"
              "00:00:06,000 --> 00:00:08,200\n"
              "Über -->\n"
              "naïve café\n"
              "\n"
              "")
        << "width";
    EXPECT_EQ(format_transcript(r, OutputFormat::vtt, info),
              "WEBVTT\n"
              "\n"
              "00:00.000 --> 00:02.500\n"
              "Hello there,\n"
              "my friend.\n"
              "\n"
              "00:06.000 --> 00:08.200\n"
              "Über -->\n"
              "naïve café\n"
              "\n"
              "")
        << "width";
  }
  {
    TranscriptInfo info;
    info.words = true;
    info.max_words_per_line = 2;
    EXPECT_EQ(format_transcript(r, OutputFormat::srt, info),
              "1\n"
              "00:00:00,000 --> 00:00:01,000\n"
              "Hello there,\n"
              "\n"
              "2\n"
              "00:00:01,200 --> 00:00:02,500\n"
              "my friend.\n"
              "\n"
              "3\n"
              "00:00:06,000 --> 00:00:06,500\n"
              "Über -->\n"
              "\n"
              "4\n"
              "00:00:06,500 --> 00:00:08,200\n"
              "naïve café\n"
              "\n"
              "")
        << "words2";
    EXPECT_EQ(format_transcript(r, OutputFormat::vtt, info),
              "WEBVTT\n"
              "\n"
              "00:00.000 --> 00:01.000\n"
              "Hello there,\n"
              "\n"
              "00:01.200 --> 00:02.500\n"
              "my friend.\n"
              "\n"
              "00:06.000 --> 00:06.500\n"
              "Über -->\n"
              "\n"
              "00:06.500 --> 00:08.200\n"
              "naïve café\n"
              "\n"
              "")
        << "words2";
  }
  {
    TranscriptInfo info;
    info.words = true;
    info.max_line_width = 12;
    EXPECT_EQ(format_transcript(r, OutputFormat::srt, info),
              "1\n"
              "00:00:00,000 --> 00:00:02,500\n"
              "Hello there,\n"
              "my friend.\n"
              "\n"
              "2\n"
              "00:00:06,000 --> 00:00:08,200\n"
              "Über -->\n"
              "naïve café\n"
              "\n"
              "")
        << "width_only";
    EXPECT_EQ(format_transcript(r, OutputFormat::vtt, info),
              "WEBVTT\n"
              "\n"
              "00:00.000 --> 00:02.500\n"
              "Hello there,\n"
              "my friend.\n"
              "\n"
              "00:06.000 --> 00:08.200\n"
              "Über -->\n"
              "naïve café\n"
              "\n"
              "")
        << "width_only";
  }
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
