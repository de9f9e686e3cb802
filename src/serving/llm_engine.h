// LlmEngine: text generation on one chat model, the token loop the CLI (`parley generate`,
// `parley chat`) and the server's chat routes share: prefill in chunks, decode steps, a
// RowSampling per choice (sampling/sampler.h), stop tokens and stop strings, streamed text
// that never splits a UTF-8 character (StreamDecoder + StopMatcher), logprobs, cancellation.
//
// One request at a time; its n choices run as rows of one batched forward (each with the
// prompt prefilled in its own KV blocks: sharing the prompt's blocks is the prefix cache's
// work, issue 25, and so is batching requests with each other). The engine owns the KV
// blocks of its model and hands them out per request from a free list; the scheduler's
// KvPool replaces that list.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "llm/kv_cache.h"
#include "llm/model.h"
#include "sampling/sampler.h"
#include "text/tokenizer.h"

namespace parley {

struct LlmEngineOptions {
  // The longest sequence (prompt + output) a request may reach; 0: the model's
  // max_position_embeddings, capped at 8192 so the parity path's f32 KV stays small.
  int64_t max_context = 0;
  // Rows (choices) of one request at full context the KV cache holds; n beyond that is
  // accepted while the choices' sequences fit in the blocks.
  int64_t kv_rows = 1;
  // Prompt tokens per prefill call (a row's chunk); bounds the activations' memory.
  int64_t prefill_chunk = 512;
};

struct GenerateRequest {
  std::vector<int32_t> prompt;  // token ids, non-empty
  SamplingParams params;        // max_tokens none: up to the context length
  int n = 1;                    // choices, each its own random stream (stream = index)
};

// Why a choice ended: a stop token or stop string, max_tokens or the context, or the
// caller's cancellation.
enum class ChoiceFinish { none, stop, length, cancelled };
std::string_view to_string(ChoiceFinish f);  // "stop", "length", "cancelled", ""

struct ChoiceOutput {
  std::vector<int32_t> tokens;        // every accepted token (stop token included)
  std::string text;                   // the streamed text: no stop string, no special tokens
  std::vector<SampleResult> samples;  // per accepted token, with logprobs when asked
  ChoiceFinish finish = ChoiceFinish::none;
  int stop_index = -1;  // which stop string ended it, -1 when none did
};

struct GenerateResult {
  std::vector<ChoiceOutput> choices;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;  // accepted tokens over all choices
};

// Streaming: called on the engine's thread after each accepted token of a choice, with
// the text that token released (possibly empty: held back for UTF-8 or a possible stop
// string). Return false to cancel the whole request (a client that went away).
using TokenCallback =
    std::function<bool(int choice, std::string_view delta, const SampleResult& sample)>;

// The model folder's generation_config.json sampling defaults (temperature, top_p, top_k,
// min_p, repetition_penalty), over SamplingParams' own where the file has none (or no
// file). do_sample false there means greedy (temperature 0), as transformers reads it.
SamplingParams generation_defaults(const std::string& model_dir);

class LlmEngine {
 public:
  LlmEngine(const LlmModel& model, const Tokenizer& tokenizer, LlmEngineOptions options = {});

  const LlmModel& model() const { return model_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  int64_t max_context() const { return max_context_; }

  // Runs the request to the end of every choice. Throws Error(invalid_argument) for an
  // empty prompt, a prompt of max_context tokens or more (the message starts with
  // "context_length_exceeded:"), prompt + max_tokens beyond max_context, bad sampling
  // parameters or n < 1; Error(resource_exhausted) when n choices do not fit the KV cache.
  // Serialized: a second caller waits for the first.
  GenerateResult generate(const GenerateRequest& request, const TokenCallback& on_token = {});

 private:
  std::vector<int32_t> take_blocks(int64_t n);
  void give_blocks(const std::vector<int32_t>& blocks);

  const LlmModel& model_;
  const Tokenizer& tokenizer_;
  LlmEngineOptions options_;
  int64_t max_context_;
  std::mutex mutex_;  // one request at a time
  KvCache cache_;
  ForwardScratch scratch_;
  std::vector<int32_t> free_blocks_;
};

}  // namespace parley
