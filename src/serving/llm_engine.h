// LlmEngine: text generation on one chat model, the token loop the CLI (`parley generate`,
// `parley chat`) and the server's chat routes share: a continuously batched engine
// (serving/scheduler.h) over a KvPool (serving/kv_pool.h) with its prefix cache, a
// RowSampling per choice (sampling/sampler.h), stop tokens and stop strings, streamed text
// that never splits a UTF-8 character (StreamDecoder + StopMatcher), logprobs, cancellation.
//
// Requests are submitted (submit) and advanced by step(), one scheduler iteration: the
// running requests' decode tokens and the waiting ones' prefill chunks go through the model
// together (one forward with mixed prefill, or a decode forward then a prefill forward),
// then every row that reached its last token samples. A request's n choices share its
// prompt: it is prefilled once, then its blocks are forked (the shared partial block copied
// on the first write). A prompt whose leading full blocks are cached (an earlier prompt, or
// an earlier answer that a follow-up turn repeats) skips their prefill; computed blocks are
// published as they fill. When the blocks run out the newest request is preempted and later
// recomputed (its output so far kept: nothing is emitted twice).
//
// Speculative decoding (a request's or the engine's SpeculativeConfig): before each plan,
// every decoding choice's proposer (serving/speculative.h) guesses up to k next tokens;
// the scheduler gives its decode row those drafts as the token budget allows, the forward
// returns logits at every position of the row, and the verifier (serving/verifier.h)
// accepts the tokens plain decoding would have produced (1 to k + 1 of them). The KV of
// rejected positions is rolled back (their blocks freed). Output, logprobs, stop strings,
// seeds and cancellation are those of the same request without speculation.
//
// Threads: submit, step and generate run on one thread (the engine's); stats() from any.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/constraint.h"
#include "llm/kv_cache.h"
#include "llm/model.h"
#include "sampling/sampler.h"
#include "serving/draft_runner.h"
#include "serving/kv_pool.h"
#include "serving/kv_tiers.h"
#include "serving/mask_prefetch.h"
#include "serving/scheduler.h"
#include "serving/speculative.h"
#include "serving/trace.h"
#include "text/tokenizer.h"

