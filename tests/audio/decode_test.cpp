// Audio decoding: every shared clip decodes to the same samples as the reference's
// `ffmpeg -nostdin -threads 0 -i FILE -f s16le -ac 1 -acodec pcm_s16le -ar 16000 -`
// (/ 32768), the WAV fast path equals the FFmpeg path, memory equals file, and malformed
// inputs fail with parley::Error of the right kind.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "audio/decode.h"
#include "audio/wav.h"
#include "engine/error.h"

namespace parley {
namespace {

const std::string kAudioDir = std::string(PARLEY_TEST_DATA) + "/audio/";

// Samples at 16 kHz of each shared clip, as the ffmpeg CLI (5.1) outputs them.
struct Clip {
  const char* file;
  size_t samples;
};
constexpr Clip kClips[] = {
    {"chinese.flac", 15303},            // flac s16 48 kHz mono
    {"english.wav", 43919},             // pcm_s16le 44.1 kHz mono
    {"french.aiff", 40524},             // pcm_s16be 44.1 kHz mono
    {"hotwords.mp3", 64000},            // mp3 44.1 kHz stereo
    {"jfk.flac", 176000},               // flac s32 44.1 kHz stereo
    {"jfk.mp3", 176000},                // mp3 16 kHz mono
    {"jfk.wav", 176000},                // pcm_s16le 16 kHz mono: the fast path
    {"multilingual.mp3", 958400},       // mp3 24 kHz mono
    {"silero_test.wav", 960000},        // pcm_s16le 16 kHz mono
    {"stereo_diarization.wav", 80000},  // pcm_s16le 16 kHz stereo
};

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, std::span<const uint8_t> bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

bool have_ffmpeg_cli() { return std::system("command -v ffmpeg > /dev/null 2>&1") == 0; }

// The reference's decode: the ffmpeg CLI's s16 mono output / 32768.
std::vector<float> ffmpeg_cli_decode(const std::string& path, int rate = 16000) {
  const std::string cmd = "ffmpeg -nostdin -threads 0 -i '" + path +
                          "' -f s16le -ac 1 -acodec pcm_s16le -ar " + std::to_string(rate) +
                          " - 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr);
  std::vector<float> out;
  int16_t buf[4096];
  size_t n;
  while ((n = std::fread(buf, 2, 4096, p)) > 0)
    for (size_t i = 0; i < n; ++i) out.push_back(float(buf[i]) / 32768.0f);
  EXPECT_EQ(pclose(p), 0) << cmd;
  return out;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

ErrorKind kind_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no parley::Error thrown";
  return ErrorKind::internal;
}

TEST(Decode, EveryClipMatchesFfmpegCli) {
  if (!has_ffmpeg()) GTEST_SKIP() << "built without FFmpeg";
  if (!have_ffmpeg_cli()) GTEST_SKIP() << "no ffmpeg on PATH";
  for (const Clip& clip : kClips) {
    const std::string path = kAudioDir + clip.file;
    const std::vector<float> ours = load_audio(path);
    const std::vector<float> ref = ffmpeg_cli_decode(path);
    const float diff = max_abs_diff(ours, ref);
    std::printf("  %-24s %9zu samples, max abs diff vs ffmpeg CLI %g\n", clip.file, ours.size(),
                double(diff));
    EXPECT_EQ(ours.size(), ref.size()) << clip.file;
    EXPECT_EQ(diff, 0.0f) << clip.file;
  }
}

TEST(Decode, EveryClipHasTheReferenceLength) {
  if (!has_ffmpeg()) GTEST_SKIP() << "built without FFmpeg";
  for (const Clip& clip : kClips) {
    const std::vector<float> samples = load_audio(kAudioDir + clip.file);
    EXPECT_EQ(samples.size(), clip.samples) << clip.file;
    // Decoded audio lies in [-1, 1) and is not silent.
    const auto [lo, hi] = std::minmax_element(samples.begin(), samples.end());
    EXPECT_GE(*lo, -1.0f) << clip.file;
    EXPECT_LT(*hi, 1.0f) << clip.file;
    EXPECT_GT(*hi - *lo, 0.05f) << clip.file;
  }
}

TEST(Decode, WavFastPathEqualsFfmpegPath) {
  if (!has_ffmpeg()) GTEST_SKIP() << "built without FFmpeg";
  for (const char* file : {"jfk.wav", "silero_test.wav"}) {
    const std::string path = kAudioDir + file;
    const std::vector<uint8_t> bytes = read_file(path);
    const auto info = parse_wav_header(bytes, path);
    ASSERT_TRUE(info.has_value());
    EXPECT_TRUE(wav_fast_path_ok(*info, 16000));
    DecodeOptions fast, slow;
    slow.wav_fast_path = false;
    const std::vector<float> a = load_audio(path, fast), b = load_audio(path, slow);
    ASSERT_EQ(a.size(), b.size()) << file;
    EXPECT_EQ(max_abs_diff(a, b), 0.0f) << file;
  }
}

TEST(Decode, FastPathReadsS16Exactly) {
  // A hand-made 16 kHz mono s16 WAV: samples come back as int16 / 32768, exactly.
  const int16_t pcm[] = {0, 1, -1, 32767, -32768, 1234};
  std::vector<uint8_t> wav = {'R', 'I', 'F',  'F',  0,   0,   0,   0,           'W', 'A', 'V',
                              'E', 'f', 'm',  't',  ' ', 16,  0,   0,           0,   1,   0,
                              1,   0,   0x80, 0x3e, 0,   0,   0,   0x7d,        0,   0,   2,
                              0,   16,  0,    'd',  'a', 't', 'a', sizeof(pcm), 0,   0,   0};
  for (int16_t v : pcm) {
    wav.push_back(uint8_t(v & 0xff));
    wav.push_back(uint8_t((v >> 8) & 0xff));
  }
  const std::vector<float> got = decode_audio(wav, "tiny.wav");
  ASSERT_EQ(got.size(), std::size(pcm));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], float(pcm[i]) / 32768.0f) << i;
  // Other rates are not the fast path's.
  EXPECT_FALSE(wav_fast_path_ok(*parse_wav_header(wav, "tiny.wav"), 8000));
}

