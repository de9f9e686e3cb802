// LlmConfig parsing (every family, unknown types, unsupported features) and weight loading
// errors (a missing tensor, a shape that disagrees with config.json).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "io/safetensors.h"
#include "llm/config.h"
#include "llm/model.h"
#include "llm/synth.h"
#include "llm_test_util.h"

namespace parley {
namespace {

using nlohmann::json;

LlmConfig parse(const json& j) { return parse_llm_config(j.dump(), "test"); }
json synth_json(const std::string& shape) { return json::parse(llm_synth_config_json(shape, 0)); }

ErrorKind error_kind(const std::function<void()>& fn, std::string* message = nullptr) {
  try {
    fn();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.kind();
  }
  ADD_FAILURE() << "no error thrown";
  return ErrorKind::internal;
}

TEST(LlmConfig, Qwen3RealShape) {
  const LlmConfig c = parse(synth_json("qwen3-0.6b"));
  EXPECT_EQ(c.family, LlmFamily::qwen3);
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.n_layers, 28);
  EXPECT_EQ(c.n_heads, 16);
  EXPECT_EQ(c.n_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);  // its own key, not 1024 / 16
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{151645});
  EXPECT_EQ(c.bos_token_id, 151643);
}

TEST(LlmConfig, LlamaWithLlama3Scaling) {
  const LlmConfig c = parse(synth_json("llama-3.2-1b"));
  EXPECT_EQ(c.family, LlmFamily::llama);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 32.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.high_freq_factor, 4.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.original_max_position_embeddings, 8192.0f);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));
  EXPECT_EQ(c.head_dim, 64);
}

TEST(LlmConfig, LlamaDerivesHeadDimAndMistralAlias) {
  json j = synth_json("tiny-llama");
  j.erase("head_dim");
  j["model_type"] = "mistral";
  const LlmConfig c = parse(j);
  EXPECT_EQ(c.family, LlmFamily::llama);
  EXPECT_EQ(c.head_dim, 128 / 4);
  j["sliding_window"] = 4096;
  EXPECT_EQ(error_kind([&] { parse(j); }), ErrorKind::unsupported);
}

TEST(LlmConfig, Qwen2HasBiases) {
  const LlmConfig c = parse(synth_json("qwen2-0.5b"));
  EXPECT_EQ(c.family, LlmFamily::qwen2);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_EQ(c.n_kv_heads, 2);
}

TEST(LlmConfig, Qwen3MoeLayers) {
  const LlmConfig c = parse(synth_json("tiny-qwen3_moe"));
  EXPECT_EQ(c.family, LlmFamily::qwen3_moe);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 64);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_TRUE(c.is_moe_layer(0));
  EXPECT_FALSE(c.is_moe_layer(1));  // mlp_only_layers [1]
  EXPECT_TRUE(c.is_moe_layer(2));
  json j = synth_json("tiny-qwen3_moe");
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = json::array();
  const LlmConfig s = parse(j);
  EXPECT_FALSE(s.is_moe_layer(0));
  EXPECT_TRUE(s.is_moe_layer(1));
}

TEST(LlmConfig, Gemma3SlidingPattern) {
  const LlmConfig c = parse(synth_json("gemma-3-1b"));
  EXPECT_EQ(c.family, LlmFamily::gemma3);
  EXPECT_EQ(c.sliding_window, 512);
  EXPECT_FLOAT_EQ(c.query_pre_attn_scalar, 256.0f);
  EXPECT_DOUBLE_EQ(c.rope_local_base_freq, 10000.0);
  ASSERT_EQ(c.layer_sliding.size(), 26u);
  for (int l = 0; l < 26; ++l) EXPECT_EQ(c.is_sliding_layer(l), (l + 1) % 6 != 0) << l;
  // Without layer_types, sliding_window_pattern decides; a multimodal config nests it.
  json j = synth_json("tiny-gemma3");
  j.erase("layer_types");
  j["sliding_window_pattern"] = 2;
  json outer = {{"model_type", "gemma3"}, {"text_config", j}};
  const LlmConfig m = parse(outer);
  EXPECT_EQ(m.model_type, "gemma3_text");
  EXPECT_TRUE(m.is_sliding_layer(0));
  EXPECT_FALSE(m.is_sliding_layer(1));
  EXPECT_EQ(m.rope_scaling.type, "linear");
  j["hidden_activation"] = "relu";
  EXPECT_EQ(error_kind([&] { parse(j); }), ErrorKind::unsupported);
}

TEST(LlmConfig, Transformers5RopeParameters) {
  json j = synth_json("tiny-llama");
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "llama3"},   {"rope_theta", 500000.0},
                          {"factor", 8.0},           {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  const LlmConfig c = parse(j);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 8.0f);
  json g = synth_json("tiny-gemma3");
  g.erase("rope_theta");
  g.erase("rope_scaling");
  g.erase("rope_local_base_freq");
  g["rope_parameters"] = {
      {"full_attention", {{"rope_type", "linear"}, {"factor", 4.0}, {"rope_theta", 1e6}}},
      {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 20000.0}}}};
  const LlmConfig m = parse(g);
  EXPECT_DOUBLE_EQ(m.rope_theta, 1e6);
  EXPECT_EQ(m.rope_scaling.type, "linear");
  EXPECT_FLOAT_EQ(m.rope_scaling.factor, 4.0f);
  EXPECT_DOUBLE_EQ(m.rope_local_base_freq, 20000.0);
}

