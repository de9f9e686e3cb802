#include "server/chat_request.h"

#include <chrono>
#include <random>

#include "engine/error.h"
#include "server/api_error.h"

namespace parley::server {
namespace {

using ojson = nlohmann::ordered_json;

[[noreturn]] void fail(const std::string& message, const std::string& param,
                       std::optional<std::string> code = std::nullopt) {
  throw ApiException(bad_request(message, param, std::move(code)));
}

double number(const ojson& j, const char* key, double lo, double hi) {
  const ojson& v = j[key];
  if (!v.is_number()) fail(std::string("'") + key + "' must be a number", key);
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi))
    fail(std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "], got " + std::to_string(x),
         key);
  return x;
}

int64_t integer(const ojson& j, const char* key, int64_t lo, int64_t hi) {
  const ojson& v = j[key];
  if (!v.is_number_integer()) fail(std::string("'") + key + "' must be an integer", key);
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    fail(std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "], got " + std::to_string(x),
         key);
  return x;
}

bool boolean(const ojson& j, const char* key) {
  if (!j[key].is_boolean()) fail(std::string("'") + key + "' must be a boolean", key);
  return j[key].get<bool>();
}

bool has(const ojson& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

// A message's content for the template: a string, null, or text parts joined by newlines
// (as vLLM does for templates that take a string).
ojson message_content(const ojson& content, size_t i) {
  const std::string param = "messages[" + std::to_string(i) + "].content";
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array()) fail("'content' must be a string or an array of content parts", param);
  std::string text;
  for (size_t p = 0; p < content.size(); ++p) {
    const ojson& part = content[p];
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      fail("each content part must be an object with a 'type'", param);
    const std::string type = part["type"];
    if (type != "text")
      fail("content parts of type '" + type + "' are not supported by this model (text only)",
           param, "unsupported_content");
    if (!part.contains("text") || !part["text"].is_string())
      fail("a text part needs 'text'", param);
    if (p > 0) text += "\n";
    text += part["text"].get<std::string>();
  }
  return text;
}

ojson parse_messages(const ojson& body) {
  if (!body.contains("messages")) fail("'messages' is required", "messages");
  const ojson& in = body["messages"];
  if (!in.is_array() || in.empty()) fail("'messages' must be a non-empty array", "messages");
  ojson out = ojson::array();
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string param = "messages[" + std::to_string(i) + "]";
    const ojson& m = in[i];
    if (!m.is_object()) fail("each message must be an object", param);
    if (!m.contains("role") || !m["role"].is_string())
      fail("a message needs a 'role' string", param + ".role");
    const std::string role = m["role"];
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" &&
        role != "tool")
      fail("unknown role '" + role + "'", param + ".role");
    ojson msg = m;
    msg["content"] = message_content(m.contains("content") ? m["content"] : ojson(), i);
    // Templates read tool-call arguments as a mapping; OpenAI sends them as a JSON string
    // (vLLM parses them the same way before rendering).
    if (msg.contains("tool_calls") && msg["tool_calls"].is_array()) {
      for (auto& call : msg["tool_calls"]) {
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
          continue;
        auto& args = call["function"]["arguments"];
        if (args.is_string()) {
          ojson parsed = ojson::parse(args.get<std::string>(), nullptr, false);
          if (parsed.is_discarded())
            fail("tool call arguments are not valid JSON", param + ".tool_calls");
          args = std::move(parsed);
        }
      }
    }
    out.push_back(std::move(msg));
  }
  return out;
}

void parse_prompt(const ojson& body, ChatRequest& r, int32_t vocab) {
  if (!body.contains("prompt")) fail("'prompt' is required", "prompt");
  const ojson& p = body["prompt"];
  if (p.is_string()) {
    r.prompt = p;
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    r.prompt = p[0];
  } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
    for (const auto& id : p) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab)
        fail("prompt token ids must be integers in [0, " + std::to_string(vocab) + ")", "prompt");
      r.prompt_ids.push_back(id.get<int32_t>());
    }
  } else if (p.is_array() && p.size() > 1) {
    fail("several prompts in one request are not supported; send one request per prompt", "prompt");
  } else {
    fail("'prompt' must be a string or an array of token ids", "prompt");
  }
  if (r.prompt.empty() && r.prompt_ids.empty()) fail("the prompt is empty", "prompt");
}

