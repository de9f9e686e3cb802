// WhisperModel::load on the mlx-community layout and whisper.cpp ggml files: small models
// written here with openai-whisper's parameter names (mlx: mlp1/mlp2, channels-last conv
// weights, no encoder positions; ggml: [d, 1] conv biases, f16 matrices), layout detection,
// the tokenizer each layout gets, and clear errors for malformed or unsupported files.
// End-to-end token parity of converted real models: tests/parity/layouts_test.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "audio/mel.h"
#include "engine/error.h"
#include "io/ctranslate2.h"
#include "io/safetensors.h"
#include "text/tiktoken.h"
#include "whisper/model.h"

namespace parley {
namespace {

namespace fs = std::filesystem;

const std::string kData = PARLEY_TEST_DATA;
const std::string kModelDir = PARLEY_TEST_MODEL_DIR;

// A tiny English-only model: real vocabulary size (the tokenizer checks it) and mel count
// (the ggml filter check), everything else small.
constexpr int64_t kD = 8, kMels = 80, kAudioCtx = 6, kTextCtx = 5, kVocab = 51864;

constexpr const char* kMlxConfig = R"({"n_mels": 80, "n_audio_ctx": 6, "n_audio_state": 8,
  "n_audio_head": 2, "n_audio_layer": 1, "n_vocab": 51864, "n_text_ctx": 5,
  "n_text_state": 8, "n_text_head": 2, "n_text_layer": 1, "model_type": "whisper"})";