TEST(LlmConfig, UnknownAndUnsupported) {
  json j = synth_json("tiny-llama");
  j["model_type"] = "falcon";
  std::string msg;
  EXPECT_EQ(error_kind([&] { parse(j); }, &msg), ErrorKind::unsupported);
  EXPECT_NE(msg.find("falcon"), std::string::npos) << msg;
  j = synth_json("tiny-llama");
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_EQ(error_kind([&] { parse(j); }, &msg), ErrorKind::unsupported);
  EXPECT_NE(msg.find("yarn"), std::string::npos) << msg;
  j = synth_json("tiny-llama");
  j.erase("hidden_size");
  EXPECT_EQ(error_kind([&] { parse(j); }, &msg), ErrorKind::invalid_argument);
  EXPECT_NE(msg.find("hidden_size"), std::string::npos) << msg;
  j = synth_json("tiny-llama");
  j["num_key_value_heads"] = 3;
  EXPECT_EQ(error_kind([&] { parse(j); }), ErrorKind::invalid_argument);
  EXPECT_EQ(error_kind([&] { parse_llm_config("{not json", "x"); }), ErrorKind::invalid_argument);
}

TEST(LlmWeights, MissingTensorIsNamed) {
  test::TempDir tmp("missing");
  const std::string dir = test::write_tiny(tmp, "tiny-qwen3");
  io::SafetensorsFile st = io::read_safetensors(dir + "/model.safetensors");
  io::TensorMap kept;
  const std::string gone = "model.layers.1.self_attn.k_norm.weight";
  for (const auto& [name, t] : st.tensors)
    if (name != gone) kept.insert("test", name, t.to(Device::cpu));
  st = {};
  io::write_safetensors(dir + "/model.safetensors", kept);
  std::string msg;
  EXPECT_EQ(error_kind([&] { LlmModel::load(dir); }, &msg), ErrorKind::not_found);
  EXPECT_NE(msg.find(gone), std::string::npos) << msg;
}

TEST(LlmWeights, ShapeMismatchIsNamed) {
  test::TempDir tmp("shape");
  const std::string dir = test::write_tiny(tmp, "tiny-llama");
  json j = json::parse(llm_synth_config_json("tiny-llama", 0));
  j["intermediate_size"] = 320;
  std::ofstream(dir + "/config.json") << j.dump();
  std::string msg;
  EXPECT_EQ(error_kind([&] { LlmModel::load(dir); }, &msg), ErrorKind::invalid_argument);
  EXPECT_NE(msg.find("model.layers.0.mlp.gate_proj.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[320, 128]"), std::string::npos) << msg;
}

TEST(LlmWeights, ShardedCheckpointLoadsLikeOneFile) {
  test::TempDir tmp("shards");
  const std::string dir = test::write_tiny(tmp, "tiny-llama");
  io::TensorMap shard[2];
  json index;
  {
    io::SafetensorsFile st = io::read_safetensors(dir + "/model.safetensors");
    int i = 0;
    for (const auto& [name, t] : st.tensors) {
      const int k = i++ % 2;
      shard[k].insert("test", name, t.to(Device::cpu));
      index["weight_map"][name] = "model-0000" + std::to_string(k + 1) + "-of-00002.safetensors";
    }
  }
  const LlmModel one = LlmModel::load(dir);
  std::filesystem::remove(dir + "/model.safetensors");
  for (int k = 0; k < 2; ++k)
    io::write_safetensors(dir + "/model-0000" + std::to_string(k + 1) + "-of-00002.safetensors",
                          shard[k]);
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump();
  const LlmModel two = LlmModel::load(dir);
  const Tensor& a = one.weights().layers[1].down;
  const Tensor& b = two.weights().layers[1].down;
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
  std::filesystem::remove(dir + "/model-00002-of-00002.safetensors");
  std::string msg;
  EXPECT_EQ(error_kind([&] { LlmModel::load(dir); }, &msg), ErrorKind::not_found);
  EXPECT_NE(msg.find("model-00002-of-00002.safetensors"), std::string::npos) << msg;
}

TEST(LlmWeights, LoadsEveryTinyFamilyAndBf16) {
  test::TempDir tmp("load");
  for (const char* shape :
       {"tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-qwen3_moe", "tiny-gemma3"}) {
    const LlmModel m = LlmModel::load(test::write_tiny(tmp, shape));
    EXPECT_EQ(m.weights().layers.size(), size_t(m.config().n_layers)) << shape;
  }
  LlmSynthOptions o;
  o.shape = "tiny-qwen3";
  o.dtype = DType::bf16;
  o.layers = 1;
  write_synth_llm(o, tmp.str() + "/bf16");
  const LlmModel m = LlmModel::load(tmp.str() + "/bf16");
  EXPECT_EQ(m.config().n_layers, 1);
  EXPECT_EQ(m.weights().embed.dtype(), DType::f32);  // widened at load
}

}  // namespace
}  // namespace parley