// The `speculative` extension: "ngram" | "suffix" | "none", or an object with `method` and
// optional num_speculative_tokens, prompt_lookup_min, prompt_lookup_max (vLLM's names).
SpeculativeConfig parse_speculative(const ojson& v) {
  SpeculativeConfig c;
  const auto method = [&](const ojson& m) {
    if (!m.is_string()) fail("'speculative' method must be a string", "speculative");
    try {
      c.method = parse_spec_method(m.get<std::string>());
    } catch (const Error& e) {
      fail(e.what(), "speculative");
    }
  };
  if (v.is_string()) {
    method(v);
    return c;
  }
  if (!v.is_object() || !v.contains("method"))
    fail("'speculative' must be a method name or an object with 'method'", "speculative");
  method(v["method"]);
  for (const auto& [key, value] : v.items()) {
    if (key == "method") continue;
    if (key != "num_speculative_tokens" && key != "prompt_lookup_min" && key != "prompt_lookup_max")
      fail("unknown 'speculative' field '" + key + "'", "speculative." + key);
    const int64_t n = integer(v, key.c_str(), key == "num_speculative_tokens" ? 0 : 1, 64);
    if (key == "num_speculative_tokens") c.num_tokens = int(n);
    if (key == "prompt_lookup_min") c.ngram_min = int(n);
    if (key == "prompt_lookup_max") c.ngram_max = int(n);
  }
  if (v.contains("prompt_lookup_min") && !v.contains("prompt_lookup_max"))
    c.ngram_max = std::max(c.ngram_max, c.ngram_min);
  if (v.contains("prompt_lookup_max") && !v.contains("prompt_lookup_min"))
    c.ngram_min = std::min(c.ngram_min, c.ngram_max);
  try {
    validate(c);
  } catch (const Error& e) {
    fail(e.what(), "speculative");
  }
  return c;
}

void parse_stop(const ojson& body, SamplingParams& p) {
  const ojson& s = body["stop"];
  if (s.is_string()) {
    p.stop.push_back(s);
  } else if (s.is_array()) {
    for (const auto& x : s) {
      if (!x.is_string()) fail("'stop' must be a string or an array of strings", "stop");
      p.stop.push_back(x);
    }
  } else {
    fail("'stop' must be a string or an array of strings", "stop");
  }
  std::erase(p.stop, std::string());
  if (int(p.stop.size()) > kMaxStopStrings)
    fail("at most " + std::to_string(kMaxStopStrings) + " stop sequences", "stop");
}

