// `parley vad` as a user runs it, and the VAD gate of `parley transcribe --vad`: audio
// without speech (digital silence, white noise at -50 dBFS, an empty file) prints an empty
// transcript while Whisper's run counters (--run-stats) stay at zero, and Whisper is not
// even loaded; speech is transcribed as before.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/run_parley.h"

namespace {

namespace fs = std::filesystem;
using parley_test::default_tiny_en_dir;
using parley_test::run_parley;
using testing::HasSubstr;

const std::string kData = PARLEY_TEST_DATA;
const std::string kJfk = kData + "/audio/jfk.wav";
const std::string kV62 = kData + "/vad/silero_vad_v6.2.onnx";

// A 16 kHz mono PCM s16 WAV of `samples` (clipped to [-1, 1)). The name carries the
// running test's name: ctest runs the tests of this file as parallel processes, and one
// test rewriting a file that another test's parley has mapped ends that parley with SIGBUS.
std::string write_wav(const std::string& name, const std::vector<float>& samples) {
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  const std::string path = testing::TempDir() + "/parley_vad_cli_" +
                           std::string(info ? info->name() : "none") + "_" + name + ".wav";
  std::ofstream f(path, std::ios::binary);
  auto u32 = [&](uint32_t v) { f.write(reinterpret_cast<const char*>(&v), 4); };
  auto u16 = [&](uint16_t v) { f.write(reinterpret_cast<const char*>(&v), 2); };
  const uint32_t bytes = uint32_t(samples.size() * 2);
  f.write("RIFF", 4);
  u32(36 + bytes);
  f.write("WAVEfmt ", 8);
  u32(16);
  u16(1);  // PCM
  u16(1);  // mono
  u32(16000);
  u32(32000);
  u16(2);
  u16(16);
  f.write("data", 4);
  u32(bytes);
  for (float x : samples) {
    const int16_t v = int16_t(std::lround(std::clamp(x, -1.0f, 32767.0f / 32768.0f) * 32768.0f));
    f.write(reinterpret_cast<const char*>(&v), 2);
  }
  return path;
}

std::vector<float> white_noise_minus_50_dbfs(size_t n) {
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, float(std::pow(10.0, -50.0 / 20.0)));
  std::vector<float> x(n);
  for (auto& v : x) v = d(rng);
  return x;
}

TEST(VadCli, JsonHasSegmentsProbsEventsAndTiming) {
  const auto r = run_parley("vad " + kJfk + " --model " + kV62 + " --json --probs --events", true);
  ASSERT_EQ(r.exit_code, 0) << r.output << r.err;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["sample_rate"], 16000);
  EXPECT_EQ(j["samples"], 176000);
  EXPECT_EQ(j["probs"].size(), 344u);  // ceil(176000 / 512)
  // whisper.cpp's test of the same v6.2 weights expects 4 segments on jfk.wav.
  ASSERT_EQ(j["segments"].size(), 4u);
  EXPECT_EQ(j["segments"][0]["start"], 5152);
  EXPECT_EQ(j["segments"][3]["end"], 169952);
  EXPECT_EQ(j["events"].size(), 9u);
  EXPECT_GT(j["timing"]["vad_ms"].get<double>(), 0.0);
  EXPECT_LT(j["timing"]["real_time_factor"].get<double>(), 1.0);
}

TEST(VadCli, TextPrintsOneLinePerSegment) {
  const auto r = run_parley("vad " + kJfk + " --model " + kV62, true);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.output, "0.322 2.270\n3.266 4.446\n5.378 7.678\n8.162 10.622\n");
}

TEST(VadCli, EightKilohertzAndSafetensors) {
  auto r = run_parley("vad " + kJfk + " --model " + kV62 + " --sample-rate 8000 --json", true);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.output)["samples"], 88000);
  r = run_parley("vad " + kJfk + " --model " + kData +
                     "/vad/silero_vad_v6.2_16k.safetensors --sample-rate 8000",
                 true);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.err, HasSubstr("no 8000 Hz network"));
}

TEST(VadCli, BadModelsAndRates) {
  auto r = run_parley("vad " + kJfk + " --model /nonexistent/vad.onnx", true);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("no Silero VAD model file"));
  const std::string empty_onnx = testing::TempDir() + "/parley_vad_cli_empty.onnx";
  std::ofstream(empty_onnx, std::ios::binary) << std::string("\x08\x08\x3a\x00", 4);
  r = run_parley("vad " + kJfk + " --model " + empty_onnx, true);
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_THAT(r.err, HasSubstr("unsupported Silero VAD version"));
  r = run_parley("vad " + kJfk + " --model " + kV62 + " --sample-rate 44100", true);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("44100"));
}

// --- the gate ---

struct NoSpeechCase {
  const char* name;
  std::vector<float> samples;
};

