// WhisperModel / WhisperSession on the real tiny.en (CTranslate2 float16, upcast to f32):
// config, encoder output and decoder logits against CTranslate2 4.x on CPU float32, the KV
// cache, and the Hugging Face loader (the same weights rewritten in its layout).
#include "whisper/model.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "audio/decode.h"
#include "audio/mel.h"
#include "engine/alloc_stats.h"
#include "engine/error.h"
#include "io/ctranslate2.h"
#include "io/safetensors.h"

namespace parley {
namespace {

namespace fs = std::filesystem;

const std::string kModelDir = PARLEY_TEST_MODEL_DIR;
constexpr int32_t kSot = 50257, kNoTimestamps = 50362;

bool have_model() { return fs::exists(fs::path(kModelDir) / "model.bin"); }

#define REQUIRE_MODEL() \
  if (!have_model()) GTEST_SKIP() << "no model at " << kModelDir << " (scripts/setup.sh)"

// A deterministic log-mel-like input f32 [80, 3000], the same as this numpy expression
// (the golden values below come from it):
//   m = np.arange(80.)[:, None]; t = np.arange(3000.)[None, :]
//   mel = (0.6 * np.sin(0.013 * t * (1 + m % 7) + 0.5 * m) + 0.3 * np.cos(0.002 * t * m)
//          - 0.2).astype(np.float32)
Tensor synthetic_mel() {
  Tensor mel = Tensor::empty({80, 3000}, DType::f32);
  float* p = mel.data<float>();
  for (int m = 0; m < 80; ++m)
    for (int t = 0; t < 3000; ++t)
      p[m * 3000 + t] = float(0.6 * std::sin(0.013 * t * (1 + m % 7) + 0.5 * m) +
                              0.3 * std::cos(0.002 * t * m) - 0.2);
  return mel;
}

// Golden values from CTranslate2 4.8.5 (pip install ctranslate2), same weights:
//   model = ctranslate2.models.Whisper(dir, device="cpu", compute_type="float32")
//   feats = ctranslate2.StorageView.from_array(mel[None])
//   enc = np.array(model.encode(feats, to_cpu=True))[0]                  # [1500, 384]
//   r = model.generate(feats, [[50257, 50362]], beam_size=1, max_length=8,
//                      return_logits_vocab=True, suppress_blank=False, suppress_tokens=[])
//   logits = np.array(r[0].logits[0])      # [4, 51864], one row per generated token
// r[0].sequences_ids == [[357, 82, 654, 287]] (then <|endoftext|>).
constexpr double kEncMean = -0.0137958, kEncStd = 1.1964673;
struct EncValue {
  int row, col;
  float value;
};
constexpr EncValue kEncValues[] = {{0, 0, -1.196404f},     {0, 383, -1.372367f},
                                   {1, 5, -0.031655f},     {750, 100, -0.963545f},
                                   {1499, 383, 0.472708f}, {1234, 17, -1.402179f}};
constexpr int32_t kGreedy[] = {357, 82, 654, 287};
constexpr int kLogitIds[] = {0, 13, 220, 357, 82, 654, 287, 50256, 50257, 51863};
constexpr float kLogits[4][10] = {{3.83731f, 4.48573f, 7.27052f, 12.16258f, 1.74376f, 2.16737f,
                                   7.48059f, 8.78261f, 1.31435f, -0.09091f},
                                  {-7.26196f, -11.73514f, -0.93811f, -4.07813f, 5.32812f, -0.23648f,
                                   -5.69460f, -0.00056f, -2.95217f, -2.70109f},
                                  {0.08798f, 1.73921f, 0.33903f, 0.04208f, -2.04405f, 7.58291f,
                                   4.31956f, 5.54283f, 1.41040f, -1.12599f},
                                  {-0.07553f, 5.20556f, 1.54180f, 3.28452f, 3.49779f, 2.28127f,
                                   11.45651f, 9.13617f, 1.89679f, -2.11672f}};
constexpr float kEncTol = 1e-3f, kLogitTol = 1e-3f;

// Loads tiny.en once for the whole suite (about 0.3 s).
std::shared_ptr<const WhisperModel> tiny_en() {
  static std::shared_ptr<const WhisperModel> model = WhisperModel::load(kModelDir);
  return model;
}

const float* row(const Tensor& t, int64_t r) { return t.data<float>() + r * t.dim(-1); }

int32_t argmax_row(const Tensor& logits, int64_t r) {
  const float* p = row(logits, r);
  return int32_t(std::max_element(p, p + logits.dim(1)) - p);
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  float m = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    m = std::max(m, std::abs(a.data<float>()[i] - b.data<float>()[i]));
  return m;
}

TEST(WhisperModel, LoadsTinyEnConfig) {
  REQUIRE_MODEL();
  const auto model = tiny_en();
  EXPECT_EQ(model->format(), "ctranslate2");
  EXPECT_EQ(model->device(), Device::cpu);
  const WhisperConfig& c = model->config();
  EXPECT_EQ(c.n_mels, 80);
  EXPECT_EQ(c.n_audio_ctx, 1500);
  EXPECT_EQ(c.n_audio_state, 384);
  EXPECT_EQ(c.n_audio_head, 6);
  EXPECT_EQ(c.n_audio_layer, 4);
  EXPECT_EQ(c.n_vocab, 51864);
  EXPECT_EQ(c.n_text_ctx, 448);
  EXPECT_EQ(c.n_text_state, 384);
  EXPECT_EQ(c.n_text_head, 6);
  EXPECT_EQ(c.n_text_layer, 4);
  EXPECT_FALSE(c.multilingual());
  const std::vector<std::pair<int, int>> heads = {{1, 0}, {2, 0}, {2, 5}, {3, 0},
                                                  {3, 1}, {3, 2}, {3, 3}, {3, 4}};
  EXPECT_EQ(c.alignment_heads, heads);
  // The parity path holds every weight in f32.
  EXPECT_EQ(model->weights().token_embedding.dtype(), DType::f32);
  EXPECT_EQ(model->weights().decoder_layers[3].self_qkv.weight.shape(), Shape({1152, 384}));
}

TEST(WhisperModel, MissingDirectoryIsNotFound) {
  try {
    WhisperModel::load("/nonexistent/whisper");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::not_found);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/whisper"), std::string::npos);
  }
}

TEST(WhisperConfig, ParsesHuggingFaceConfig) {
  const std::string json = R"({"d_model": 1280, "encoder_attention_heads": 20,
    "decoder_attention_heads": 20, "encoder_layers": 32, "decoder_layers": 4,
    "num_mel_bins": 128, "vocab_size": 51866, "max_source_positions": 1500,
    "max_target_positions": 448})";
  const WhisperConfig c = config_from_huggingface(json, "turbo");
  EXPECT_EQ(c.n_mels, 128);
  EXPECT_EQ(c.n_audio_state, 1280);
  EXPECT_EQ(c.n_text_state, 1280);
  EXPECT_EQ(c.n_audio_head, 20);
  EXPECT_EQ(c.n_audio_layer, 32);
  EXPECT_EQ(c.n_text_layer, 4);
  EXPECT_EQ(c.n_vocab, 51866);
  EXPECT_EQ(c.n_audio_ctx, 1500);
  EXPECT_EQ(c.n_text_ctx, 448);
  EXPECT_TRUE(c.multilingual());
  EXPECT_THROW(config_from_huggingface(R"({"d_model": 384})", "x"), Error);
  EXPECT_THROW(config_from_huggingface("{not json", "x"), Error);
  // 7 heads do not divide 1280.
  std::string bad = json;
  bad.replace(bad.find("\"encoder_attention_heads\": 20"), 29, "\"encoder_attention_heads\": 7");
  EXPECT_THROW(config_from_huggingface(bad, "x"), Error);
}