Tensor random(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  Tensor t = Tensor::empty(shape, DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

// openai-whisper's state dict of the tiny model (whisper/model.py names and shapes), values
// rounded through f16 so f16 files hold them exactly.
std::map<std::string, Tensor> openai_state() {
  std::map<std::string, Tensor> sd;
  uint32_t seed = 1;
  auto add = [&](const std::string& name, const Shape& shape) {
    sd[name] = random(shape, seed++).cast(DType::f16).cast(DType::f32);
  };
  add("encoder.conv1.weight", {kD, kMels, 3});
  add("encoder.conv1.bias", {kD});
  add("encoder.conv2.weight", {kD, kD, 3});
  add("encoder.conv2.bias", {kD});
  add("encoder.positional_embedding", {kAudioCtx, kD});
  auto block = [&](const std::string& p, bool cross) {
    for (const char* attn : {"attn", "cross_attn"}) {
      if (std::string(attn) == "cross_attn" && !cross) continue;
      const std::string a = p + "." + attn;
      for (const char* proj : {"query", "key", "value", "out"}) {
        add(a + "." + proj + ".weight", {kD, kD});
        if (std::string(proj) != "key") add(a + "." + proj + ".bias", {kD});
      }
      add(a + "_ln.weight", {kD});
      add(a + "_ln.bias", {kD});
    }
    add(p + ".mlp.0.weight", {4 * kD, kD});
    add(p + ".mlp.0.bias", {4 * kD});
    add(p + ".mlp.2.weight", {kD, 4 * kD});
    add(p + ".mlp.2.bias", {kD});
    add(p + ".mlp_ln.weight", {kD});
    add(p + ".mlp_ln.bias", {kD});
  };
  block("encoder.blocks.0", false);
  add("encoder.ln_post.weight", {kD});
  add("encoder.ln_post.bias", {kD});
  add("decoder.token_embedding.weight", {kVocab, kD});
  add("decoder.positional_embedding", {kTextCtx, kD});
  block("decoder.blocks.0", true);
  add("decoder.ln.weight", {kD});
  add("decoder.ln.bias", {kD});
  return sd;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// mlx-examples whisper/convert.py: mlp.0/mlp.2 -> mlp1/mlp2, conv weights swapaxes(1, 2),
// no encoder.positional_embedding; stored in `dtype`.
io::TensorMap mlx_tensors(const std::map<std::string, Tensor>& sd, DType dtype) {
  io::TensorMap out;
  for (const auto& [name, t] : sd) {
    if (name == "encoder.positional_embedding") continue;
    std::string n = name;
    for (auto [from, to] : {std::pair{"mlp.0", "mlp1"}, std::pair{"mlp.2", "mlp2"}})
      if (auto at = n.find(from); at != std::string::npos) n.replace(at, 5, to);
    Tensor v = t;
    if (n.find("conv") != std::string::npos && t.ndim() == 3) {
      const int64_t o = t.dim(0), i = t.dim(1), k = t.dim(2);
      v = Tensor::empty({o, k, i}, DType::f32);
      for (int64_t a = 0; a < o; ++a)
        for (int64_t b = 0; b < i; ++b)
          for (int64_t c = 0; c < k; ++c)
            v.data<float>()[(a * k + c) * i + b] = t.data<float>()[(a * i + b) * k + c];
    }
    out.insert("test", n, v.cast(dtype));
  }
  return out;
}

fs::path write_mlx(const std::string& name, DType dtype, const std::string& config = kMlxConfig) {
  const fs::path dir = fresh_dir(name);
  write_text(dir / "config.json", config);
  io::write_safetensors((dir / "weights.safetensors").string(), mlx_tensors(openai_state(), dtype));
  return dir;
}

// whisper.cpp models/convert-pt-to-ggml.py's file layout, from the state dict.
struct GgmlWriter {
  std::string bytes;
  template <typename T>
  void put(T v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void tensor(const std::string& name, const Tensor& t, int32_t ftype) {
    put<int32_t>(t.ndim());
    put<int32_t>(int32_t(name.size()));
    put<int32_t>(ftype);
    for (int i = t.ndim(); i-- > 0;) put<int32_t>(int32_t(t.dim(i)));
    bytes += name;
    const Tensor c = t.cast(ftype ? DType::f16 : DType::f32);
    bytes.append(static_cast<const char*>(c.raw()), c.nbytes());
  }
};

struct GgmlOptions {
  int32_t ftype = 1;
  Tensor filters = mel_filters(int(kMels));
  bool drop_conv1 = false;
};

fs::path write_ggml(const std::string& name, const GgmlOptions& o = {}) {
  GgmlWriter w;
  w.put<uint32_t>(0x67676d6c);
  for (int64_t v :
       {kVocab, kAudioCtx, kD, int64_t(2), int64_t(1), kTextCtx, kD, int64_t(2), int64_t(1), kMels})
    w.put<int32_t>(int32_t(v));
  w.put<int32_t>(o.ftype);
  w.put<int32_t>(int32_t(o.filters.dim(0)));
  w.put<int32_t>(int32_t(o.filters.dim(1)));
  w.bytes.append(static_cast<const char*>(o.filters.raw()), o.filters.nbytes());
  const std::vector<std::string> ranks = load_tiktoken_ranks(kData + "/whisper/gpt2.tiktoken");
  w.put<int32_t>(int32_t(ranks.size()));
  for (const std::string& r : ranks) {
    w.put<int32_t>(int32_t(r.size()));
    w.bytes += r;
  }
  for (const auto& [n, t] : openai_state()) {
    if (o.drop_conv1 && n == "encoder.conv1.weight") continue;
    const bool conv_bias = n == "encoder.conv1.bias" || n == "encoder.conv2.bias";
    const Tensor v = conv_bias ? t.reshape({t.dim(0), 1}) : t;
    const bool keep_f32 = v.ndim() < 2 || conv_bias || n.find("positional") != std::string::npos;
    w.tensor(n, v, o.ftype == 1 && !keep_f32 ? 1 : 0);
  }
  const fs::path file = fs::path(testing::TempDir()) / (name + ".bin");
  write_text(file, w.bytes);
  return file;
}

void expect_same(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const Tensor g = got.cast(DType::f32), w = want.cast(DType::f32);
  EXPECT_EQ(std::memcmp(g.raw(), w.raw(), g.nbytes()), 0) << what;
}

// Every weight that both layouts store must come through unchanged (the openai -> parley
// mapping, the conv transposition, the fused projections with a zero key bias).
void expect_openai_weights(const WhisperModel& m, bool positions_stored) {
  const std::map<std::string, Tensor> sd = openai_state();
  const WhisperWeights& w = m.weights();
  expect_same(w.conv1_weight, sd.at("encoder.conv1.weight"), "conv1");
  expect_same(w.conv1_bias, sd.at("encoder.conv1.bias"), "conv1 bias");
  expect_same(w.conv2_weight, sd.at("encoder.conv2.weight"), "conv2");
  expect_same(
      w.encoder_positions,
      positions_stored ? sd.at("encoder.positional_embedding") : whisper_sinusoids(kAudioCtx, kD),
      "encoder positions");
  const EncoderLayerWeights& e = w.encoder_layers.at(0);
  expect_same(e.attn_qkv.weight.slice0(0, kD), sd.at("encoder.blocks.0.attn.query.weight"), "q");
  expect_same(e.attn_qkv.weight.slice0(kD, 2 * kD), sd.at("encoder.blocks.0.attn.key.weight"), "k");
  expect_same(e.attn_qkv.bias.slice0(kD, 2 * kD), Tensor::zeros({kD}, DType::f32), "k bias");
  expect_same(e.attn_qkv.bias.slice0(2 * kD, 3 * kD), sd.at("encoder.blocks.0.attn.value.bias"),
              "v bias");
  expect_same(e.fc1.weight, sd.at("encoder.blocks.0.mlp.0.weight"), "fc1");
  expect_same(e.fc2.bias, sd.at("encoder.blocks.0.mlp.2.bias"), "fc2 bias");
  const DecoderLayerWeights& d = w.decoder_layers.at(0);
  expect_same(d.cross_kv.weight.slice0(kD, 2 * kD),
              sd.at("decoder.blocks.0.cross_attn.value.weight"), "cross v");
  expect_same(d.cross_ln.gamma, sd.at("decoder.blocks.0.cross_attn_ln.weight"), "cross ln");
  expect_same(w.token_embedding, sd.at("decoder.token_embedding.weight"), "embedding");
  expect_same(w.decoder_ln.beta, sd.at("decoder.ln.bias"), "decoder ln");
}

std::string load_error(const std::string& path) {
  try {
    WhisperModel::load(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(WhisperLayouts, MlxSafetensorsF16) {
  const fs::path dir = write_mlx("parley_mlx_f16", DType::f16);
  const auto found = detect_whisper_layout(dir.string());
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->layout, WhisperLayout::mlx);
  const auto m = WhisperModel::load(dir.string());
  EXPECT_EQ(m->format(), "mlx");
  EXPECT_EQ(m->config().n_vocab, kVocab);
  EXPECT_EQ(m->config().n_text_head, 2);
  EXPECT_EQ(m->weights().conv1_weight.dtype(), DType::f32);  // the parity path
  expect_openai_weights(*m, /*positions_stored=*/false);
  fs::remove_all(dir);
}

// The file write_mlx makes, plus mlx-whisper's int64 alignment_heads tensor (the
// safetensors writer has no I64: the entry is spliced into its header).
void add_int64_tensor(const fs::path& file, const std::string& name, const Shape& shape,
                      const std::vector<int64_t>& values) {
  std::ifstream in(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  std::string header = bytes.substr(8, n);
  const std::string data = bytes.substr(8 + n);
  header.erase(header.find_last_not_of(' ') + 1);  // the writer's padding
  std::string dims;
  for (int i = 0; i < shape.ndim(); ++i) dims += (i ? "," : "") + std::to_string(shape[i]);
  header.pop_back();  // the closing brace
  header += ",\"" + name + "\":{\"dtype\":\"I64\",\"shape\":[" + dims + "],\"data_offsets\":[" +
            std::to_string(data.size()) + "," + std::to_string(data.size() + 8 * values.size()) +
            "]}}";
  header.resize((header.size() + 7) / 8 * 8, ' ');
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  const uint64_t len = header.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << header << data;
  out.write(reinterpret_cast<const char*>(values.data()), std::streamsize(8 * values.size()));
}

TEST(WhisperLayouts, MlxAlignmentHeads) {
  const fs::path dir = write_mlx("parley_mlx_heads", DType::f16);
  add_int64_tensor(dir / "weights.safetensors", "alignment_heads", {2, 2}, {0, 1, 0, 0});
  const std::vector<std::pair<int, int>> want = {{0, 1}, {0, 0}};
  EXPECT_EQ(WhisperModel::load(dir.string())->config().alignment_heads, want);
  // Not [n, 2]; a head outside the decoder.
  io::write_safetensors((dir / "weights.safetensors").string(),
                        mlx_tensors(openai_state(), DType::f16));
  add_int64_tensor(dir / "weights.safetensors", "alignment_heads", {3}, {0, 1, 0});
  std::string msg = load_error(dir.string());
  EXPECT_NE(msg.find("alignment_heads has shape [3], expected [n, 2]"), std::string::npos) << msg;
  io::write_safetensors((dir / "weights.safetensors").string(),
                        mlx_tensors(openai_state(), DType::f16));
  add_int64_tensor(dir / "weights.safetensors", "alignment_heads", {1, 2}, {0, 2});
  msg = load_error(dir.string());
  EXPECT_NE(msg.find("alignment head (0, 2) is outside the decoder"), std::string::npos) << msg;
  fs::remove_all(dir);
}

TEST(WhisperLayouts, MlxBf16ConvertsToF32) {
  const fs::path dir = write_mlx("parley_mlx_bf16", DType::bf16);
  const auto m = WhisperModel::load(dir.string());
  const Tensor want = openai_state().at("decoder.token_embedding.weight").cast(DType::bf16);
  expect_same(m->weights().token_embedding, want, "bf16 embedding");
  fs::remove_all(dir);
}

// The encoder positions mlx-whisper computes (float32 arithmetic) against the ones the real
// tiny.en stores (openai's checkpoint values, saved as float16) and against a float64
// evaluation. Angles reach 1499 rad, where one float32 ulp of the inverse timescale moves
// sin / cos by ~1e-4 (torch's own float32 table is 1.0e-4 from float64 and 3.0e-4 from the
// stored one; measured with whisper.model.sinusoids).
TEST(WhisperLayouts, SinusoidsMatchTheStoredOnes) {
  if (!fs::exists(fs::path(kModelDir) / "model.bin")) GTEST_SKIP() << "no " << kModelDir;
  const io::Ct2Model ct2 = io::read_ctranslate2(kModelDir + "/model.bin");
  const Tensor stored = ct2.tensor("encoder/position_encodings/encodings").cast(DType::f32);
  const Tensor ours = whisper_sinusoids(1500, 384);
  ASSERT_EQ(stored.shape(), ours.shape());
  double d_stored = 0, d_exact = 0;
  for (int64_t p = 0; p < 1500; ++p)
    for (int64_t i = 0; i < 192; ++i) {
      const double x = double(p) * std::exp(-std::log(10000.0) / 191.0 * double(i));
      for (int64_t half = 0; half < 2; ++half) {
        const int64_t at = p * 384 + half * 192 + i;
        const double v = ours.data<float>()[at];
        d_stored = std::max(d_stored, std::abs(v - double(stored.data<float>()[at])));
        d_exact = std::max(d_exact, std::abs(v - (half ? std::cos(x) : std::sin(x))));
      }
    }
  EXPECT_LE(d_stored, 1e-3);
  EXPECT_LE(d_exact, 2.5e-4);
  EXPECT_GT(d_exact, 0.0);  // float32 arithmetic, not a rounded float64 table
}

TEST(WhisperLayouts, MlxTokenizerFromTiktokenRanks) {
  const fs::path dir = write_mlx("parley_mlx_tok", DType::f16);
  const auto m = WhisperModel::load(dir.string());
  // No ranks anywhere: the message names every place looked at.
  const fs::path empty = fresh_dir("parley_mlx_no_vocab");
  try {
    load_tokenizer(*m, {empty.string()});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::not_found);
    EXPECT_NE(std::string(e.what()).find((empty / "gpt2.tiktoken").string()), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("PARLEY_VOCAB_DIR"), std::string::npos) << e.what();
  }
  // English-only: gpt2.tiktoken, <|endoftext|> = 50256.
  const WhisperTokenizer t = load_tokenizer(*m, {empty.string(), kData + "/whisper"});
  EXPECT_EQ(t.eot(), 50256);
  EXPECT_FALSE(t.multilingual());
  const WhisperTokenizer ref =
      WhisperTokenizer::from_tiktoken(kData + "/whisper/gpt2.tiktoken", false, int(kVocab));
  EXPECT_EQ(t.encode(" And so my fellow Americans"), ref.encode(" And so my fellow Americans"));
  // The default search path ends at the build's PARLEY_WHISPER_VOCAB_DIR.
  EXPECT_FALSE(default_vocab_dirs().empty());
  // A tiktoken file in the model directory wins.
  fs::copy_file(kData + "/whisper/gpt2.tiktoken", dir / "gpt2.tiktoken");
  EXPECT_EQ(load_tokenizer(*m, {}).eot(), 50256);
  fs::remove_all(dir);
  fs::remove_all(empty);
}

TEST(WhisperLayouts, MlxErrors) {
  // Quantized mlx weights (convert.py -q) are refused by name.
  const std::string quantized =
      std::string(kMlxConfig).substr(0, std::string(kMlxConfig).size() - 1) +
      R"(, "quantization": {"group_size": 64, "bits": 4}})";
  fs::path dir = write_mlx("parley_mlx_q", DType::f16, quantized);
  std::string msg = load_error(dir.string());
  EXPECT_NE(msg.find("quantized mlx weights"), std::string::npos) << msg;
  // A missing dimension names the key.
  write_text(dir / "config.json", R"({"n_mels": 80})");
  msg = load_error(dir.string());
  EXPECT_NE(msg.find("no integer 'n_audio_ctx'"), std::string::npos) << msg;
  write_text(dir / "config.json", "{not json");
  msg = load_error(dir.string());
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
  // Conv weights in PyTorch's layout are not mlx's channels-last one.
  write_text(dir / "config.json", kMlxConfig);
  io::TensorMap t = mlx_tensors(openai_state(), DType::f16);
  io::TensorMap torch_conv;
  for (const auto& [n, v] : t)
    torch_conv.insert("t", n,
                      n == "encoder.conv1.weight" ? openai_state().at("encoder.conv1.weight") : v);
  io::write_safetensors((dir / "weights.safetensors").string(), torch_conv);
  msg = load_error(dir.string());
  EXPECT_NE(msg.find("'encoder.conv1.weight' has shape [8, 80, 3], expected [8, 3, 80]"),
            std::string::npos)
      << msg;
  fs::remove_all(dir);
}

TEST(WhisperLayouts, GgmlF16AndF32) {
  for (int32_t ftype : {1, 0}) {
    GgmlOptions o;
    o.ftype = ftype;
    const fs::path file = write_ggml("parley_ggml_" + std::to_string(ftype), o);
    const auto found = detect_whisper_layout(file.string());
    ASSERT_TRUE(found.has_value());
    EXPECT_EQ(found->layout, WhisperLayout::ggml);
    const auto m = WhisperModel::load(file.string());
    EXPECT_EQ(m->format(), "ggml");
    expect_openai_weights(*m, /*positions_stored=*/true);
    // The tokenizer comes from the file's vocabulary.
    const WhisperTokenizer t = load_tokenizer(*m, {});
    EXPECT_EQ(t.eot(), 50256);
    EXPECT_EQ(t.no_timestamps(), 50362);
    const WhisperTokenizer ref =
        WhisperTokenizer::from_tiktoken(kData + "/whisper/gpt2.tiktoken", false, int(kVocab));
    EXPECT_EQ(t.encode(" ask not what your country"), ref.encode(" ask not what your country"));
    EXPECT_EQ(t.non_speech_tokens(), ref.non_speech_tokens());
    // A directory holding exactly one ggml file is that model.
    const fs::path dir = fresh_dir("parley_ggml_dir");
    fs::copy_file(file, dir / "ggml-model.bin");
    EXPECT_EQ(WhisperModel::load(dir.string())->format(), "ggml");
    fs::remove_all(dir);
    fs::remove(file);
  }
}

TEST(WhisperLayouts, GgmlErrors) {
  GgmlOptions quantized;
  quantized.ftype = 2;  // q4_0
  fs::path f = write_ggml("parley_ggml_q", quantized);
  std::string msg = load_error(f.string());
  EXPECT_NE(msg.find("ftype 2 (quantized) is not supported"), std::string::npos) << msg;
  GgmlOptions other_filters;
  other_filters.filters = random({kMels, 201}, 7);
  f = write_ggml("parley_ggml_mel", other_filters);
  msg = load_error(f.string());
  EXPECT_NE(msg.find("mel filters differ from Whisper's"), std::string::npos) << msg;
  GgmlOptions missing;
  missing.drop_conv1 = true;
  f = write_ggml("parley_ggml_missing", missing);
  msg = load_error(f.string());
  EXPECT_NE(msg.find("missing tensor 'encoder.conv1.weight' (expected [8, 80, 3])"),
            std::string::npos)
      << msg;
  fs::remove(f);
  // whisper.cpp's own test file: a real header, filters and vocabulary, no tensors.
  msg = load_error(kData + "/whisper/for-tests-ggml-tiny.en.bin");
  EXPECT_NE(msg.find("missing tensor 'encoder.conv1.weight'"), std::string::npos) << msg;
}

TEST(WhisperLayouts, DetectionAndNotFound) {
  const fs::path empty = fresh_dir("parley_layout_empty");
  EXPECT_FALSE(detect_whisper_layout(empty.string()).has_value());
  const std::string msg = load_error(empty.string());
  for (const char* s : {"not a Whisper model", "CTranslate2", "Hugging Face", "mlx", "ggml"})
    EXPECT_NE(msg.find(s), std::string::npos) << msg;
  // config.json alone is no model; with weights.npz it is mlx.
  write_text(empty / "config.json", kMlxConfig);
  EXPECT_FALSE(detect_whisper_layout(empty.string()).has_value());
  write_text(empty / "weights.npz", "");
  ASSERT_TRUE(detect_whisper_layout(empty.string()).has_value());
  EXPECT_EQ(detect_whisper_layout(empty.string())->layout, WhisperLayout::mlx);
  EXPECT_FALSE(detect_whisper_layout((empty / "config.json").string()).has_value());
  EXPECT_FALSE(detect_whisper_layout("/nonexistent/whisper").has_value());
  fs::remove_all(empty);
}

}  // namespace
}  // namespace parley