std::vector<NoSpeechCase> no_speech_cases() {
  return {{"silence", std::vector<float>(16000 * 5, 0.0f)},
          {"noise_minus_50dbfs", white_noise_minus_50_dbfs(16000 * 5)},
          {"empty", {}}};
}

TEST(VadGateCli, NoSpeechNeverLoadsWhisper) {
  // A model folder that does not exist: any attempt to load Whisper would fail.
  for (const auto& c : no_speech_cases()) {
    const std::string wav = write_wav(c.name, c.samples);
    const auto r = run_parley("transcribe --vad --vad-model " + kV62 +
                                  " --model /nonexistent/whisper --run-stats -f json " + wav,
                              true);
    EXPECT_EQ(r.exit_code, 0) << c.name << ": " << r.err;
    EXPECT_EQ(r.output, "{\"text\":\"\"}\n") << c.name;
    EXPECT_THAT(r.err, HasSubstr("whisper runs: encoder 0, decoder 0")) << c.name;
    EXPECT_THAT(r.err, HasSubstr("no speech")) << c.name;
  }
}

TEST(VadGateCli, RealModelRunsOnlyOnSpeech) {
  if (!fs::exists(default_tiny_en_dir() + "/model.bin"))
    GTEST_SKIP() << "no tiny.en at " << default_tiny_en_dir();
  std::string files;
  for (const auto& c : no_speech_cases()) files += " " + write_wav(c.name, c.samples);
  // Only silence: empty transcripts and zero encoder / decoder runs.
  auto r = run_parley("transcribe --vad --vad-model " + kV62 + " --model " + default_tiny_en_dir() +
                          " --run-stats" + files,
                      true);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("whisper runs: encoder 0, decoder 0"));
  EXPECT_EQ(r.output.find("-->"), std::string::npos) << r.output;
  // The same files followed by jfk.wav: Whisper runs for jfk only, text as before.
  r = run_parley("transcribe --vad --vad-model " + kV62 + " --model " + default_tiny_en_dir() +
                     " --run-stats" + files + " " + kJfk,
                 true);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.output, HasSubstr("ask not what your country can do for you"));
  EXPECT_THAT(r.err, HasSubstr("whisper runs: encoder 1, decoder "));
  EXPECT_THAT(r.err, testing::Not(HasSubstr("decoder 0\n")));
  // Without --vad, silence reaches Whisper (the counter sees it): the gate is what stops it.
  r = run_parley("transcribe --model " + default_tiny_en_dir() + " --run-stats " +
                     write_wav("silence_nogate", std::vector<float>(16000 * 5, 0.0f)),
                 true);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("whisper runs: encoder 1, decoder "));
}

// The int16 samples of a PCM s16 WAV's "data" chunk, as floats.
std::vector<float> read_wav_s16(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  const std::string bytes(std::istreambuf_iterator<char>(f), {});
  const size_t data = bytes.find("data");
  EXPECT_NE(data, std::string::npos);
  std::vector<float> out((bytes.size() - data - 8) / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    int16_t v;
    std::memcpy(&v, bytes.data() + data + 8 + 2 * i, 2);
    out[i] = float(v) / 32768.0f;
  }
  return out;
}

TEST(VadGateCli, FilterMapsTimesBackToTheFile) {
  if (!fs::exists(default_tiny_en_dir() + "/model.bin"))
    GTEST_SKIP() << "no tiny.en at " << default_tiny_en_dir();
  // 8 s of silence, jfk.wav (speech from about 0.3 s to 10.6 s), 8 s of silence.
  std::vector<float> audio(16000 * 8, 0.0f);
  const auto jfk = read_wav_s16(kJfk);
  audio.insert(audio.end(), jfk.begin(), jfk.end());
  audio.insert(audio.end(), size_t(16000 * 8), 0.0f);
  const std::string wav = write_wav("padded_jfk", audio);
  const auto r = run_parley("transcribe --vad-filter --vad-model " + kV62 + " --model " +
                                default_tiny_en_dir() + " -f verbose_json " + wav,
                            true);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_THAT(j["text"].get<std::string>(), HasSubstr("ask not what your country can do for you"));
  const auto& segs = j["segments"];
  ASSERT_FALSE(segs.empty());
  // Whisper heard only the speech, [7.952 s, 19.408 s) of the file (`parley vad` with the
  // filter's options: 2 s silences, 400 ms padding): its times come back on the file's
  // timeline (unmapped they would start near 0). tiny.en ends its last segment at 12.48 s
  // of the 11.46 s it heard (a timestamp past the audio, as Whisper may predict), so the
  // end is bounded loosely.
  EXPECT_GE(segs.front()["start"].get<double>(), 7.9);
  EXPECT_LE(segs.front()["start"].get<double>(), 8.5);
  EXPECT_GE(segs.back()["end"].get<double>(), 17.5);
  EXPECT_LE(segs.back()["end"].get<double>(), 21.0);
}

}  // namespace