TEST(WhisperSession, EncoderMatchesCTranslate2) {
  REQUIRE_MODEL();
  WhisperSession session(tiny_en());
  const Tensor mel = synthetic_mel();
  session.encode(mel);  // warm up the pool and oneDNN's primitive cache
  const auto start = std::chrono::steady_clock::now();
  session.encode(mel);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const Tensor& enc = session.audio_features();
  ASSERT_EQ(enc.shape(), Shape({1500, 384}));
  double sum = 0, sum2 = 0;
  for (int64_t i = 0; i < enc.numel(); ++i) sum += enc.data<float>()[i];
  const double mean = sum / double(enc.numel());
  for (int64_t i = 0; i < enc.numel(); ++i)
    sum2 += (enc.data<float>()[i] - mean) * (enc.data<float>()[i] - mean);
  const double std_dev = std::sqrt(sum2 / double(enc.numel()));
  EXPECT_NEAR(mean, kEncMean, 1e-5);
  EXPECT_NEAR(std_dev, kEncStd, 1e-5);
  float max_diff = 0;
  for (const EncValue& v : kEncValues) {
    const float got = row(enc, v.row)[v.col];
    EXPECT_NEAR(got, v.value, kEncTol) << "enc[" << v.row << ", " << v.col << "]";
    max_diff = std::max(max_diff, std::abs(got - v.value));
  }
  std::printf("encoder: %.1f ms, mean %.7f std %.7f, max abs diff at golden points %.2e\n", ms,
              mean, std_dev, max_diff);
}

