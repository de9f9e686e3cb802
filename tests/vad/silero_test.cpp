// SileroModel: loading the real files (ONNX v6.2 and v5.1.2, the safetensors export),
// errors on bad input, and the streaming contract (state and context carried between
// chunks, a batch of streams equal to the streams one by one). Numerical parity with
// onnxruntime is tests/parity/vad_parity_test.py; a few of its values are pinned here so
// that a build without the reference venv still checks the network.
#include "vad/silero.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "audio/decode.h"
#include "engine/error.h"

namespace {

using parley::Error;
using parley::ErrorKind;
using parley::vad::SileroModel;

const std::string kData = PARLEY_TEST_DATA;
const std::string kV62 = kData + "/vad/silero_vad_v6.2.onnx";
const std::string kV512 = kData + "/vad/silero_vad_v5.1.2.onnx";
const std::string kSafetensors = kData + "/vad/silero_vad_v6.2_16k.safetensors";

ErrorKind kind_of(const std::function<void()>& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.kind();
  }
  ADD_FAILURE() << "no parley::Error thrown";
  return ErrorKind::internal;
}

std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(SileroModel, OnnxV62HasBothRates) {
  const auto m = SileroModel::load(kV62);
  EXPECT_EQ(m->format(), "onnx");
  EXPECT_TRUE(m->supports(16000));
  EXPECT_TRUE(m->supports(8000));
  EXPECT_FALSE(m->supports(44100));
  EXPECT_EQ(m->net(16000).n_fft, 256);
  EXPECT_EQ(m->net(8000).n_fft, 128);
}

TEST(SileroModel, V512LoadsWithTheSameNetwork) {
  const auto m = SileroModel::load(kV512);
  EXPECT_TRUE(m->supports(16000));
  EXPECT_TRUE(m->supports(8000));
  // Different weights from v6.2: the same audio gives other probabilities.
  const auto v62 = SileroModel::load(kV62);
  const auto jfk = parley::load_audio(kData + "/audio/jfk.wav");
  const auto a = m->probabilities(jfk, 16000);
  const auto b = v62->probabilities(jfk, 16000);
  ASSERT_EQ(a.size(), b.size());
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, double(std::abs(a[i] - b[i])));
  EXPECT_GT(diff, 0.1);
}

TEST(SileroModel, SafetensorsIs16kOnly) {
  const auto m = SileroModel::load(kSafetensors);
  EXPECT_EQ(m->format(), "safetensors");
  EXPECT_TRUE(m->supports(16000));
  EXPECT_FALSE(m->supports(8000));
  std::string msg;
  EXPECT_EQ(kind_of([&] { m->new_state(8000); }, &msg), ErrorKind::invalid_argument);
  EXPECT_NE(msg.find("8000 Hz"), std::string::npos) << msg;
}

TEST(SileroModel, MissingFileIsNotFound) {
  EXPECT_EQ(kind_of([] { SileroModel::load("/nonexistent/silero.onnx"); }), ErrorKind::not_found);
}

TEST(SileroModel, TruncatedOnnxIsInvalid) {
  const std::string bytes = read_file(kV62);
  const std::string path = write_temp("truncated_vad.onnx", bytes.substr(0, bytes.size() / 2));
  std::string msg;
  EXPECT_EQ(kind_of([&] { SileroModel::load(path); }, &msg), ErrorKind::invalid_argument) << msg;
}

TEST(SileroModel, OnnxWithoutTheNetworkIsAnUnsupportedVersion) {
  // A valid ModelProto: ir_version 8 (field 1) and an empty graph (field 7).
  const std::string path = write_temp("empty_vad.onnx", std::string("\x08\x08\x3a\x00", 4));
  std::string msg;
  EXPECT_EQ(kind_of([&] { SileroModel::load(path); }, &msg), ErrorKind::unsupported);
  EXPECT_NE(msg.find("unsupported Silero VAD version"), std::string::npos) << msg;
}

TEST(SileroModel, GgmlFileIsRejected) {
  std::string msg;
  EXPECT_EQ(
      kind_of([&] { SileroModel::load(kData + "/vad/for-tests-silero-v6.2.0-ggml.bin"); }, &msg),
      ErrorKind::unsupported)
      << msg;
}

