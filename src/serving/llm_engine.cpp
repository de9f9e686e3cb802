#include "serving/llm_engine.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "sampling/stop_matcher.h"

namespace parley {

namespace {

constexpr int64_t kDefaultContextCap = 8192;

int64_t resolve_context(const LlmConfig& config, int64_t asked) {
  const int64_t model =
      config.max_position_embeddings > 0 ? config.max_position_embeddings : kDefaultContextCap;
  return asked > 0 ? std::min(asked, model) : std::min(model, kDefaultContextCap);
}

// The model's EOS ids, from config.json (generation_config.json's when the loader merged
// it) or, failing that, the tokenizer's.
std::vector<int32_t> eos_ids(const LlmConfig& config, const Tokenizer& tokenizer) {
  std::vector<int32_t> ids = config.eos_token_ids;
  if (ids.empty()) ids = tokenizer.eos_ids();
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

// One choice's decoding state: its blocks, sampler, detokenizer and stop matcher.
struct Choice {
  int index = 0;  // in the request
  std::vector<int32_t> blocks;
  std::optional<RowSampling> sampler;
  std::optional<StreamDecoder> decoder;
  StopMatcher stops;
  ChoiceOutput out;
  int32_t next_token = -1;  // accepted, not yet run through the model
  bool done = false;
};

}  // namespace

SamplingParams generation_defaults(const std::string& model_dir) {
  SamplingParams p;
  const auto path = std::filesystem::path(model_dir) / "generation_config.json";
  std::ifstream in(path);
  if (!in) return p;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  check_arg(j.is_object(), "[llm] " + path.string() + " is not a JSON object");
  const auto number = [&](const char* key, auto& field) {
    if (j.contains(key) && j[key].is_number()) field = j[key].get<std::decay_t<decltype(field)>>();
  };
  number("temperature", p.temperature);
  number("top_p", p.top_p);
  number("top_k", p.top_k);
  number("min_p", p.min_p);
  number("repetition_penalty", p.repetition_penalty);
  if (j.contains("do_sample") && j["do_sample"].is_boolean() && !j["do_sample"].get<bool>())
    p.temperature = 0.0f;
  return p;
}

std::string_view to_string(ChoiceFinish f) {
  switch (f) {
    case ChoiceFinish::stop: return "stop";
    case ChoiceFinish::length: return "length";
    case ChoiceFinish::cancelled: return "cancelled";
    case ChoiceFinish::none: break;
  }
  return "";
}

LlmEngine::LlmEngine(const LlmModel& model, const Tokenizer& tokenizer, LlmEngineOptions options)
    : model_(model),
      tokenizer_(tokenizer),
      options_(options),
      max_context_(resolve_context(model.config(), options.max_context)),
      cache_(model.config(),
             KvCache::blocks_for(max_context_) * std::max<int64_t>(1, options.kv_rows),
             model.device(), model.dtype()),
      scratch_(model.device()) {
  check_arg(options_.prefill_chunk >= 1, "[llm] prefill_chunk must be at least 1");
  free_blocks_.reserve(size_t(cache_.n_blocks()));
  for (int64_t b = cache_.n_blocks() - 1; b >= 0; --b) free_blocks_.push_back(int32_t(b));
}

std::vector<int32_t> LlmEngine::take_blocks(int64_t n) {
  std::vector<int32_t> out(free_blocks_.end() - n, free_blocks_.end());
  free_blocks_.resize(free_blocks_.size() - size_t(n));
  return out;
}

void LlmEngine::give_blocks(const std::vector<int32_t>& blocks) {
  free_blocks_.insert(free_blocks_.end(), blocks.begin(), blocks.end());
}

GenerateResult LlmEngine::generate(const GenerateRequest& request, const TokenCallback& on_token) {
  const int64_t n_prompt = int64_t(request.prompt.size());
  check_arg(n_prompt > 0, "[llm] the prompt is empty");
  check_arg(request.n >= 1, "[llm] n must be at least 1");
  const int32_t vocab = int32_t(model_.config().vocab_size);
  for (int32_t id : request.prompt)
    check_arg(id >= 0 && id < vocab, "[llm] prompt token " + std::to_string(id) +
                                         " is outside the vocabulary of " + std::to_string(vocab));
  check_arg(n_prompt < max_context_,
            "context_length_exceeded: the prompt has " + std::to_string(n_prompt) +
                " tokens; this model's context is " + std::to_string(max_context_) + " tokens");
  const int64_t room = max_context_ - n_prompt;
  const int64_t max_new = request.params.max_tokens ? *request.params.max_tokens : room;
  check_arg(max_new <= room, "context_length_exceeded: the prompt (" + std::to_string(n_prompt) +
                                 " tokens) plus max_tokens (" + std::to_string(max_new) +
                                 ") exceeds the context of " + std::to_string(max_context_) +
                                 " tokens");
  SamplingParams params = request.params;
  params.max_tokens = int32_t(max_new);
  validate(params, vocab);

  std::lock_guard lock(mutex_);
  const int64_t blocks_each = KvCache::blocks_for(n_prompt + max_new);
  check(blocks_each * request.n <= int64_t(free_blocks_.size()), ErrorKind::resource_exhausted,
        "[llm] " + std::to_string(request.n) + " choices of " + std::to_string(n_prompt + max_new) +
            " tokens need " + std::to_string(blocks_each * request.n) +
            " KV blocks; the cache holds " + std::to_string(cache_.n_blocks()));

  const std::vector<int32_t> eos = eos_ids(model_.config(), tokenizer_);
  std::vector<std::unique_ptr<Choice>> choices;
  for (int i = 0; i < request.n; ++i) {
    auto c = std::make_unique<Choice>();
    c->index = i;
    c->blocks = take_blocks(blocks_each);
    c->sampler.emplace(params, vocab, request.prompt, eos, uint64_t(i));
    c->decoder.emplace(tokenizer_, /*skip_special_tokens=*/true);
    c->stops = StopMatcher(params.stop);
    choices.push_back(std::move(c));
  }
  struct Release {
    LlmEngine& engine;
    std::vector<std::unique_ptr<Choice>>& choices;
    ~Release() {
      for (auto& c : choices) engine.give_blocks(c->blocks);
    }
  } release{*this, choices};

  GenerateResult result;
  result.prompt_tokens = n_prompt;
  Tensor logits;
  Batch batch;
  std::vector<RowSampling*> rows;
  std::vector<Choice*> active;
  std::vector<SampleResult> samples;

  // Prefill: every choice's row over the same chunk; the last chunk asks for logits.
  for (int64_t at = 0; at < n_prompt; at += options_.prefill_chunk) {
    const int64_t len = std::min(options_.prefill_chunk, n_prompt - at);
    batch.rows.clear();
    for (auto& c : choices)
      batch.rows.push_back({std::span(request.prompt).subspan(size_t(at), size_t(len)), int32_t(at),
                            c->blocks, at + len == n_prompt, false});
    model_.forward(batch, cache_, logits, scratch_);
  }

  int64_t pos = n_prompt;
  bool cancelled = false;
  for (;;) {
    rows.clear();
    active.clear();
    for (auto& c : choices)
      if (!c->done) {
        rows.push_back(&*c->sampler);
        active.push_back(c.get());
      }
    samples.assign(rows.size(), SampleResult{});
    sample_rows(logits, rows, samples);
    for (size_t r = 0; r < active.size(); ++r) {
      Choice& c = *active[r];
      const SampleResult& s = samples[r];
      c.out.tokens.push_back(s.token);
      c.out.samples.push_back(s);
      ++result.completion_tokens;
      StopMatcher::Step step = c.stops.push(c.decoder->push(s.token));
      if (s.finish != FinishReason::none || step.stopped) {
        if (!step.stopped) step.emit += c.stops.push(c.decoder->flush()).emit;
        if (!c.stops.stopped()) step.emit += c.stops.flush();
        c.done = true;
        c.out.finish = c.stops.stopped() || s.finish == FinishReason::stop ? ChoiceFinish::stop
                                                                           : ChoiceFinish::length;
        c.out.stop_index = c.stops.stop_index();
      }
      c.out.text += step.emit;
      if (on_token && !on_token(c.index, step.emit, s)) cancelled = true;
      c.next_token = s.token;
    }
    if (cancelled) {
      for (auto& c : choices)
        if (!c->done) {
          c->done = true;
          c->out.finish = ChoiceFinish::cancelled;
        }
    }
    batch.rows.clear();
    for (auto& c : choices)
      if (!c->done)
        batch.rows.push_back({std::span(&c->next_token, 1), int32_t(pos), c->blocks, true, false});
    if (batch.rows.empty()) break;
    model_.forward(batch, cache_, logits, scratch_);
    ++pos;
  }
  for (auto& c : choices) result.choices.push_back(std::move(c->out));
  return result;
}

}  // namespace parley