TEST(WhisperSession, GreedyLogitsMatchCTranslate2) {
  REQUIRE_MODEL();
  WhisperSession session(tiny_en());
  session.encode(synthetic_mel());
  const int32_t prefix[] = {kSot, kNoTimestamps};
  Tensor logits = session.decode(prefix);
  ASSERT_EQ(logits.shape(), Shape({2, 51864}));
  EXPECT_EQ(logits.device(), Device::cpu);
  EXPECT_EQ(session.n_cached(), 2);
  float max_diff = 0;
  const float* last = row(logits, 1);
  for (int step = 0; step < 4; ++step) {
    for (int j = 0; j < 10; ++j) {
      const float got = last[kLogitIds[j]];
      EXPECT_NEAR(got, kLogits[step][j], kLogitTol) << "step " << step << " id " << kLogitIds[j];
      max_diff = std::max(max_diff, std::abs(got - kLogits[step][j]));
    }
    const int32_t token = argmax_row(logits, logits.dim(0) - 1);
    EXPECT_EQ(token, kGreedy[step]) << "step " << step;
    logits = session.decode(std::span<const int32_t>(&token, 1));
    ASSERT_EQ(logits.shape(), Shape({1, 51864}));
    last = row(logits, 0);
  }
  EXPECT_EQ(session.n_cached(), 6);
  std::printf("decoder: max abs diff over %d golden logits %.2e\n", 4 * 10, max_diff);
}

// Real speech: jfk.wav through parley's own audio path. CTranslate2 4.8.5, greedy, on
// faster-whisper's FeatureExtractor mel of the same file (first 3000 frames of the mel of
// the audio + 30 s of zeros), gives these tokens ("And so my fellow Americans, ask not
// what your country can do for you, ask what you can do for your country."):
//   mel = FeatureExtractor()(decode_audio("jfk.wav"), padding=480000)[:, :3000]
//   model.generate(StorageView.from_array(mel[None]), [[50257, 50362]], beam_size=1,
//                  suppress_blank=False, suppress_tokens=[]).sequences_ids[0]
TEST(WhisperSession, JfkGreedyTokensMatchCTranslate2) {
  REQUIRE_MODEL();
  const std::vector<int32_t> expected = {843,  523, 616, 5891, 3399, 1265, 407,  644, 534,
                                         1499, 460, 466, 329,  345,  11,   1265, 644, 345,
                                         460,  466, 329, 534,  1499, 13,   50256};
  const std::vector<float> audio = load_audio(std::string(PARLEY_TEST_DATA) + "/audio/jfk.wav");
  const Tensor mel = pad_or_trim_frames(log_mel_spectrogram(audio, 80, kChunkSamples), 3000);
  WhisperSession session(tiny_en());
  session.encode(mel);
  std::vector<int32_t> tokens;
  const int32_t prefix[] = {kSot, kNoTimestamps};
  Tensor logits = session.decode(prefix);
  while (tokens.size() < 40) {
    const int32_t token = argmax_row(logits, logits.dim(0) - 1);
    tokens.push_back(token);
    if (token == 50256) break;
    logits = session.decode(std::span<const int32_t>(&token, 1));
  }
  EXPECT_EQ(tokens, expected);
}

