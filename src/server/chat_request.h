// One /v1/chat/completions or /v1/completions request, parsed and validated from its JSON
// body with OpenAI's field names (and vLLM's extras: top_k, min_p, repetition_penalty,
// min_tokens, ignore_eos, stop_token_ids, chat_template_kwargs, add_generation_prompt), and
// the OpenAI-shaped response documents and stream chunks. A bad field throws ApiException
// (400, `param` naming it). docs/SERVER.md lists the fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/constraint.h"
#include "sampling/sampling_params.h"
#include "server/tool_calls.h"
#include "serving/llm_engine.h"
#include "serving/speculative.h"
#include "text/tokenizer.h"

namespace parley::server {

struct ChatRequest {
  bool chat = true;  // /v1/chat/completions; false: /v1/completions
  std::string model;
  nlohmann::ordered_json messages;         // chat: role/content objects (text parts joined)
  nlohmann::ordered_json tools;            // chat: null or the tools array, as sent
  nlohmann::ordered_json template_kwargs;  // chat: chat_template_kwargs (an object)
  bool add_generation_prompt = true;
  std::string prompt;               // completions: the prompt text
  std::vector<int32_t> prompt_ids;  // completions: a prompt given as token ids
  SamplingParams params;
  int n = 1;
  std::string cache_salt;  // vLLM's: the prefix cache shares blocks only within one salt
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt before the completion
  // Speculative decoding for this request (the `speculative` extension: a method name or
  // {method, num_speculative_tokens, prompt_lookup_min, prompt_lookup_max}); none: the
  // server's --speculative.
  std::optional<SpeculativeConfig> speculative;
  std::string prediction;  // OpenAI's Predicted Outputs: prediction.content's text
  // What the answer is constrained to: `response_format` json_schema / json_object, or the
  // extensions `regex`, `grammar` (GBNF) and vLLM's guided_regex / guided_grammar /
  // guided_json; at most one of them.
  GrammarSpec grammar;
  // tool_choice: "auto", "none", "required", or "function" with tool_choice_name; the
  // server turns required / a named function into a grammar for the template's call format.
  std::string tool_choice = "auto";
  std::string tool_choice_name;
  bool parallel_tool_calls = true;
  // Chat with tools: how the model writes its calls (set by the server from the template;
  // none: no parsing, calls stay text).
  ToolCallFormat tool_format = ToolCallFormat::none;
};

// vocab_size bounds token ids (logit_bias, prompt ids, stop_token_ids).
ChatRequest parse_chat_request(std::string_view body, bool chat, int32_t vocab_size);

// The response documents. id: "chatcmpl-..." / "cmpl-..."; created: Unix seconds.
struct ResponseMeta {
  std::string id;
  int64_t created = 0;
  std::string model;
};
std::string new_response_id(bool chat);

nlohmann::json usage_json(const GenerateResult& r);
// The answer's `timings` extension (GenerateTimings): queue, prefill, first token and
// per-token milliseconds, and the preemptions it went through.
nlohmann::json timings_json(const GenerateResult& r);
// A choice's logprobs in the route's shape (chat: {"content": [...]}; completions:
// tokens / token_logprobs / top_logprobs / text_offset), null without logprobs.
nlohmann::json choice_logprobs(const ChatRequest& req, const Tokenizer& tok,
                               const std::vector<SampleResult>& samples, size_t text_offset);
// OpenAI's tool_calls array ({id, type, function: {name, arguments}}; streamed entries also
// carry their index, counting from first_index).
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls, bool stream,
                               int first_index = 0);
// A streamed chunk whose delta is tool calls.
nlohmann::json tool_call_chunk_json(const ChatRequest& req, const ResponseMeta& meta, int choice,
                                    const std::vector<ToolCall>& calls, int first_index);
nlohmann::json response_json(const ChatRequest& req, const ResponseMeta& meta,
                             const GenerateResult& r, const Tokenizer& tok);
// One streamed piece of a choice: text delta (with its token's logprobs when asked), the
// first chunk of a chat choice (role), or its last (finish_reason).
nlohmann::json chunk_json(const ChatRequest& req, const ResponseMeta& meta, int choice,
                          const std::string* delta, const nlohmann::json& logprobs,
                          std::string_view finish_reason, bool first);
// The stream's last chunk with include_usage: no choices, the usage.
nlohmann::json usage_chunk_json(const ChatRequest& req, const ResponseMeta& meta,
                                const GenerateResult& r);
std::string_view finish_reason(const ChoiceOutput& c);

}  // namespace parley::server
