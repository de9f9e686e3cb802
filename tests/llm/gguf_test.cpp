// GGUF chat models (llm/gguf_loader.h): a tiny Qwen3 GGUF written here loads with the config
// its metadata implies and runs; bad files (an unknown architecture, a missing tensor, a
// missing key, a truncated file, a folder of two) fail with an Error naming what is wrong.
// The numbers against Hugging Face folders are tests/parity/llm_gguf_test.py's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/error.h"
#include "llm/gguf_loader.h"
#include "llm/model.h"
#include "llm_test_util.h"

namespace parley {
namespace {

// A minimal GGUF v3 writer: string / u32 / f32 metadata and f32 tensors.
class GgufBuilder {
 public:
  void str(const std::string& k, const std::string& v) {
    key(k, 8);
    put_str(kv_, v);
  }
  void u32(const std::string& k, uint32_t v) {
    key(k, 4);
    put(kv_, v);
  }
  void f32(const std::string& k, float v) {
    key(k, 6);
    put(kv_, v);
  }
  // shape row-major ([out, in]); written innermost first as GGUF lists it.
  void tensor(const std::string& name, std::vector<int64_t> shape, float scale = 0.05f) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    put_str(infos_, name);
    put(infos_, uint32_t(shape.size()));
    for (auto it = shape.rbegin(); it != shape.rend(); ++it) put(infos_, uint64_t(*it));
    put(infos_, uint32_t(0));  // f32
    put(infos_, uint64_t(data_.size()));
    for (int64_t i = 0; i < n; ++i) put(data_, scale * float((i * 37 + 11) % 17 - 8) / 8.0f);
    while (data_.size() % 32) data_.push_back(0);
    ++n_tensors_;
  }
  void write(const std::string& path) const {
    std::string out = "GGUF";
    put(out, uint32_t(3));
    put(out, uint64_t(n_tensors_));
    put(out, uint64_t(n_kv_));
    out += kv_;
    out += infos_;
    while (out.size() % 32) out.push_back(0);
    out += data_;
    std::ofstream(path, std::ios::binary).write(out.data(), std::streamsize(out.size()));
  }

 private:
  template <typename T>
  static void put(std::string& s, T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  static void put_str(std::string& s, const std::string& v) {
    put(s, uint64_t(v.size()));
    s += v;
  }
  void key(const std::string& k, uint32_t type) {
    put_str(kv_, k);
    put(kv_, type);
    ++n_kv_;
  }
  std::string kv_, infos_, data_;
  int n_kv_ = 0, n_tensors_ = 0;
};

constexpr int64_t kH = 32, kHeads = 2, kKv = 1, kD = 16, kFf = 64, kVocab = 16;

// A one-layer Qwen3 (tied embeddings); `skip` names a tensor to leave out.
GgufBuilder tiny_qwen3(const std::string& arch = "qwen3", const std::string& skip = "") {
  GgufBuilder b;
  b.str("general.architecture", arch);
  const std::string a = arch + ".";
  b.u32(a + "context_length", 256);
  b.u32(a + "embedding_length", kH);
  b.u32(a + "block_count", 1);
  b.u32(a + "feed_forward_length", kFf);
  b.u32(a + "attention.head_count", kHeads);
  b.u32(a + "attention.head_count_kv", kKv);
  b.u32(a + "attention.key_length", kD);
  b.f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  b.f32(a + "rope.freq_base", 1e6f);
  b.u32("tokenizer.ggml.eos_token_id", 3);
  const std::map<std::string, std::vector<int64_t>> tensors = {
      {"token_embd.weight", {kVocab, kH}},
      {"output_norm.weight", {kH}},
      {"blk.0.attn_norm.weight", {kH}},
      {"blk.0.attn_q.weight", {kHeads * kD, kH}},
      {"blk.0.attn_k.weight", {kKv * kD, kH}},
      {"blk.0.attn_v.weight", {kKv * kD, kH}},
      {"blk.0.attn_output.weight", {kH, kHeads * kD}},
      {"blk.0.attn_q_norm.weight", {kD}},
      {"blk.0.attn_k_norm.weight", {kD}},
      {"blk.0.ffn_norm.weight", {kH}},
      {"blk.0.ffn_gate.weight", {kFf, kH}},
      {"blk.0.ffn_up.weight", {kFf, kH}},
      {"blk.0.ffn_down.weight", {kH, kFf}},
  };
  for (const auto& [name, shape] : tensors)
    if (name != skip) b.tensor(name, shape);
  return b;
}

ErrorKind error_of(const std::function<void()>& fn, std::string* message) {
  try {
    fn();
  } catch (const Error& e) {
    *message = e.what();
    return e.kind();
  }
  ADD_FAILURE() << "no error thrown";
  return ErrorKind::internal;
}

TEST(LlmGguf, TinyQwen3LoadsAndRuns) {
  test::TempDir dir("gguf_ok");
  const std::string path = (dir.path() / "m.gguf").string();
  tiny_qwen3().write(path);
  ASSERT_TRUE(is_gguf_model(path));
  ASSERT_TRUE(is_gguf_model(dir.str()));  // a folder of one .gguf and no config.json
  const LlmModel m = LlmModel::load(dir.str());
  const LlmConfig& c = m.config();
  EXPECT_EQ(c.family, LlmFamily::qwen3);
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_EQ(c.vocab_size, kVocab);
  EXPECT_EQ(c.hidden_size, kH);
  EXPECT_EQ(c.n_kv_heads, kKv);
  EXPECT_EQ(c.head_dim, kD);
  EXPECT_EQ(c.intermediate_size, kFf);
  EXPECT_EQ(c.max_position_embeddings, 256);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{3});
  EXPECT_EQ(m.weights().lm_head.data<float>(), m.weights().embed.data<float>());