TEST(Decode, StereoIsDownmixed) {
  if (!has_ffmpeg()) GTEST_SKIP() << "built without FFmpeg";
  // stereo_diarization.wav: s16 stereo at 16 kHz; the CLI's -ac 1 is swr's default
  // rematrix (each channel x 0.5, rounded to s16), so mono = round((l + r) / 2) up to
  // rounding of the matrix arithmetic: at most 1 LSB from the plain average.
  const std::string path = kAudioDir + "stereo_diarization.wav";
  const std::vector<uint8_t> bytes = read_file(path);
  const auto info = parse_wav_header(bytes, path);
  ASSERT_TRUE(info && info->channels == 2 && info->bits_per_sample == 16);
  const std::vector<float> mono = load_audio(path);
  const size_t frames = info->data_bytes / 4;
  ASSERT_EQ(mono.size(), frames);
  const uint8_t* p = bytes.data() + info->data_offset;
  double worst = 0;
  bool channels_differ = false;
  for (size_t i = 0; i < frames; ++i) {
    const int16_t l = int16_t(p[4 * i] | p[4 * i + 1] << 8);
    const int16_t r = int16_t(p[4 * i + 2] | p[4 * i + 3] << 8);
    channels_differ |= l != r;
    worst = std::max(worst, std::fabs(double(mono[i]) * 32768.0 - (l + r) / 2.0));
  }
  EXPECT_TRUE(channels_differ);
  EXPECT_LE(worst, 1.0);
}