void parse_sampling(const ojson& body, ChatRequest& r, int32_t vocab) {
  SamplingParams& p = r.params;
  if (has(body, "temperature")) p.temperature = float(number(body, "temperature", 0, 2));
  if (has(body, "top_p")) p.top_p = float(number(body, "top_p", 0, 1));
  if (has(body, "top_k")) p.top_k = int32_t(integer(body, "top_k", -1, vocab));
  if (has(body, "min_p")) p.min_p = float(number(body, "min_p", 0, 1));
  if (has(body, "presence_penalty"))
    p.presence_penalty = float(number(body, "presence_penalty", -2, 2));
  if (has(body, "frequency_penalty"))
    p.frequency_penalty = float(number(body, "frequency_penalty", -2, 2));
  if (has(body, "repetition_penalty"))
    p.repetition_penalty = float(number(body, "repetition_penalty", 1e-3, 100));
  if (has(body, "seed")) p.seed = uint64_t(integer(body, "seed", INT64_MIN, INT64_MAX));
  if (has(body, "max_completion_tokens"))
    p.max_tokens = int32_t(integer(body, "max_completion_tokens", 1, INT32_MAX));
  else if (has(body, "max_tokens"))
    p.max_tokens = int32_t(integer(body, "max_tokens", 1, INT32_MAX));
  if (has(body, "min_tokens")) p.min_tokens = int32_t(integer(body, "min_tokens", 0, INT32_MAX));
  if (has(body, "ignore_eos")) p.ignore_eos = boolean(body, "ignore_eos");
  if (has(body, "stop")) parse_stop(body, p);
  if (has(body, "stop_token_ids")) {
    if (!body["stop_token_ids"].is_array())
      fail("'stop_token_ids' must be an array", "stop_token_ids");
    for (const auto& id : body["stop_token_ids"]) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab)
        fail("stop_token_ids must be token ids", "stop_token_ids");
      p.stop_token_ids.push_back(id.get<int32_t>());
    }
  }
  if (has(body, "logit_bias")) {
    const ojson& b = body["logit_bias"];
    if (!b.is_object()) fail("'logit_bias' must be an object of token id -> bias", "logit_bias");
    for (const auto& [k, v] : b.items()) {
      char* end = nullptr;
      const long id = std::strtol(k.c_str(), &end, 10);
      if (k.empty() || *end != '\0' || id < 0 || id >= vocab)
        fail("logit_bias key '" + k + "' is not a token id of this model", "logit_bias");
      if (!v.is_number() || v.get<double>() < -100 || v.get<double>() > 100)
        fail("logit_bias values must be numbers in [-100, 100]", "logit_bias");
      p.logit_bias.emplace_back(int32_t(id), v.get<float>());
    }
  }
  if (r.chat) {
    if (has(body, "logprobs")) p.logprobs = boolean(body, "logprobs");
    if (has(body, "top_logprobs")) {
      p.top_logprobs = int32_t(integer(body, "top_logprobs", 0, kMaxTopLogprobs));
      if (p.top_logprobs > 0 && !p.logprobs)
        fail("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    }
  } else if (has(body, "logprobs")) {
    // Completions: logprobs is the number of alternatives (0-5), and asks for logprobs.
    p.top_logprobs = int32_t(integer(body, "logprobs", 0, 5));
    p.logprobs = true;
  }
  try {
    validate(p, vocab);
  } catch (const Error& e) {
    fail(e.what(), "sampling");
  }
}

nlohmann::json bytes_json(const std::string& s) {
  nlohmann::json b = nlohmann::json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

// `from`: the field that set r.grammar, for errors naming it.
void set_grammar(ChatRequest& r, GrammarSpec::Kind kind, std::string text, const char* param,
                 std::string& from) {
  if (r.grammar)
    fail(
        "only one of response_format (json_schema, json_object), regex, grammar and "
        "guided_json may constrain an answer; '" +
            from + "' already does",
        param);
  if (text.empty()) fail(std::string("'") + param + "' must not be empty", param);
  r.grammar = {kind, std::move(text)};
  from = param;
}

void parse_response_format(const ojson& rf, ChatRequest& r, std::string& from) {
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
    fail("'response_format' must be an object with a 'type'", "response_format");
  const std::string type = rf["type"];
  if (type == "text") return;
  if (type == "json_object") {
    set_grammar(r, GrammarSpec::Kind::json_object, "{}", "response_format", from);
    return;
  }
  if (type != "json_schema")
    fail("response_format type '" + type +
             "' is not supported; use 'text', 'json_object' or 'json_schema'",
         "response_format");
  if (!rf.contains("json_schema") || !rf["json_schema"].is_object())
    fail("response_format json_schema needs a 'json_schema' object", "response_format");
  const ojson& js = rf["json_schema"];
  if (js.contains("name") && !js["name"].is_string())
    fail("response_format json_schema's 'name' must be a string", "response_format");
  if (!js.contains("schema") || !(js["schema"].is_object() || js["schema"].is_boolean()))
    fail("response_format json_schema needs a 'schema' (a JSON Schema object)", "response_format");
  set_grammar(r, GrammarSpec::Kind::json_schema, js["schema"].dump(), "response_format", from);
}

void parse_tool_choice(const ojson& j, ChatRequest& r) {
  const ojson& tc = j["tool_choice"];
  if (tc.is_string() && (tc == "auto" || tc == "none" || tc == "required")) {
    r.tool_choice = tc;
  } else if (tc.is_object() && tc.value("type", "") == "function" && tc.contains("function") &&
             tc["function"].is_object() && tc["function"].contains("name") &&
             tc["function"]["name"].is_string()) {
    r.tool_choice = "function";
    r.tool_choice_name = tc["function"]["name"];
  } else {
    fail(
        "'tool_choice' must be 'auto', 'none', 'required' or {\"type\": \"function\", "
        "\"function\": {\"name\": ...}}",
        "tool_choice");
  }
  if (r.tool_choice == "none") {
    r.tools = nullptr;
    return;
  }
  if (r.tool_choice == "auto") return;
  if (!r.tools.is_array() || r.tools.empty())
    fail("tool_choice '" + r.tool_choice + "' needs 'tools'", "tool_choice");
  if (r.tool_choice == "function") {
    bool found = false;
    for (const ojson& t : r.tools)
      found = found || (t.is_object() && t.contains("function") && t["function"].is_object() &&
                        t["function"].value("name", "") == r.tool_choice_name);
    if (!found)
      fail("tool_choice names the function '" + r.tool_choice_name + "', which is not in 'tools'",
           "tool_choice");
  }
}

// The extension fields that constrain an answer, then a check that whatever did compiles
// (a 400 naming the unsupported construct or keyword, not an error mid-stream).
void parse_grammar_fields(const ojson& j, ChatRequest& r, std::string& from) {
  for (const char* key : {"regex", "guided_regex"}) {
    if (!has(j, key)) continue;
    if (!j[key].is_string()) fail(std::string("'") + key + "' must be a string", key);
    set_grammar(r, GrammarSpec::Kind::regex, j[key].get<std::string>(), key, from);
  }
  for (const char* key : {"grammar", "guided_grammar"}) {
    if (!has(j, key)) continue;
    if (!j[key].is_string()) fail(std::string("'") + key + "' must be a GBNF string", key);
    set_grammar(r, GrammarSpec::Kind::gbnf, j[key].get<std::string>(), key, from);
  }
  if (has(j, "guided_json")) {
    const ojson& g = j["guided_json"];
    if (!g.is_object() && !g.is_string())
      fail("'guided_json' must be a JSON Schema (an object or its text)", "guided_json");
    set_grammar(r, GrammarSpec::Kind::json_schema, g.is_string() ? g.get<std::string>() : g.dump(),
                "guided_json", from);
  }
  if (!r.grammar) return;
  try {
    compile_grammar(r.grammar);
  } catch (const Error& e) {
    fail(e.what(), from);
  }
}

}  // namespace

ChatRequest parse_chat_request(std::string_view body, bool chat, int32_t vocab_size) {
  const ojson j = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail("the request body is not valid JSON (or not valid UTF-8)", "body");
  if (!j.is_object()) fail("the request body must be a JSON object", "body");
  ChatRequest r;
  r.chat = chat;
  std::string grammar_from;
  if (!j.contains("model") || !j["model"].is_string()) fail("'model' is required", "model");
  r.model = j["model"];
  for (const char* key :
       {"functions", "function_call", "audio", "modalities", "web_search_options", "suffix"})
    if (has(j, key)) fail(std::string("'") + key + "' is not supported by this server", key);
  if (chat) {
    r.messages = parse_messages(j);
    if (has(j, "tools")) {
      if (!j["tools"].is_array()) fail("'tools' must be an array", "tools");
      r.tools = j["tools"];
    }
    if (has(j, "tool_choice")) parse_tool_choice(j, r);
    if (has(j, "parallel_tool_calls")) r.parallel_tool_calls = boolean(j, "parallel_tool_calls");
    if (has(j, "response_format")) parse_response_format(j["response_format"], r, grammar_from);
    if (has(j, "chat_template_kwargs")) {
      if (!j["chat_template_kwargs"].is_object())
        fail("'chat_template_kwargs' must be an object", "chat_template_kwargs");
      r.template_kwargs = j["chat_template_kwargs"];
    }
    if (has(j, "add_generation_prompt"))
      r.add_generation_prompt = boolean(j, "add_generation_prompt");
  } else {
    parse_prompt(j, r, vocab_size);
    if (has(j, "echo")) r.echo = boolean(j, "echo");
    if (has(j, "best_of") && integer(j, "best_of", 1, 16) != 1)
      fail("best_of > 1 is not supported; use n", "best_of");
  }
  if (has(j, "n")) r.n = int(integer(j, "n", 1, 16));
  if (has(j, "cache_salt")) {
    if (!j["cache_salt"].is_string() || j["cache_salt"].get<std::string>().empty())
      fail("'cache_salt' must be a non-empty string", "cache_salt");
    r.cache_salt = j["cache_salt"].get<std::string>();
  }
  if (has(j, "speculative")) r.speculative = parse_speculative(j["speculative"]);
  parse_grammar_fields(j, r, grammar_from);
  if (has(j, "prediction")) {
    const ojson& p = j["prediction"];
    if (!p.is_object() || !p.contains("type") || p["type"] != "content" || !p.contains("content"))
      fail("'prediction' must be {\"type\": \"content\", \"content\": ...}", "prediction");
    const ojson& c = p["content"];
    if (c.is_string()) {
      r.prediction = c.get<std::string>();
    } else if (c.is_array()) {  // text parts, concatenated
      for (const ojson& part : c) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string())
          fail("prediction content parts must be {\"type\": \"text\", \"text\": ...}",
               "prediction.content");
        r.prediction += part["text"].get<std::string>();
      }
    } else {
      fail("prediction content must be a string or an array of text parts", "prediction.content");
    }
  }
  if (has(j, "stream")) r.stream = boolean(j, "stream");
  if (has(j, "stream_options")) {
    const ojson& so = j["stream_options"];
    if (!so.is_object()) fail("'stream_options' must be an object", "stream_options");
    if (!r.stream) fail("'stream_options' is only allowed with stream: true", "stream_options");
    if (has(so, "include_usage")) r.include_usage = boolean(so, "include_usage");
  }
  parse_sampling(j, r, vocab_size);
  return r;
}