// Decoding a sequence at once, token by token, or after truncate() gives the same logits.
TEST(WhisperSession, KvCacheAgreesWithFullSequence) {
  REQUIRE_MODEL();
  WhisperSession session(tiny_en());
  session.encode(synthetic_mel());
  const std::vector<int32_t> tokens = {kSot, kNoTimestamps, 357, 82, 654};
  const Tensor full = session.decode(tokens);  // [5, V]
  ASSERT_EQ(session.n_cached(), 5);

  session.reset();
  EXPECT_EQ(session.n_cached(), 0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Tensor step = session.decode(std::span<const int32_t>(&tokens[i], 1));
    const Tensor expected = full.slice0(int64_t(i), int64_t(i) + 1);
    EXPECT_LT(max_abs_diff(step, expected), 1e-4f) << "position " << i;
  }

  session.truncate(2);
  const Tensor again = session.decode(std::span<const int32_t>(&tokens[2], 3));  // [3, V]
  EXPECT_LT(max_abs_diff(again, full.slice0(2, 5)), 1e-4f);
  EXPECT_THROW(session.truncate(6), Error);
}

// decode(tokens, rows): only those positions' logits, the same as the full pass's rows (up to
// the GEMM's rounding for fewer rows); a bad row caches nothing.
TEST(WhisperSession, DecodeSelectedRowsAreRowsOfTheFullPass) {
  REQUIRE_MODEL();
  WhisperSession session(tiny_en());
  session.encode(synthetic_mel());
  const std::vector<int32_t> tokens = {kSot, kNoTimestamps, 357, 82, 654};
  const Tensor full = session.decode(tokens);
  session.reset();
  EXPECT_THROW(session.decode(tokens, std::vector<int64_t>{5}), Error);
  EXPECT_EQ(session.n_cached(), 0);
  const Tensor two = session.decode(tokens, std::vector<int64_t>{0, 4});
  ASSERT_EQ(two.dim(0), 2);
  EXPECT_EQ(session.n_cached(), 5);
  EXPECT_LT(max_abs_diff(two.slice0(0, 1), full.slice0(0, 1)), 1e-4f);
  EXPECT_LT(max_abs_diff(two.slice0(1, 2), full.slice0(4, 5)), 1e-4f);
}

// The share of values with any of the low 16 mantissa bits set: 0 for logits that went
// through bf16, nearly 1 for f32 GEMM output.
double share_beyond_bf16(const Tensor& t) {
  int64_t n = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, t.data<float>() + i, sizeof(bits));
    n += (bits & 0xffffu) != 0;
  }
  return double(n) / double(t.numel());
}

// A bf16 model's logits come out of the GEMM in f32 on every path (decode, decode_rows, the
// alignment pass): rounded to bf16 they flip argmaxes between near-equal candidates.
TEST(WhisperSession, SixteenBitModelsGiveF32Logits) {
  REQUIRE_MODEL();
  LoadOptions opt;
  opt.dtype = DType::bf16;
  const auto model = WhisperModel::load(kModelDir, opt);
  WhisperSession session(model);
  session.encode(synthetic_mel());
  const std::vector<int32_t> prefix = {kSot, kNoTimestamps};
  const Tensor direct = session.decode(prefix);
  EXPECT_GT(share_beyond_bf16(direct), 0.9);

  session.fork(2);
  const std::vector<int32_t> step = {357, 82};
  const Tensor rows = session.decode_rows(step);
  EXPECT_GT(share_beyond_bf16(rows), 0.9);

  session.reset();
  const std::pair<int, int> heads[] = {{1, 0}};
  const CrossAttentionWeights aligned =
      session.cross_attention_weights(std::vector<int32_t>{kSot, kNoTimestamps, 357}, heads);
  EXPECT_GT(share_beyond_bf16(aligned.logits), 0.9);
}