TEST(Decode, MemoryEqualsFile) {
  if (!has_ffmpeg()) GTEST_SKIP() << "built without FFmpeg";
  for (const char* file : {"jfk.flac", "jfk.mp3", "french.aiff", "jfk.wav"}) {
    const std::string path = kAudioDir + file;
    const std::vector<uint8_t> bytes = read_file(path);
    const std::vector<float> a = load_audio(path);
    const std::vector<float> b = decode_audio(bytes, file);
    ASSERT_EQ(a.size(), b.size()) << file;
    EXPECT_EQ(max_abs_diff(a, b), 0.0f) << file;
  }
}

TEST(Decode, OtherRates) {
  if (!has_ffmpeg()) GTEST_SKIP() << "built without FFmpeg";
  const std::string path = kAudioDir + "jfk.flac";
  const std::vector<float> a = load_audio(path, 8000);
  EXPECT_EQ(a.size(), 88000u);
  if (have_ffmpeg_cli()) {
    EXPECT_EQ(max_abs_diff(a, ffmpeg_cli_decode(path, 8000)), 0.0f);
  }
}

class DecodeErrors : public ::testing::Test {
 protected:
  std::string tmp(const std::string& name, std::span<const uint8_t> bytes) {
    const std::string path = ::testing::TempDir() + "parley_audio_" + name;
    write_file(path, bytes);
    return path;
  }
  static std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }
};

TEST_F(DecodeErrors, MissingFileIsNotFound) {
  EXPECT_EQ(kind_of([] { load_audio(kAudioDir + "no_such_clip.wav"); }), ErrorKind::not_found);
  try {
    load_audio(kAudioDir + "no_such_clip.wav");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[audio] "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no_such_clip.wav"), std::string::npos) << e.what();
  }
}

TEST_F(DecodeErrors, EmptyFile) {
  const std::string path = tmp("empty.wav", {});
  EXPECT_EQ(kind_of([&] { load_audio(path); }), ErrorKind::invalid_argument);
  EXPECT_EQ(kind_of([&] { decode_audio({}, "upload.mp3"); }), ErrorKind::invalid_argument);
}

TEST_F(DecodeErrors, DirectoryIsInvalid) {
  EXPECT_EQ(kind_of([] { load_audio(kAudioDir); }), ErrorKind::invalid_argument);
}

TEST_F(DecodeErrors, TruncatedWavHeader) {
  const std::vector<uint8_t> wav = read_file(kAudioDir + "jfk.wav");
  for (size_t n : {4, 11, 20, 30, 40}) {
    const std::span<const uint8_t> head(wav.data(), n);
    const ErrorKind k = kind_of([&] { decode_audio(head, "truncated.wav"); });
    EXPECT_TRUE(k == ErrorKind::invalid_argument || (!has_ffmpeg() && k == ErrorKind::unsupported))
        << n << " bytes";
  }
}

TEST_F(DecodeErrors, TruncatedCompressedFiles) {
  if (!has_ffmpeg()) GTEST_SKIP() << "built without FFmpeg";
  for (const char* file : {"jfk.flac", "jfk.mp3", "french.aiff"}) {
    const std::vector<uint8_t> bytes = read_file(kAudioDir + file);
    // Just the first bytes: a header and no audio.
    const std::span<const uint8_t> head(bytes.data(), 24);
    EXPECT_EQ(kind_of([&] { decode_audio(head, file); }), ErrorKind::invalid_argument) << file;
    // Cut in the middle: what decodes is kept (the reference's ffmpeg call does the same).
    const std::span<const uint8_t> half(bytes.data(), bytes.size() / 2);
    const std::vector<float> part = decode_audio(half, file);
    EXPECT_GT(part.size(), 16000u) << file;
    EXPECT_LT(part.size(), load_audio(kAudioDir + file).size()) << file;
  }
}

