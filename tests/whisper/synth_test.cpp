// Synthetic Whisper models: shapes, deterministic weights, the Hugging Face tokenizer files
// derived from tiktoken ranks, loading through WhisperModel::load, and greedy decoding of
// real audio that does not collapse onto one repeated token.
#include "whisper/synth.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "audio/decode.h"
#include "audio/mel.h"
#include "engine/error.h"
#include "text/hf_tokenizer.h"
#include "whisper/decoding.h"
#include "whisper/model.h"
#include "whisper/tokenizer.h"

namespace parley {
namespace {

namespace fs = std::filesystem;

const std::string kMultilingual = std::string(PARLEY_TEST_DATA) + "/whisper/multilingual.tiktoken";
const std::string kJfk = std::string(PARLEY_TEST_DATA) + "/audio/jfk.wav";

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Unique per process: ctest runs each test of this suite as its own process, in parallel.
fs::path temp_dir(const std::string& name) {
  fs::path p =
      fs::temp_directory_path() / ("parley_synth_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

// Synthetic tiny (seed 0, f32), written once for the suite.
class SynthTiny : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(temp_dir("tiny"));
    SynthOptions o;
    o.shape = "tiny";
    o.seed = 0;
    o.vocab_path = kMultilingual;
    write_synth_whisper(o, dir_->string());
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static fs::path* dir_;
};
fs::path* SynthTiny::dir_ = nullptr;

TEST(SynthShapes, ConfigsMatchWhisperDims) {
  struct Want {
    const char* name;
    int d, heads, enc, dec, mels, vocab;
    int64_t params;  // transformers' WhisperForConditionalGeneration (proj_out tied)
  };
  const Want wants[] = {
      {"tiny", 384, 6, 4, 4, 80, 51865, 37760640},
      {"base", 512, 8, 6, 6, 80, 51865, 72593920},
      {"small", 768, 12, 12, 12, 80, 51865, 241734912},
      {"medium", 1024, 16, 24, 24, 80, 51865, 763857920},
      {"large-v3", 1280, 20, 32, 32, 128, 51866, 1543490560},
      {"large-v3-turbo", 1280, 20, 32, 4, 128, 51866, 808878080},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(w.name);
    const WhisperConfig c = synth_config(w.name);
    EXPECT_EQ(c.n_audio_state, w.d);
    EXPECT_EQ(c.n_text_state, w.d);
    EXPECT_EQ(c.n_audio_head, w.heads);
    EXPECT_EQ(c.n_text_head, w.heads);
    EXPECT_EQ(c.n_audio_layer, w.enc);
    EXPECT_EQ(c.n_text_layer, w.dec);
    EXPECT_EQ(c.n_mels, w.mels);
    EXPECT_EQ(c.n_vocab, w.vocab);
    EXPECT_EQ(c.n_audio_ctx, 1500);
    EXPECT_EQ(c.n_text_ctx, 448);
    // config.json reads back to the same config.
    EXPECT_EQ(config_from_huggingface(synth_config_json(c, 50257), w.name), c);
    int64_t params = 0;
    for (const auto& s : synth_tensor_specs(c)) params += s.shape.numel();
    EXPECT_EQ(params, w.params);
  }
  EXPECT_THROW(synth_config("huge"), Error);
}

constexpr uint64_t kGoldenHash = 9363716324804276206ull;  // fc1 of layer 0, seed 7

TEST(SynthWeights, SameSeedSameValuesOtherSeedDiffers) {
  const WhisperConfig c = synth_config("tiny");
  const SynthTensorSpec spec{"model.decoder.layers.0.fc1.weight", {1536, 384}};
  const auto a = synth_tensor_values(c, spec, 7), b = synth_tensor_values(c, spec, 7);
  const auto other = synth_tensor_values(c, spec, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, other);
  // Golden: the generator is integer-only plus one float multiply, so these bits hold on
  // every machine; a change here changes every synthetic model.
  uint64_t hash = 0xcbf29ce484222325ull;
  for (float v : a) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    hash = (hash ^ bits) * 0x100000001b3ull;
  }
  EXPECT_EQ(hash, kGoldenHash);
  // Roughly N(0, 0.02): a matrix, not a constant or a unit-scale table.
  double sum = 0, sq = 0;
  for (float v : a) sum += v, sq += double(v) * v;
  const double mean = sum / double(a.size()), std = std::sqrt(sq / double(a.size()) - mean * mean);
  EXPECT_NEAR(mean, 0.0, 1e-3);
  EXPECT_NEAR(std, 0.02, 1e-3);
  // LayerNorm gammas sit near 1.
  const auto gamma =
      synth_tensor_values(c, {"model.encoder.layers.0.final_layer_norm.weight", {384}}, 7);
  for (float v : gamma) EXPECT_NEAR(v, 1.0f, 0.25f);
  // Encoder positions are whisper's sinusoids: row 0 is [0...0 | 1...1].
  const auto pos = synth_tensor_values(c, {"model.encoder.embed_positions.weight", {1500, 384}}, 7);
  EXPECT_EQ(pos[0], 0.0f);
  EXPECT_EQ(pos[192], 1.0f);
  EXPECT_NEAR(pos[384 + 1], std::sin(std::exp(-std::log(10000.0) / 191.0)), 1e-6);
}

TEST(SynthTokenizer, MergesFollowRankOrder) {
  // "abc" splits where BPE with lower ranks leaves it: after "ab" when "ab" ranks first...
  const std::vector<std::string> ab_first = {"a", "b", "c", "ab", "bc", "abc"};
  EXPECT_EQ(merges_from_ranks(ab_first),
            (std::vector<std::pair<int32_t, int32_t>>{{0, 1}, {1, 2}, {3, 2}}));
  // ... and after "a" when "bc" does.
  const std::vector<std::string> bc_first = {"a", "b", "c", "bc", "ab", "abc"};
  EXPECT_EQ(merges_from_ranks(bc_first),
            (std::vector<std::pair<int32_t, int32_t>>{{1, 2}, {0, 1}, {0, 3}}));
  EXPECT_THROW(merges_from_ranks({"a", "b", "abc"}), Error);
}

TEST_F(SynthTiny, LoadsWithTheRequestedConfig) {
  const auto model = WhisperModel::load(dir_->string());
  EXPECT_EQ(model->format(), "huggingface");
  EXPECT_EQ(model->config(), synth_config("tiny"));
}

TEST_F(SynthTiny, SameSeedIdenticalBytesOtherSeedDiffers) {
  SynthOptions o;
  o.shape = "tiny";
  o.vocab_path = kMultilingual;
  const fs::path again = temp_dir("tiny_again"), other = temp_dir("tiny_seed1");
  write_synth_whisper(o, again.string());
  o.seed = 1;
  write_synth_whisper(o, other.string());
  const std::string first = read_bytes(*dir_ / "model.safetensors");
  EXPECT_GT(first.size(), size_t(37760640) * 4);
  EXPECT_TRUE(first == read_bytes(again / "model.safetensors"));
  EXPECT_EQ(read_bytes(*dir_ / "tokenizer.json"), read_bytes(again / "tokenizer.json"));
  const std::string second = read_bytes(other / "model.safetensors");
  EXPECT_EQ(first.size(), second.size());
  EXPECT_FALSE(first == second);
  fs::remove_all(again);
  fs::remove_all(other);
}

TEST_F(SynthTiny, TokenizerFilesEncodeLikeTiktoken) {
  const int n_vocab = 51865;
  const auto ref = WhisperTokenizer::from_tiktoken(kMultilingual, true, n_vocab);
  const auto hf = WhisperTokenizer::from_hf_json((*dir_ / "tokenizer.json").string(), n_vocab);
  const BpeTokenizer vm =
      load_hf_vocab_merges((*dir_ / "vocab.json").string(), (*dir_ / "merges.txt").string());
  EXPECT_EQ(hf.eot(), ref.eot());
  EXPECT_EQ(hf.sot(), ref.sot());
  EXPECT_EQ(hf.transcribe(), ref.transcribe());
  EXPECT_EQ(hf.no_timestamps(), ref.no_timestamps());
  EXPECT_EQ(hf.timestamp_begin(), ref.timestamp_begin());
  const std::vector<std::string> samples = {
      " And so my fellow Americans, ask not what your country can do for you",
      "Hello world!!! 12345 67890   spaces\n\ttabs",
      "Grüße aus Köln — naïve café, déjà vu",
      "日本語のテキストと中文文本，한국어 텍스트",
      "Привет, мир! Ελληνικά. العربية",
      "emoji 🎉🚀 and symbols ♪♫ <|endoftext|> it's we'll they're",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa zzzzzzzzzz ...... -----",
  };
  for (const std::string& s : samples) {
    SCOPED_TRACE(s);
    const std::vector<int32_t> want = ref.encode(s);
    EXPECT_EQ(hf.encode(s), want);
    EXPECT_EQ(vm.encode(s), want);
    EXPECT_EQ(hf.decode(want), s);
  }
}

// Random weights with tied embeddings tend to repeat one token; the synthetic scaling
// must give varied greedy output on real speech so token-parity tests mean something.
TEST_F(SynthTiny, GreedyDecodingOfSpeechVaries) {
  const auto model = WhisperModel::load(dir_->string());
  const auto tokenizer =
      WhisperTokenizer::from_hf_json((*dir_ / "tokenizer.json").string(), model->config().n_vocab);
  const std::vector<float> samples = load_audio(kJfk);
  const Tensor mel = log_mel_spectrogram(samples, model->config().n_mels, kChunkSamples);
  // The first 30 s window, [n_mels, 3000], as transcribe()'s first seek.
  const int64_t n_mels = mel.dim(0), frames = mel.dim(1);
  ASSERT_GE(frames, 3000);
  Tensor window = Tensor::empty({n_mels, 3000}, DType::f32);
  for (int64_t m = 0; m < n_mels; ++m)
    std::copy_n(mel.data<float>() + m * frames, 3000, window.data<float>() + m * 3000);
  WhisperSession session(model);
  DecodingOptions o;
  o.language = "en";
  o.without_timestamps = true;
  o.sample_len = 64;  // keeps the test short; all 224 give ~180 distinct
  const DecodingResult r = decode_window(session, tokenizer, window, o);
  std::map<int32_t, int> counts;
  for (int32_t t : r.tokens) ++counts[t];
  int most = 0;
  for (const auto& [t, n] : counts) most = std::max(most, n);
  std::printf("synthetic tiny on jfk.wav: %zu tokens, %zu distinct, most repeated %d\n",
              r.tokens.size(), counts.size(), most);
  EXPECT_GE(counts.size(), 20u);
  EXPECT_LE(most * 4, int(r.tokens.size()));
}

}  // namespace
}  // namespace parley