TEST(WhisperSession, WarmDecodeStepAllocatesNothing) {
  REQUIRE_MODEL();
  WhisperSession session(tiny_en());
  session.encode(synthetic_mel());
  const int32_t prefix[] = {kSot, kNoTimestamps};
  session.decode(prefix);
  int32_t token = 357;
  session.decode(std::span<const int32_t>(&token, 1));  // warms the one-token buffers
  const AllocStats before = alloc_stats();
  for (int i = 0; i < 5; ++i) session.decode(std::span<const int32_t>(&token, 1));
  EXPECT_EQ(alloc_stats().host_allocs, before.host_allocs);
}

TEST(WhisperSession, RejectsBadInput) {
  REQUIRE_MODEL();
  WhisperSession session(tiny_en());
  const int32_t sot[] = {kSot};
  EXPECT_THROW(session.decode(sot), Error);  // before encode()
  EXPECT_THROW(session.encode(Tensor::zeros({80, 2999}, DType::f32)), Error);
  session.encode(synthetic_mel());
  const int32_t out_of_vocab[] = {51864};
  EXPECT_THROW(session.decode(out_of_vocab), Error);
  std::vector<int32_t> too_long(449, kSot);
  EXPECT_THROW(session.decode(too_long), Error);
}

// ---- Hugging Face layout: tiny.en's weights rewritten with transformers' names ----

std::string write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
  return path.string();
}

const std::string kTinyEnHfConfig = R"({"d_model": 384, "encoder_attention_heads": 6,
  "decoder_attention_heads": 6, "encoder_layers": 4, "decoder_layers": 4, "num_mel_bins": 80,
  "vocab_size": 51864, "max_source_positions": 1500, "max_target_positions": 448})";

// The CTranslate2 variables of tiny.en under Hugging Face names, fused projections split.
io::TensorMap tiny_en_as_huggingface() {
  const io::Ct2Model ct2 = io::read_ctranslate2(kModelDir + "/model.bin");
  io::TensorMap out;
  auto put = [&](const std::string& hf, const Tensor& t) { out.insert("test", hf, t); };
  auto put_linear = [&](const std::string& hf, const std::string& ct2_name) {
    put(hf + ".weight", ct2.tensor(ct2_name + "/weight"));
    put(hf + ".bias", ct2.tensor(ct2_name + "/bias"));
  };
  auto put_ln = [&](const std::string& hf, const std::string& ct2_name) {
    put(hf + ".weight", ct2.tensor(ct2_name + "/gamma"));
    put(hf + ".bias", ct2.tensor(ct2_name + "/beta"));
  };
  // Fused [n * d, d] rows -> the named projections; "k" gets no bias.
  auto put_split = [&](const std::string& hf, const std::string& ct2_name,
                       const std::vector<std::string>& names) {
    const Tensor& w = ct2.tensor(ct2_name + "/weight");
    const Tensor& b = ct2.tensor(ct2_name + "/bias");
    for (size_t i = 0; i < names.size(); ++i) {
      const int64_t r0 = int64_t(i) * 384, r1 = r0 + 384;
      put(hf + "." + names[i] + "_proj.weight", w.slice0(r0, r1));
      if (names[i] != "k") put(hf + "." + names[i] + "_proj.bias", b.slice0(r0, r1));
    }
  };
  put_linear("model.encoder.conv1", "encoder/conv1");
  put_linear("model.encoder.conv2", "encoder/conv2");
  put("model.encoder.embed_positions.weight", ct2.tensor("encoder/position_encodings/encodings"));
  put_ln("model.encoder.layer_norm", "encoder/layer_norm");
  put("model.decoder.embed_tokens.weight", ct2.tensor("decoder/embeddings/weight"));
  put("model.decoder.embed_positions.weight", ct2.tensor("decoder/position_encodings/encodings"));
  put_ln("model.decoder.layer_norm", "decoder/layer_norm");
  for (int i = 0; i < 4; ++i) {
    for (const char* side : {"encoder", "decoder"}) {
      const std::string hf = std::string("model.") + side + ".layers." + std::to_string(i);
      const std::string c = std::string(side) + "/layer_" + std::to_string(i);
      put_split(hf + ".self_attn", c + "/self_attention/linear_0", {"q", "k", "v"});
      put_linear(hf + ".self_attn.out_proj", c + "/self_attention/linear_1");
      put_ln(hf + ".self_attn_layer_norm", c + "/self_attention/layer_norm");
      put_linear(hf + ".fc1", c + "/ffn/linear_0");
      put_linear(hf + ".fc2", c + "/ffn/linear_1");
      put_ln(hf + ".final_layer_norm", c + "/ffn/layer_norm");
    }
    const std::string hf = "model.decoder.layers." + std::to_string(i);
    const std::string c = "decoder/layer_" + std::to_string(i);
    put_linear(hf + ".encoder_attn.q_proj", c + "/attention/linear_0");
    put_split(hf + ".encoder_attn", c + "/attention/linear_1", {"k", "v"});
    put_linear(hf + ".encoder_attn.out_proj", c + "/attention/linear_2");
    put_ln(hf + ".encoder_attn_layer_norm", c + "/attention/layer_norm");
  }
  return out;
}

