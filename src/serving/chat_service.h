// ChatService: the serving side of chat and completion requests. It owns one chat model
// (LlmModel, its Tokenizer and chat template) and an LlmEngine on one worker thread with a
// bounded queue; the HTTP layer renders nothing itself: a job carries messages (rendered
// through the template here) or a prompt, and its callbacks run on the worker.
//
// The worker is the engine thread: queued jobs join the continuously batched LlmEngine
// between its iterations (serving/scheduler.h), so requests arriving during another's
// prefill or decode share its forward passes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "llm/model.h"
#include "serving/latency_histogram.h"
#include "serving/llm_engine.h"
#include "text/jinja/chat_template.h"
#include "text/tokenizer.h"

namespace parley {

struct ChatServiceOptions {
  std::string model_dir;
  LlmLoadOptions load;          // device and dtype of the model (f32 on the CPU by default)
  std::string draft_model_dir;  // speculative decoding's draft model (SpecMethod::draft)
  int queue_capacity = 64;      // requests waiting beyond the running one; more are refused
  LlmEngineOptions engine;
};

struct ChatJob {
  // Chat: messages (and tools, and template kwargs such as enable_thinking) rendered by the
  // model's template with add_generation_prompt. Completion: the prompt text, encoded
  // with the tokenizer's special tokens (BOS), or given as ids.
  bool chat = true;
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;            // null: none
  nlohmann::ordered_json template_kwargs;  // object: extra template variables
  bool add_generation_prompt = true;
  std::string prompt;
  std::vector<int32_t> prompt_ids;  // non-empty: used instead of `prompt`
  SamplingParams params;
  int n = 1;
  std::string cache_salt;  // the prefix cache's namespace (GenerateRequest::cache_salt)
  std::optional<SpeculativeConfig> speculative;  // GenerateRequest::speculative
  std::string prediction;                        // predicted output text (tokenized here)
  GrammarSpec grammar;                           // GenerateRequest::grammar
  // Streaming: each accepted token's text as it is released (may be empty), on the worker.
  std::function<void(int choice, const std::string& delta, const SampleResult& sample)> on_token;
  // Called once, last: the result and the prompt's token count, or the exception that
  // ended the job (Error(cancelled) when `cancelled` was set).
  std::function<void(const GenerateResult*, std::exception_ptr)> on_done;
  std::atomic<bool> cancelled{false};
};

// A conversation's prompt text: the context transformers' apply_chat_template builds
// (template_kwargs first, then messages with reasoning fields aliased, tools (null when
// none), documents (null), add_generation_prompt, bos_token, eos_token), rendered by the
// template. Tokenize it without added special tokens: the template writes them.
std::string render_conversation(const LoadedChatTemplate& tmpl,
                                const nlohmann::ordered_json& messages,
                                const nlohmann::ordered_json& tools,
                                const nlohmann::ordered_json& template_kwargs,
                                bool add_generation_prompt);

struct ChatStats {
  uint64_t requests = 0;
  uint64_t prompt_tokens = 0;
  uint64_t completion_tokens = 0;
  uint64_t cached_tokens = 0;
  int queued = 0;   // waiting for a place in the batch
  int running = 0;  // in the batch
  LatencyHistogram first_token{{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};
  LatencyHistogram inter_token{{0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.5}};
  LlmEngineStats engine;
};

class ChatService {
 public:
  // Loads the model, tokenizer and template now (throws as their loaders); a folder
  // without a template serves /v1/completions only (chat jobs fail with a clear error).
  explicit ChatService(ChatServiceOptions options);
  ~ChatService();  // stop()
  ChatService(const ChatService&) = delete;
  ChatService& operator=(const ChatService&) = delete;

  // Queues the job; false when the queue is full or the service is stopping.
  bool submit(std::shared_ptr<ChatJob> job);
  // Stops taking jobs, finishes the queued and running ones, joins the worker.
  void stop();

  // Renders and tokenizes a chat job's prompt (what the worker does first); the HTTP
  // layer calls it before queueing so a bad conversation or an over-long prompt is a 400
  // before any streaming starts.
  std::vector<int32_t> prompt_ids(const ChatJob& job) const;

  ChatStats stats() const;
  std::string model_id() const;  // the model folder's name
  // The chat template's source ("" without one): the server reads its tool-call format.
  std::string template_source() const;
  int64_t max_context() const { return engine_->max_context(); }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  int32_t vocab_size() const { return int32_t(model_->config().vocab_size); }

 private:
  void worker_loop();
  void admit(std::shared_ptr<ChatJob> job);  // into the engine (worker thread)

  ChatServiceOptions options_;
  std::unique_ptr<LlmModel> model_;
  std::unique_ptr<LlmModel> draft_;  // null without --draft-model
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<LoadedChatTemplate> template_;  // null: the folder has none
  std::string template_error_;                    // why there is none
  std::unique_ptr<LlmEngine> engine_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<ChatJob>> queue_;
  bool stopping_ = false;
  ChatStats totals_;
  std::thread worker_;
};

}  // namespace parley
