// The --server client's pieces (src/dictate/remote.h) and VAD trimming (trim.h).
#include "dictate/remote.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "audio/wav.h"
#include "dictate/trim.h"
#include "engine/error.h"

namespace parley::dictate {
namespace {

TEST(DictateRemote, EndpointFromUrl) {
  HttpEndpoint e = transcription_endpoint("http://127.0.0.1:8080");
  EXPECT_EQ(e.host, "127.0.0.1");
  EXPECT_EQ(e.port, 8080);
  EXPECT_EQ(e.path, "/v1/audio/transcriptions");
  e = transcription_endpoint("http://example.com/v1/");
  EXPECT_EQ(e.host, "example.com");
  EXPECT_EQ(e.port, 80);
  EXPECT_EQ(e.path, "/v1/audio/transcriptions");
  e = transcription_endpoint("http://[::1]:9000/proxy");
  EXPECT_EQ(e.host, "::1");
  EXPECT_EQ(e.port, 9000);
  EXPECT_EQ(e.path, "/proxy/v1/audio/transcriptions");
  EXPECT_THROW(transcription_endpoint("https://api.openai.com"), Error);
  EXPECT_THROW(transcription_endpoint("localhost:8080"), Error);
  EXPECT_THROW(transcription_endpoint("http://host:99999"), Error);
  EXPECT_THROW(transcription_endpoint("http://:80"), Error);
}

TEST(DictateRemote, WavRoundTripsThroughTheReader) {
  const std::vector<float> samples = {0.0f, 0.5f, -0.5f, 1.5f, -1.0f};
  const std::string wav = wav_pcm16(samples, 16000);
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(wav.data()), wav.size());
  const auto info = parse_wav_header(bytes, "test.wav");
  ASSERT_TRUE(info.has_value());
  ASSERT_TRUE(wav_fast_path_ok(*info, 16000));
  const std::vector<float> back = wav_pcm16_to_float(bytes, *info);
  ASSERT_EQ(back.size(), samples.size());
  EXPECT_NEAR(back[1], 0.5f, 1e-4);
  EXPECT_NEAR(back[2], -0.5f, 1e-4);
  EXPECT_NEAR(back[3], 1.0f, 1e-4);  // clipped
}

TEST(DictateTrim, SpeechSpanWidensByTheMarginWithinTheUtterance) {
  const std::vector<vad::SpeechSegment> speech = {{8000, 16000}, {32000, 40000}};
  EXPECT_EQ(speech_span(speech, 48000, 3200), (std::pair<size_t, size_t>{4800, 43200}));
  EXPECT_EQ(speech_span(speech, 41000, 3200), (std::pair<size_t, size_t>{4800, 41000}));
  EXPECT_EQ(speech_span(speech, 48000, 10000), (std::pair<size_t, size_t>{0, 48000}));
  EXPECT_EQ(speech_span({}, 48000, 3200), (std::pair<size_t, size_t>{0, 0}));
}

}  // namespace
}  // namespace parley::dictate