TEST(SileroModel, WrongSampleRateIsInvalid) {
  const auto m = SileroModel::load(kV62);
  std::vector<float> audio(44100, 0.0f);
  std::string msg;
  EXPECT_EQ(kind_of([&] { m->probabilities(audio, 44100); }, &msg), ErrorKind::invalid_argument);
  EXPECT_NE(msg.find("44100"), std::string::npos) << msg;
}

TEST(SileroModel, ForwardChecksSizes) {
  const auto m = SileroModel::load(kV62);
  auto state = m->new_state(16000, 2);
  std::vector<float> chunks(512), probs(2);  // one chunk for two streams
  EXPECT_EQ(kind_of([&] { m->forward(state, chunks, probs); }), ErrorKind::invalid_argument);
}

// Probabilities onnxruntime 1.20.1 gives for the first chunks of jfk.wav through
// silero-vad 6.2.1's OnnxWrapper on silero_vad_v6.2.onnx (tools/reference/vad_reference.py).
TEST(SileroModel, JfkFirstChunksMatchOnnxruntime) {
  const auto m = SileroModel::load(kV62);
  const auto jfk = parley::load_audio(kData + "/audio/jfk.wav");
  const auto p16 = m->probabilities(jfk, 16000);
  const std::vector<double> want16 = {0.0016698, 0.0846327, 0.3019870, 0.1334937,
                                      0.0831997, 0.0434542, 0.0554222, 0.0526929,
                                      0.0313142, 0.0376377, 0.3433419, 0.9459890};
  ASSERT_GE(p16.size(), want16.size());
  for (size_t i = 0; i < want16.size(); ++i) EXPECT_NEAR(p16[i], want16[i], 1e-5) << "chunk " << i;
}

TEST(SileroModel, StreamingEqualsWholeAudio) {
  const auto m = SileroModel::load(kV62);
  const auto jfk = parley::load_audio(kData + "/audio/jfk.wav");
  const auto whole = m->probabilities(jfk, 16000);
  auto state = m->new_state(16000);
  for (size_t k = 0; k + 512 <= jfk.size(); k += 512) {
    float p = 0;
    m->forward(state, std::span<const float>(jfk.data() + k, 512), std::span<float>(&p, 1));
    ASSERT_EQ(p, whole[k / 512]) << "chunk " << k / 512;
  }
  // The state matters: the same chunk from a fresh state gives another probability.
  auto fresh = m->new_state(16000);
  float p = 0;
  m->forward(fresh, std::span<const float>(jfk.data() + 512 * 40, 512), std::span<float>(&p, 1));
  EXPECT_GT(std::abs(p - whole[40]), 1e-3);
  // reset() is a fresh state.
  state.reset();
  float q = 0;
  m->forward(state, std::span<const float>(jfk.data() + 512 * 40, 512), std::span<float>(&q, 1));
  EXPECT_EQ(p, q);
}

TEST(SileroModel, BatchEqualsStreamsOneByOne) {
  const auto m = SileroModel::load(kV62);
  for (int rate : {16000, 8000}) {
    const auto jfk = parley::load_audio(kData + "/audio/jfk.wav", rate);
    const size_t n = size_t(parley::vad::chunk_samples(rate));
    std::mt19937 rng(7);
    std::normal_distribution<float> noise(0.0f, 0.05f);
    std::vector<float> noisy(jfk.size());
    for (auto& x : noisy) x = noise(rng);
    // Three streams: jfk, noise, jfk from 1 s on.
    const std::vector<const float*> streams = {jfk.data(), noisy.data(), jfk.data() + rate};
    const size_t chunks = (jfk.size() - size_t(rate)) / n;
    std::vector<std::vector<float>> single(3);
    for (size_t s = 0; s < 3; ++s) {
      single[s] = m->probabilities(std::span<const float>(streams[s], chunks * n), rate);
    }
    auto state = m->new_state(rate, 3);
    std::vector<float> batch(3 * n), probs(3);
    for (size_t k = 0; k < chunks; ++k) {
      for (size_t s = 0; s < 3; ++s) std::copy_n(streams[s] + k * n, n, batch.data() + s * n);
      m->forward(state, batch, probs);
      for (size_t s = 0; s < 3; ++s)
        ASSERT_EQ(probs[s], single[s][k]) << rate << " " << s << " " << k;
    }
  }
}

}  // namespace
