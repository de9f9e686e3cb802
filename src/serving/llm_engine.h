// LlmEngine: text generation on one chat model, the token loop the CLI (`parley generate`,
// `parley chat`) and the server's chat routes share: prefill in chunks, decode steps, a
// RowSampling per choice (sampling/sampler.h), stop tokens and stop strings, streamed text
// that never splits a UTF-8 character (StreamDecoder + StopMatcher), logprobs, cancellation.
//
// One request at a time; its n choices run as rows of one batched forward. The KV blocks come
// from a KvPool (serving/kv_pool.h) with its prefix cache: a prompt whose leading full blocks
// are cached (an earlier prompt, or an earlier answer that a follow-up turn repeats) skips
// their prefill; the prompt is prefilled once and the n choices fork its blocks (the shared
// partial block copied on the first write); the computed prompt and output blocks are
// published when the request ends. Batching requests with each other is the scheduler's work
// (issue 25 item 1), over the same pool.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "llm/kv_cache.h"
#include "llm/model.h"
#include "sampling/sampler.h"
#include "serving/kv_pool.h"
#include "serving/kv_tiers.h"
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
  // The KV pool's size in GiB (`--kv-cache-gb`); 0: kv_rows rows at max_context. At least
  // one row at max_context either way.
  double kv_cache_gb = 0;
  // The prefix cache's RAM tier in GiB of host memory (0: none) and SSD tier folder
  // (`--kv-cache-dir`; empty: none). Blocks evicted from the pool go there; the SSD tier is
  // written at eviction and when the engine is destroyed, and read back by a later process.
  double kv_ram_gb = 0;
  std::string kv_cache_dir;
};

struct GenerateRequest {
  std::vector<int32_t> prompt;  // token ids, non-empty
  SamplingParams params;        // max_tokens none: up to the context length
  int n = 1;                    // choices, each its own random stream (stream = index)
  std::string cache_salt;       // the prefix cache's namespace: only equal salts share blocks
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
  int64_t cached_tokens = 0;      // prompt tokens whose KV came from the prefix cache
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
  ~LlmEngine();  // the cached blocks onto the SSD tier, when there is one

  const LlmModel& model() const { return model_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  int64_t max_context() const { return max_context_; }

  // Runs the request to the end of every choice. Throws Error(invalid_argument) for an
  // empty prompt, a prompt of max_context tokens or more (the message starts with
  // "context_length_exceeded:"), prompt + max_tokens beyond max_context, bad sampling
  // parameters or n < 1; Error(resource_exhausted) when n choices do not fit the KV cache.
  // Serialized: a second caller waits for the first.
  GenerateResult generate(const GenerateRequest& request, const TokenCallback& on_token = {});

  KvPoolStats kv_stats();
  KvTierStats kv_tier_stats();

 private:
  const LlmModel& model_;
  const Tokenizer& tokenizer_;
  LlmEngineOptions options_;
  int64_t max_context_;
  std::mutex mutex_;  // one request at a time
  KvCache cache_;
  std::unique_ptr<KvTiers> tiers_;
  KvPool pool_;
  KvRequestId next_request_ = 1;
  ForwardScratch scratch_;
};

}  // namespace parley