TEST_F(DecodeErrors, NonAudioInputs) {
  const std::string text = tmp("notes.txt", bytes_of("hello, this is not audio\n"));
  EXPECT_EQ(kind_of([&] { load_audio(text); }), ErrorKind::invalid_argument);
  // A 1x1 PNG: FFmpeg opens it as a video stream; there is no audio stream.
  const uint8_t png[] = {0x89, 'P', 'N', 'G',  0x0d, 0x0a, 0x1a, 0x0a, 0,    0, 0, 0x0d,
                         'I',  'H', 'D', 'R',  0,    0,    0,    1,    0,    0, 0, 1,
                         8,    6,   0,   0,    0,    0x1f, 0x15, 0xc4, 0x89, 0, 0, 0,
                         0x0a, 'I', 'D', 'A',  'T',  0x78, 0x9c, 0x63, 0,    1, 0, 0,
                         5,    0,   1,   0x0d, 0x0a, 0x2d, 0xb4, 0,    0,    0, 0, 'I',
                         'E',  'N', 'D', 0xae, 0x42, 0x60, 0x82};
  const std::string png_path = tmp("image.png", png);
  EXPECT_EQ(kind_of([&] { load_audio(png_path); }),
            has_ffmpeg() ? ErrorKind::invalid_argument : ErrorKind::unsupported);
  // Random bytes.
  std::vector<uint8_t> noise(20000);
  uint32_t x = 12345;
  for (auto& b : noise) b = uint8_t((x = x * 1664525u + 1013904223u) >> 24);
  EXPECT_EQ(kind_of([&] { decode_audio(noise, "noise.bin"); }),
            has_ffmpeg() ? ErrorKind::invalid_argument : ErrorKind::unsupported);
}

TEST_F(DecodeErrors, VideoWithoutAudio) {
  if (!has_ffmpeg()) GTEST_SKIP() << "built without FFmpeg";
  if (!have_ffmpeg_cli()) GTEST_SKIP() << "no ffmpeg on PATH";
  const std::string path = ::testing::TempDir() + "parley_audio_video_only.mp4";
  ASSERT_EQ(std::system(("ffmpeg -nostdin -y -loglevel error -f lavfi -i color=c=red:s=16x16:d=1 "
                         "-c:v mpeg4 '" +
                         path + "'")
                            .c_str()),
            0);
  try {
    load_audio(path);
    ADD_FAILURE() << "decoded a file without audio";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("no audio stream"), std::string::npos) << e.what();
  }
}

TEST_F(DecodeErrors, MutatedFilesNeverCrash) {
  // Random byte damage to real files: each decode either returns samples within the cap or
  // throws parley::Error; nothing else (the process would die on a crash).
  if (!has_ffmpeg()) GTEST_SKIP() << "built without FFmpeg";
  uint32_t x = 99;
  auto next = [&x] { return x = x * 1664525u + 1013904223u; };
  int failures = 0, decoded = 0;
  for (const char* file : {"jfk.mp3", "jfk.flac", "jfk.wav", "french.aiff"}) {
    std::vector<uint8_t> bytes = read_file(kAudioDir + file);
    bytes.resize(std::min<size_t>(bytes.size(), 24000));
    for (int round = 0; round < 12; ++round) {
      std::vector<uint8_t> m = bytes;
      const int n_flips = 1 + int(next() % 64);
      // Damage concentrated in the header half the time, anywhere otherwise.
      const size_t span = round % 2 ? m.size() : std::min<size_t>(m.size(), 256);
      for (int i = 0; i < n_flips; ++i) m[next() % span] = uint8_t(next() >> 24);
      try {
        const std::vector<float> s = decode_audio(m, file);
        ++decoded;
        EXPECT_LT(s.size(), 16000u * 3600u) << file;
      } catch (const Error& e) {
        ++failures;
        EXPECT_NE(std::string(e.what()).find("[audio] "), std::string::npos) << e.what();
      }
    }
  }
  std::printf("  mutated inputs: %d decoded, %d rejected\n", decoded, failures);
  EXPECT_EQ(decoded + failures, 48);
}

