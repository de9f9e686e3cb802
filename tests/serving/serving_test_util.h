// Shared pieces of the serving tests: a small KV-cache shape and token runs for the pool and
// scheduler tests (fake requests, exact block ids), and one synthetic tiny-llama with the
// Qwen3 tokenizer for the engine tests (made once per test binary).
#pragma once

#include <exception>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "llm/llm_test_util.h"
#include "llm/model.h"
#include "serving/llm_engine.h"
#include "text/tokenizer.h"

namespace parley::test {

// A KvCache shape with small blocks: 2 layers, one KV head of 4.
inline LlmConfig tiny_kv_config() {
  LlmConfig c;
  c.n_layers = 2;
  c.n_kv_heads = 1;
  c.head_dim = 4;
  return c;
}

// n token ids counting from `first`.
inline std::vector<int32_t> seq(int64_t n, int32_t first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

struct TinyLlama {
  TempDir dir{"serving_engine"};
  LlmModel model = LlmModel::load(write_tiny(dir, "tiny-llama"));
  Tokenizer tokenizer = Tokenizer::from_file(std::string(PARLEY_TEST_DATA) + "/llm/tokenizer.json");
};

inline TinyLlama& tiny_llama() {
  static TinyLlama t;
  return t;
}

// The committed trained chat model (models/parley-chat-target) and its draft, f32 on the CPU.
struct TrainedChat {
  std::string dir = std::string(PARLEY_MODELS_DIR) + "/parley-chat-target";
  LlmModel model = LlmModel::load(dir);
  LlmModel draft = LlmModel::load(std::string(PARLEY_MODELS_DIR) + "/parley-chat-draft");
  Tokenizer tokenizer = Tokenizer::from_file(dir + "/tokenizer.json");
};

inline TrainedChat& trained_chat() {
  static TrainedChat t;
  return t;
}

// A user turn in Qwen3's chat format with the empty thinking block the model was trained on.
inline std::vector<int32_t> trained_chat_prompt(const std::string& user) {
  return trained_chat().tokenizer.encode(
      "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
      /*add_special_tokens=*/false);
}

// Every request submitted to `e` at once, stepped until all are done (a request's error is
// rethrown; an engine that stops making progress throws).
inline std::vector<GenerateResult> run_together(LlmEngine& e,
                                                const std::vector<GenerateRequest>& reqs) {
  std::vector<GenerateResult> out(reqs.size());
  size_t done = 0;
  for (size_t i = 0; i < reqs.size(); ++i)
    e.submit(reqs[i], {}, [&, i](GenerateResult* r, std::exception_ptr err) {
      if (err) std::rethrow_exception(err);
      out[i] = std::move(*r);
      ++done;
    });
  while (done < reqs.size())
    if (!e.step()) throw std::runtime_error("the engine made no progress");
  return out;
}

}  // namespace parley::test