std::string new_response_id(bool chat) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kHex = "0123456789abcdef";
  std::string id = chat ? "chatcmpl-" : "cmpl-";
  for (int i = 0; i < 24; ++i) id += kHex[rng() % 16];
  return id;
}

std::string_view finish_reason(const ChoiceOutput& c) {
  return c.finish == ChoiceFinish::length ? "length" : "stop";
}

nlohmann::json usage_json(const GenerateResult& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens},
          {"total_tokens", r.prompt_tokens + r.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}},
          // OpenAI's Predicted Outputs fields, counting every speculative draft (a
          // prediction's or a proposer's): verified and accepted, verified and rejected.
          {"completion_tokens_details",
           {{"accepted_prediction_tokens", r.accepted_draft_tokens},
            {"rejected_prediction_tokens", r.draft_tokens - r.accepted_draft_tokens}}}};
}

nlohmann::json timings_json(const GenerateResult& r) {
  const GenerateTimings& t = r.timings;
  return {{"queue_ms", t.queue_ms},
          {"prefill_ms", t.prefill_ms},
          {"first_token_ms", t.first_token_ms},
          {"per_token_ms", t.per_token_ms},
          {"preemptions", t.preemptions}};
}

namespace {

// A token's bytes; empty for an id without a token (a padded vocabulary row).
std::string piece(const Tokenizer& tok, int32_t id) {
  return tok.has_token(id) ? tok.token_bytes(id) : std::string();
}

nlohmann::json chat_token_logprob(const Tokenizer& tok, const SampleResult& s) {
  const std::string text = piece(tok, s.token);
  nlohmann::json top = nlohmann::json::array();
  for (const IdLogprob& t : s.top_logprobs()) {
    const std::string tt = piece(tok, t.token);
    top.push_back({{"token", tt}, {"logprob", t.logprob}, {"bytes", bytes_json(tt)}});
  }
  return {
      {"token", text}, {"logprob", s.logprob}, {"bytes", bytes_json(text)}, {"top_logprobs", top}};
}

}  // namespace