  KvCache cache(c, 2);
  const std::vector<int32_t> ids = {1, 5, 7}, table = {0};
  Batch batch;
  batch.rows.push_back({ids, 0, table, true, true});
  Tensor logits;
  ForwardScratch scratch;
  m.forward(batch, cache, logits, scratch);
  ASSERT_EQ(logits.shape(), Shape({3, kVocab}));
  for (int64_t i = 0; i < logits.numel(); ++i) ASSERT_TRUE(std::isfinite(logits.data<float>()[i]));
}

TEST(LlmGguf, UnknownArchitectureIsUnsupported) {
  test::TempDir dir("gguf_arch");
  const std::string path = (dir.path() / "m.gguf").string();
  tiny_qwen3("mamba").write(path);
  std::string msg;
  EXPECT_EQ(error_of([&] { LlmModel::load(path); }, &msg), ErrorKind::unsupported);
  EXPECT_NE(msg.find("'mamba'"), std::string::npos) << msg;
}

TEST(LlmGguf, MissingTensorIsNamed) {
  test::TempDir dir("gguf_missing");
  const std::string path = (dir.path() / "m.gguf").string();
  tiny_qwen3("qwen3", "blk.0.ffn_up.weight").write(path);
  std::string msg;
  EXPECT_EQ(error_of([&] { LlmModel::load(path); }, &msg), ErrorKind::not_found);
  EXPECT_NE(msg.find("'blk.0.ffn_up.weight'"), std::string::npos) << msg;
}

TEST(LlmGguf, MissingKeyIsNamed) {
  test::TempDir dir("gguf_key");
  const std::string path = (dir.path() / "m.gguf").string();
  GgufBuilder b;
  b.str("general.architecture", "llama");
  b.tensor("token_embd.weight", {kVocab, kH});
  b.write(path);
  std::string msg;
  EXPECT_EQ(error_of([&] { LlmModel::load(path); }, &msg), ErrorKind::not_found);
  EXPECT_NE(msg.find("llama.embedding_length"), std::string::npos) << msg;
}

TEST(LlmGguf, TruncatedFileIsInvalid) {
  test::TempDir dir("gguf_trunc");
  const std::string path = (dir.path() / "m.gguf").string();
  tiny_qwen3().write(path);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  std::string msg;
  EXPECT_EQ(error_of([&] { LlmModel::load(path); }, &msg), ErrorKind::invalid_argument);
  EXPECT_NE(msg.find("m.gguf"), std::string::npos) << msg;
}

TEST(LlmGguf, FolderOfTwoIsAmbiguous) {
  test::TempDir dir("gguf_two");
  tiny_qwen3().write((dir.path() / "a.gguf").string());
  tiny_qwen3().write((dir.path() / "b.gguf").string());
  std::string msg;
  EXPECT_EQ(error_of([&] { LlmModel::load(dir.str()); }, &msg), ErrorKind::invalid_argument);
  EXPECT_NE(msg.find("2 .gguf files"), std::string::npos) << msg;
}

}  // namespace
}  // namespace parley