namespace parley {

struct LlmEngineOptions {
  // The longest sequence (prompt + output) a request may reach; 0: the model's
  // max_position_embeddings, capped at 8192 so the parity path's f32 KV stays small.
  int64_t max_context = 0;
  // Rows (choices) of one request at full context the KV cache holds; n beyond that is
  // accepted while the choices' sequences fit in the blocks.
  int64_t kv_rows = 1;
  // Prompt tokens of one request per iteration (a row's chunk); bounds the activations'
  // memory.
  int64_t prefill_chunk = 2048;
  // The scheduler: tokens per iteration (`--max-batch-tokens`), requests running at once
  // (`--max-running`; 1 runs them one after another), and whether prefill chunks share the
  // decode rows' forward (`--mixed-prefill`) or run in a forward of their own after it.
  int64_t max_batch_tokens = 8192;
  int max_running = 8;
  bool mixed_prefill = true;
  // A Chrome trace of every iteration (`--trace FILE`): schedule, forward and sampling spans
  // with their rows, tokens and request numbers. Empty: none.
  std::string trace_path;
  // The KV pool's size in GiB (`--kv-cache-gb`); 0: kv_rows rows at max_context (at most
  // 4 GiB on the CPU). At least one row at max_context either way.
  double kv_cache_gb = 0;
  // The prefix cache's RAM tier in GiB of host memory (0: none) and SSD tier folder
  // (`--kv-cache-dir`; empty: none). Blocks evicted from the pool go there; the SSD tier is
  // written at eviction and when the engine is destroyed, and read back by a later process.
  double kv_ram_gb = 0;
  std::string kv_cache_dir;
  // Speculative decoding for requests that do not choose (`--speculative`,
  // `--num-speculative-tokens`, `--prompt-lookup-min/max`); none by default.
  SpeculativeConfig speculative;
  // Constrained requests: the bytes a grammar forces are drafted for the verifier (up to 8
  // tokens a step, whatever `speculative` says); false: they are decoded one by one.
  bool forced_drafts = true;
  // Constrained rows' grammar masks computed on threads of their own while the forward
  // pass runs (MaskPrefetch): automatic does so when the model is on CUDA (on the CPU the
  // forward pass uses every core); on and off force it (answers are the same either way).
  enum class MaskOverlap { automatic, on, off };
  MaskOverlap mask_overlap = MaskOverlap::automatic;
};

struct GenerateRequest {
  std::vector<int32_t> prompt;  // token ids, non-empty
  SamplingParams params;        // max_tokens none: up to the context length
  int n = 1;                    // choices, each its own random stream (stream = index)
  std::string cache_salt;       // the prefix cache's namespace: only equal salts share blocks
  // This request's speculative decoding; none: the engine's (LlmEngineOptions::speculative),
  // or with a prediction and no engine method, prompt lookup over it (prediction_config).
  std::optional<SpeculativeConfig> speculative;
  // The output the client expects (OpenAI's Predicted Outputs): drafts come from it first.
  std::vector<int32_t> prediction;
  // What the whole answer must be in the language of (grammar/constraint.h: a regular
  // expression, GBNF, a JSON Schema, any JSON object), or none. Such a request decodes
  // without speculation for now.
  GrammarSpec grammar;
};

// The vocabulary's token bytes as grammar masks walk them: ids below `vocab` with a token
// that is not special (special tokens are never allowed by a grammar).
std::shared_ptr<const TokenTrie> make_token_trie(const Tokenizer& tokenizer, int32_t vocab);

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

// Where a request's time went, in milliseconds (the answer's `timings`).
struct GenerateTimings {
  double queue_ms = 0;        // submitted until its first iteration
  double prefill_ms = 0;      // first iteration until its first token
  double first_token_ms = 0;  // submitted until its first token
  double per_token_ms = 0;    // mean gap between its later tokens (0 with one step)
  int preemptions = 0;        // times it was preempted and recomputed
};

struct GenerateResult {
  std::vector<ChoiceOutput> choices;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;  // accepted tokens over all choices
  int64_t cached_tokens = 0;      // prompt tokens whose KV came from the prefix cache
  // Speculative decoding: draft tokens verified for it, and those the model accepted.
  int64_t draft_tokens = 0;
  int64_t accepted_draft_tokens = 0;
  int64_t forced_draft_tokens = 0;  // drafts a grammar forced (part of draft_tokens)
  GenerateTimings timings;
};

// Streaming: called on the engine's thread after each accepted token of a choice, with
// the text that token released (possibly empty: held back for UTF-8 or a possible stop
// string). Return false to cancel the whole request (a client that went away).
using TokenCallback =
    std::function<bool(int choice, std::string_view delta, const SampleResult& sample)>;
// Called once when the request ends, on the engine's thread: its result (choices cancelled
// by a callback or the cancel flag end with ChoiceFinish::cancelled), or the error that
// ended it (a failed forward).
using DoneCallback = std::function<void(GenerateResult* result, std::exception_ptr error)>;

struct LlmEngineStats {
  SchedulerStats scheduler;
  KvPoolStats kv;
  KvTierStats tiers;
  uint64_t prompt_tokens = 0;     // of finished requests
  uint64_t generated_tokens = 0;  // sampled, all requests
  uint64_t forwards = 0;          // model forward calls
  double busy_seconds = 0;        // in step()
  double forward_seconds = 0;     // of which in the model's forward (the rest is host work)
  // Speculative decoding: rows verified, draft tokens they carried, drafts accepted.
  uint64_t spec_rows = 0;
  uint64_t spec_draft_tokens = 0;
  uint64_t spec_accepted_tokens = 0;
  uint64_t spec_forced_tokens = 0;   // drafts a grammar forced (part of spec_draft_tokens)
  uint64_t spec_disabled_steps = 0;  // steps without drafts: disable_by_batch_size reached
  uint64_t draft_forwards = 0;       // the draft model's (SpecMethod::draft)
  double draft_seconds = 0;
  // Grammar masks computed beside the forward pass (MaskPrefetch), and the time the engine
  // waited for them after the forward had returned.
  uint64_t prefetched_masks = 0;
  double mask_wait_seconds = 0;
};

// The model folder's generation_config.json sampling defaults (temperature, top_p, top_k,
// min_p, repetition_penalty), over SamplingParams' own where the file has none (or no
// file). do_sample false there means greedy (temperature 0), as transformers reads it.
SamplingParams generation_defaults(const std::string& model_dir);

class LlmEngine {
 public:
  // draft (optional, outliving the engine): the draft model of SpecMethod::draft, on the
  // model's device, with its vocabulary.
  LlmEngine(const LlmModel& model, const Tokenizer& tokenizer, LlmEngineOptions options = {},
            const LlmModel* draft = nullptr);
  ~LlmEngine();  // the cached blocks onto the SSD tier, when there is one