TEST_F(DecodeErrors, CorruptWavChunks) {
  // A chunk whose size runs past the end of the file, before the data chunk.
  const std::vector<uint8_t> bad = {'R', 'I', 'F', 'F', 0,    0,    0,    0,    'W', 'A', 'V', 'E',
                                    'J', 'U', 'N', 'K', 0xff, 0xff, 0xff, 0x7f, 1,   2,   3,   4};
  EXPECT_EQ(kind_of([&] { parse_wav_header(bad, "bad.wav"); }), ErrorKind::invalid_argument);
  // Not RIFF at all: no WAV header, the caller tries other decoders.
  EXPECT_FALSE(parse_wav_header(bytes_of("RIFX....WAVE"), "x.wav").has_value());
}

TEST_F(DecodeErrors, LengthCapIsResourceExhausted) {
  DecodeOptions options;
  options.max_seconds = 5.0;  // jfk is 11 s
  EXPECT_EQ(kind_of([&] { load_audio(kAudioDir + "jfk.wav", options); }),
            ErrorKind::resource_exhausted);
  if (!has_ffmpeg()) return;
  EXPECT_EQ(kind_of([&] { load_audio(kAudioDir + "jfk.flac", options); }),
            ErrorKind::resource_exhausted);
  options.max_seconds = 12.0;
  EXPECT_EQ(load_audio(kAudioDir + "jfk.flac", options).size(), 176000u);
}

// Other containers, codecs, sample formats and rates, made from jfk.flac by the ffmpeg CLI
// at test time; each must decode to the CLI's own samples.
TEST(Decode, FormatMatrixMatchesFfmpegCli) {
  if (!has_ffmpeg()) GTEST_SKIP() << "built without FFmpeg";
  if (!have_ffmpeg_cli()) GTEST_SKIP() << "no ffmpeg on PATH";
  struct Variant {
    const char* file;
    const char* args;
  };
  const Variant variants[] = {
      {"opus.ogg", "-c:a libopus -b:a 32k"},
      {"vorbis.ogg", "-c:a libvorbis"},
      {"aac.m4a", "-c:a aac -b:a 64k"},
      {"opus.webm", "-c:a libopus"},
      {"u8_8k.wav", "-c:a pcm_u8 -ar 8000"},
      {"s24_48k_stereo.wav", "-c:a pcm_s24le -ar 48000 -ac 2"},
      {"s32_22k.wav", "-c:a pcm_s32le -ar 22050"},
      {"f32_16k_stereo.wav", "-c:a pcm_f32le -ar 16000 -ac 2"},
      {"s16_16k_6ch.wav", "-c:a pcm_s16le -ar 16000 -ac 6"},
      {"s16be.aiff", "-c:a pcm_s16be -ar 32000"},
      {"mp3_stereo.mp3", "-c:a libmp3lame -ar 48000 -ac 2"},
      {"flac_96k.flac", "-c:a flac -ar 96000"},
  };
  for (const Variant& v : variants) {
    const std::string path = ::testing::TempDir() + "parley_audio_" + v.file;
    const std::string cmd = "ffmpeg -nostdin -y -loglevel error -i '" + kAudioDir +
                            "jfk.flac' -t 4 " + v.args + " '" + path + "'";
    if (std::system(cmd.c_str()) != 0) {
      std::printf("  %-22s skipped (this ffmpeg cannot encode it)\n", v.file);
      continue;
    }
    const std::vector<float> ours = load_audio(path);
    const std::vector<float> ref = ffmpeg_cli_decode(path);
    const float diff = max_abs_diff(ours, ref);
    std::printf("  %-22s %7zu samples, max abs diff vs ffmpeg CLI %g\n", v.file, ours.size(),
                double(diff));
    EXPECT_EQ(ours.size(), ref.size()) << v.file;
    EXPECT_EQ(diff, 0.0f) << v.file;
    EXPECT_GT(ours.size(), 60000u) << v.file;
    std::remove(path.c_str());
  }
}

}  // namespace
}  // namespace parley
