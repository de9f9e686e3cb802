#include "serving/llm_engine.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
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

// The pool's blocks: kv_cache_gb's worth, else kv_rows rows at full context; at least one row.
int64_t pool_blocks(const LlmModel& model, int64_t max_context, const LlmEngineOptions& o) {
  const LlmConfig& c = model.config();
  const int64_t row = KvCache::blocks_for(max_context);
  if (o.kv_cache_gb <= 0) return row * std::max<int64_t>(1, o.kv_rows);
  const double block_bytes = 2.0 * double(c.n_layers * KvCache::kBlockSize * c.n_kv_heads *
                                          c.head_dim * int64_t(dtype_size(model.dtype())));
  return std::max(row, int64_t(o.kv_cache_gb * double(1ull << 30) / block_bytes));
}

// The KV tiers' model identity: the config's shape fields, the KV dtype, and bytes of the
// weights (embedding rows, the final norm) so two fine-tunes of one architecture differ.
BlockHash model_fingerprint(const LlmModel& model) {
  const LlmConfig& c = model.config();
  std::string id = c.model_type;
  for (int64_t v : {c.vocab_size, c.hidden_size, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim,
                    c.intermediate_size, c.num_experts, c.sliding_window, int64_t(model.dtype())})
    id += "|" + std::to_string(v);
  id += "|" + std::to_string(c.rope_theta) + "|" + std::to_string(c.rms_norm_eps);
  const auto add = [&](const Tensor& t) {
    if (!t.defined() || t.numel() == 0) return;
    const Tensor host = t.to(Device::cpu);
    id.append(static_cast<const char*>(host.data<void>()), host.nbytes());
  };
  const LlmWeights& w = model.weights();
  if (w.embed.defined() && w.embed.ndim() == 2 && w.embed.dim(0) > 0)
    add(w.embed.slice0(0, std::min<int64_t>(4, w.embed.dim(0))));
  add(w.final_norm);
  const std::vector<uint8_t> bytes(id.begin(), id.end());
  return siphash128(0x6b762d6d6f64656cull, 0x66696e6765727072ull, bytes);
}

// One choice's decoding state: its pool request, sampler, detokenizer and stop matcher.
struct Choice {
  int index = 0;  // in the request
  KvRequestId id = 0;
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
      cache_(model.config(), pool_blocks(model, max_context_, options), model.device(),
             model.dtype()),
      tiers_(std::make_unique<KvTiers>(
          KvTierOptions{uint64_t(std::max(0.0, options.kv_ram_gb) * double(1ull << 30)),
                        options.kv_cache_dir, model_fingerprint(model)},
          cache_.block_bytes())),
      pool_(cache_, tiers_.get()),
      scratch_(model.device()) {
  check_arg(options_.prefill_chunk >= 1, "[llm] prefill_chunk must be at least 1");
}

LlmEngine::~LlmEngine() {
  try {
    pool_.persist();
  } catch (const std::exception& e) {
    std::cerr << "[llm] writing the KV cache folder failed: " << e.what() << std::endl;
  }
}

KvPoolStats LlmEngine::kv_stats() {
  std::lock_guard lock(mutex_);
  return pool_.stats();
}

KvTierStats LlmEngine::kv_tier_stats() {
  std::lock_guard lock(mutex_);
  return tiers_->stats();
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
  // One request at a time: every block is free or evictable, so the worst case (no sharing)
  // fitting the pool means every allocate below succeeds.
  check(blocks_each * request.n <= cache_.n_blocks(), ErrorKind::resource_exhausted,
        "[llm] " + std::to_string(request.n) + " choices of " + std::to_string(n_prompt + max_new) +
            " tokens need " + std::to_string(blocks_each * request.n) +
            " KV blocks; the cache holds " + std::to_string(cache_.n_blocks()));

  const std::vector<int32_t> eos = eos_ids(model_.config(), tokenizer_);
  std::vector<std::unique_ptr<Choice>> choices;
  for (int i = 0; i < request.n; ++i) {
    auto c = std::make_unique<Choice>();
    c->index = i;
    c->id = next_request_++;
    c->sampler.emplace(params, vocab, request.prompt, eos, uint64_t(i));
    c->decoder.emplace(tokenizer_, /*skip_special_tokens=*/true);
    c->stops = StopMatcher(params.stop);
    choices.push_back(std::move(c));
  }
  struct Release {
    KvPool& pool;
    std::vector<std::unique_ptr<Choice>>& choices;
    ~Release() {
      for (auto& c : choices) pool.free(c->id);
    }
  } release{pool_, choices};
  const auto allocate = [&](KvRequestId id, int64_t n_tokens) {
    check(pool_.allocate(id, n_tokens), ErrorKind::internal,
          "[llm] the KV pool could not allocate " + std::to_string(n_tokens) + " tokens");
  };

  GenerateResult result;
  result.prompt_tokens = n_prompt;
  const KvRequestId first = choices.front()->id;
  result.cached_tokens = pool_.lookup_prefix(first, request.prompt, request.cache_salt);
  Tensor logits;
  Batch batch;
  std::vector<RowSampling*> rows;
  std::vector<Choice*> active;
  std::vector<SampleResult> samples;

  // Prefill of the uncached part, once; the last chunk asks for logits. The other choices
  // fork the prompt's blocks and start from the same logits.
  allocate(first, n_prompt - result.cached_tokens);
  for (int64_t at = result.cached_tokens; at < n_prompt; at += options_.prefill_chunk) {
    const int64_t len = std::min(options_.prefill_chunk, n_prompt - at);
    batch.rows.clear();
    batch.rows.push_back({std::span(request.prompt).subspan(size_t(at), size_t(len)), int32_t(at),
                          pool_.block_table(first), at + len == n_prompt, false});
    model_.forward(batch, cache_, logits, scratch_);
  }
  pool_.commit(first, n_prompt);
  for (size_t i = 1; i < choices.size(); ++i) pool_.fork(first, choices[i]->id);
  if (request.n > 1) {
    Tensor each = Tensor::empty({request.n, int64_t(vocab)}, DType::f32);
    for (int i = 0; i < request.n; ++i) each.slice0(i, i + 1).copy_from(logits.slice0(0, 1));
    logits = each;
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
    // Every row's block first (a choice writing into a block it shares gets its own copy),
    // then the rows: a table changes only in its own allocate.
    active.clear();
    for (auto& c : choices)
      if (!c->done) {
        pool_.append_tokens(c->id, std::span(&c->next_token, 1));
        allocate(c->id, 1);
        active.push_back(c.get());
      }
    if (active.empty()) break;
    batch.rows.clear();
    for (Choice* c : active)
      batch.rows.push_back(
          {std::span(&c->next_token, 1), int32_t(pos), pool_.block_table(c->id), true, false});
    model_.forward(batch, cache_, logits, scratch_);
    ++pos;
    for (Choice* c : active) pool_.commit(c->id, pos);
  }
  for (auto& c : choices) result.choices.push_back(std::move(c->out));
  return result;
}

}  // namespace parley