  const LlmModel& model() const { return model_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  int64_t max_context() const { return max_context_; }

  // Queues a request. Throws Error(invalid_argument) for an empty prompt, a prompt of
  // max_context tokens or more (the message starts with "context_length_exceeded:"),
  // prompt + max_tokens beyond max_context, bad sampling parameters or n < 1;
  // Error(resource_exhausted) when its n choices could not fit the KV cache even alone.
  // `cancel`, when given, is polled every iteration: set, the request ends (cancelled).
  void submit(const GenerateRequest& request, TokenCallback on_token, DoneCallback on_done,
              std::shared_ptr<const std::atomic<bool>> cancel = nullptr);
  // One iteration; false when it had nothing to run (idle()).
  bool step();
  bool idle() const { return scheduler_.idle(); }
  // submit, then step() until the request ends; rethrows its error. Not beside another
  // thread stepping this engine.
  GenerateResult generate(const GenerateRequest& request, const TokenCallback& on_token = {});

  LlmEngineStats stats() const;  // a snapshot from the last iteration; any thread
  KvPoolStats kv_stats() const { return stats().kv; }
  KvTierStats kv_tier_stats() const { return stats().tiers; }

 private:
  struct Active;
  void propose_drafts();  // every decoding sequence's drafts for the next plan
  // The tokens of the bytes `constraint` forces next (at most k; the last one only when
  // nothing can follow it) into out; false when none.
  bool propose_forced(TokenConstraint& constraint, int k, std::vector<int32_t>& out);
  static constexpr int kMaxForcedDrafts = 8;
  static constexpr size_t kMaxForcedBytes = 64;
  void run_rows(std::span<const ScheduledRow> rows);
  void accept(Active& a, int choice, const SampleResult& s);
  void finish(Active& a, std::exception_ptr error = nullptr);
  void publish_stats();

  const LlmModel& model_;
  const Tokenizer& tokenizer_;
  LlmEngineOptions options_;
  int64_t max_context_;
  std::vector<int32_t> eos_;
  KvCache cache_;
  std::unique_ptr<KvTiers> tiers_;
  KvPool pool_;
  Scheduler scheduler_;
  KvRequestId next_id_ = 1;
  ForwardScratch scratch_;
  std::list<std::unique_ptr<Active>> active_;
  Batch batch_;
  std::vector<int32_t> verify_tokens_;  // the verify rows' tokens (last accepted + drafts)
  SuffixCache suffix_cache_;
  std::unique_ptr<DraftRunner> draft_;
  // Each id's bytes in text ("" for special tokens and padded ids), for grammar masks;
  // built on the first constrained request.
  std::shared_ptr<const TokenTrie> token_trie_;  // the vocabulary's bytes, for grammar masks
  std::unique_ptr<MaskPrefetch> mask_prefetch_;  // with the first constrained request
  // The MTP module's one-layer KV under the target's block tables (a model with one).
  std::unique_ptr<KvCache> mtp_cache_;
  // After a forward: the MTP module over the positions it committed for requests drafting
  // with it (their hidden states in scratch_), and each one's next draft. taken: per row,
  // the tokens a verify row kept (-1: not a verify row).
  void run_mtp(std::span<const ScheduledRow> rows, std::span<const int64_t> taken);
  bool drafts_with_mtp(const Active& a) const;  // the mtp method, a model with a module, n = 1
  std::vector<int64_t> taken_by_row_;           // run_rows' verify rows' kept tokens, reused
  // Starts the masks of the rows' constrained choices beside the forward pass (if enabled).
  void prefetch_masks(std::span<const ScheduledRow> rows);
  Tensor logits_;
  LlmEngineStats counters_;  // the engine's own counters (the rest is read at publish)
  std::unique_ptr<ChromeTrace> trace_;
  mutable std::mutex stats_mu_;
  LlmEngineStats stats_;
};

}  // namespace parley