TEST(WhisperModel, HuggingFaceLayoutMatchesCTranslate2) {
  REQUIRE_MODEL();
  const fs::path dir = fs::path(testing::TempDir()) / "parley_whisper_hf_tiny_en";
  fs::create_directories(dir);
  write_text(dir / "config.json", kTinyEnHfConfig);
  write_text(dir / "generation_config.json", R"({"alignment_heads": [[1, 0], [3, 4]]})");
  io::write_safetensors((dir / "model.safetensors").string(), tiny_en_as_huggingface());

  const auto hf = WhisperModel::load(dir.string());
  EXPECT_EQ(hf->format(), "huggingface");
  WhisperConfig expected = tiny_en()->config();
  expected.alignment_heads = {{1, 0}, {3, 4}};
  EXPECT_EQ(hf->config(), expected);

  WhisperSession a(tiny_en()), b(hf);
  const Tensor mel = synthetic_mel();
  a.encode(mel);
  b.encode(mel);
  EXPECT_EQ(max_abs_diff(a.audio_features(), b.audio_features()), 0.0f);
  const int32_t prefix[] = {kSot, kNoTimestamps};
  EXPECT_EQ(max_abs_diff(a.decode(prefix), b.decode(prefix)), 0.0f);
  fs::remove_all(dir);
}

TEST(WhisperModel, HuggingFaceErrorsNameTheTensor) {
  const fs::path dir = fs::path(testing::TempDir()) / "parley_whisper_hf_bad";
  fs::create_directories(dir);
  write_text(dir / "config.json", kTinyEnHfConfig);
  auto load_error = [&](const io::TensorMap& tensors) -> std::string {
    io::write_safetensors((dir / "model.safetensors").string(), tensors);
    try {
      WhisperModel::load(dir.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  io::TensorMap wrong_shape;
  wrong_shape.insert("test", "model.encoder.conv1.weight", Tensor::zeros({384, 80, 2}, DType::f32));
  const std::string shape_msg = load_error(wrong_shape);
  EXPECT_NE(shape_msg.find("'model.encoder.conv1.weight' has shape [384, 80, 2], expected "
                           "[384, 80, 3]"),
            std::string::npos)
      << shape_msg;
  io::TensorMap missing;
  missing.insert("test", "unrelated", Tensor::zeros({1}, DType::f32));
  const std::string missing_msg = load_error(missing);
  EXPECT_NE(missing_msg.find("missing tensor 'model.encoder.conv1.weight' (expected [384, 80, 3])"),
            std::string::npos)
      << missing_msg;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace parley