nlohmann::json choice_logprobs(const ChatRequest& req, const Tokenizer& tok,
                               const std::vector<SampleResult>& samples, size_t text_offset) {
  if (!req.params.logprobs) return nullptr;
  if (req.chat) {
    nlohmann::json content = nlohmann::json::array();
    for (const auto& s : samples) content.push_back(chat_token_logprob(tok, s));
    return {{"content", content}};
  }
  nlohmann::json tokens = nlohmann::json::array(), lps = nlohmann::json::array(),
                 tops = nlohmann::json::array(), offsets = nlohmann::json::array();
  for (const auto& s : samples) {
    const std::string text = piece(tok, s.token);
    tokens.push_back(text);
    lps.push_back(s.logprob);
    nlohmann::json top = nlohmann::json::object();
    for (const IdLogprob& t : s.top_logprobs()) top[piece(tok, t.token)] = t.logprob;
    tops.push_back(top);
    offsets.push_back(text_offset);
    text_offset += text.size();
  }
  return {{"tokens", tokens},
          {"token_logprobs", lps},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls, bool stream, int first_index) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    nlohmann::json c = {{"id", calls[i].id},
                        {"type", "function"},
                        {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (stream) c["index"] = first_index + int(i);
    out.push_back(std::move(c));
  }
  return out;
}

nlohmann::json response_json(const ChatRequest& req, const ResponseMeta& meta,
                             const GenerateResult& r, const Tokenizer& tok) {
  nlohmann::json choices = nlohmann::json::array();
  for (size_t i = 0; i < r.choices.size(); ++i) {
    const ChoiceOutput& c = r.choices[i];
    nlohmann::json choice = {{"index", i}};
    std::string_view finish = finish_reason(c);
    if (req.chat && req.tool_format != ToolCallFormat::none) {
      ToolCallSplit split = split_tool_calls(c.text, req.tool_format, req.parallel_tool_calls);
      nlohmann::json msg = {{"role", "assistant"},
                            {"content", split.content.empty() && !split.calls.empty()
                                            ? nlohmann::json(nullptr)
                                            : nlohmann::json(split.content)}};
      if (!split.calls.empty()) {
        msg["tool_calls"] = tool_calls_json(split.calls, false);
        if (c.finish == ChoiceFinish::stop) finish = "tool_calls";
      }
      choice["message"] = std::move(msg);
    } else if (req.chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = req.echo ? req.prompt + c.text : c.text;
    }
    choice["logprobs"] = choice_logprobs(req, tok, c.samples, req.echo ? req.prompt.size() : 0);
    choice["finish_reason"] = finish;
    choices.push_back(std::move(choice));
  }
  return {{"id", meta.id},
          {"object", req.chat ? "chat.completion" : "text_completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"choices", choices},
          {"usage", usage_json(r)},
          {"timings", timings_json(r)},
          {"system_fingerprint", "parley"}};
}

nlohmann::json chunk_json(const ChatRequest& req, const ResponseMeta& meta, int choice,
                          const std::string* delta, const nlohmann::json& logprobs,
                          std::string_view finish, bool first) {
  nlohmann::json c = {{"index", choice}};
  if (req.chat) {
    nlohmann::json d = nlohmann::json::object();
    if (first) {
      d["role"] = "assistant";
      d["content"] = "";
    }
    if (delta) d["content"] = *delta;
    c["delta"] = d;
  } else {
    c["text"] = delta ? *delta : std::string();
  }
  c["logprobs"] = logprobs;
  c["finish_reason"] = finish.empty() ? nlohmann::json(nullptr) : nlohmann::json(finish);
  nlohmann::json j = {{"id", meta.id},
                      {"object", req.chat ? "chat.completion.chunk" : "text_completion"},
                      {"created", meta.created},
                      {"model", meta.model},
                      {"choices", nlohmann::json::array({c})},
                      {"system_fingerprint", "parley"}};
  if (req.include_usage) j["usage"] = nullptr;
  return j;
}

nlohmann::json tool_call_chunk_json(const ChatRequest& req, const ResponseMeta& meta, int choice,
                                    const std::vector<ToolCall>& calls, int first_index) {
  nlohmann::json j = chunk_json(req, meta, choice, nullptr, nullptr, "", false);
  j["choices"][0]["delta"] = {{"tool_calls", tool_calls_json(calls, true, first_index)}};
  return j;
}

nlohmann::json usage_chunk_json(const ChatRequest& req, const ResponseMeta& meta,
                                const GenerateResult& r) {
  return {{"id", meta.id},
          {"object", req.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"choices", nlohmann::json::array()},
          {"usage", usage_json(r)},
          {"timings", timings_json(r)},
          {"system_fingerprint", "parley"}};
}

}  // namespace parley::server
