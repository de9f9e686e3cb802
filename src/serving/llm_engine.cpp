#include "serving/llm_engine.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/ops/embedding.h"
#include "grammar/constraint.h"
#include "llm/mtp.h"
#include "sampling/stop_matcher.h"
#include "serving/verifier.h"

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
  const double block_bytes = 2.0 * double(c.n_layers * KvCache::kBlockSize * c.n_kv_heads *
                                          c.head_dim * int64_t(dtype_size(model.dtype())));
  if (o.kv_cache_gb <= 0) {
    int64_t blocks = row * std::max<int64_t>(1, o.kv_rows);
    // On the CPU the rows' default stops at 4 GiB of host memory (the parity path's f32 KV).
    if (model.device() == Device::cpu)
      blocks = std::min(blocks, int64_t(4.0 * double(1ull << 30) / block_bytes));
    return std::max(row, blocks);
  }
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

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

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

// One request in the engine: its scheduler group, and per choice its sampler, detokenizer
// and stop matcher.
struct LlmEngine::Active {
  struct Choice {
    std::optional<RowSampling> sampler;
    std::unique_ptr<Proposer> proposer;  // null without speculative decoding
    std::vector<float> draft_probs;      // a draft model's q of the current drafts (sampled)
    std::unique_ptr<TokenConstraint> constraint;  // the request's grammar, one per choice
    // The MTP module's draft for the token after the sequence's mtp_len tokens (-1: none).
    int32_t mtp_next = -1;
    size_t mtp_len = 0;
    std::optional<StreamDecoder> decoder;
    StopMatcher stops;
    ChoiceOutput out;
  };
  SequenceGroup group;
  SpeculativeConfig spec;
  std::vector<Choice> choices;
  TokenCallback on_token;
  DoneCallback on_done;
  std::shared_ptr<const std::atomic<bool>> cancel;
  GenerateResult result;
  Clock::time_point submitted, first_run, first_token, last_token;
  bool started = false;
  std::exception_ptr failed;  // its own error (detokenizing): it alone ends with it
  int token_steps = 0;        // forwards that sampled for it
  uint64_t last_forward = 0;  // the forward that last counted in token_steps
  int open_choices = 0;
};

LlmEngine::LlmEngine(const LlmModel& model, const Tokenizer& tokenizer, LlmEngineOptions options,
                     const LlmModel* draft)
    : model_(model),
      tokenizer_(tokenizer),
      options_(options),
      max_context_(resolve_context(model.config(), options.max_context)),
      eos_(eos_ids(model.config(), tokenizer)),
      cache_(model.config(), pool_blocks(model, max_context_, options), model.device(),
             model.dtype()),
      tiers_(std::make_unique<KvTiers>(
          KvTierOptions{uint64_t(std::max(0.0, options.kv_ram_gb) * double(1ull << 30)),
                        options.kv_cache_dir, model_fingerprint(model)},
          cache_.block_bytes())),
      pool_(cache_, tiers_.get()),
      scheduler_(pool_, SchedulerOptions{options.max_batch_tokens, options.max_running,
                                         options.prefill_chunk}),
      scratch_(model.device()),
      suffix_cache_(options.speculative) {
  validate(options_.speculative);
  if (draft) {
    check_arg(draft->device() == model.device(),
              "[llm] the draft model must be on the target's device");
    draft_ = std::make_unique<DraftRunner>(*draft, model.config().vocab_size, cache_.n_blocks());
  }
  check_arg(options_.speculative.method != SpecMethod::draft || draft_,
            "speculative: the draft method needs a draft model (--draft-model)");
  if (model.n_mtp() > 0)
    mtp_cache_ = std::make_unique<KvCache>(mtp_cache_config(model.config()), cache_.n_blocks(),
                                           model.device(), model.dtype());
  check_arg(options_.speculative.method != SpecMethod::mtp || mtp_cache_,
            "speculative: the mtp method needs a model with an MTP module");
  if (!options_.trace_path.empty()) trace_ = std::make_unique<ChromeTrace>(options_.trace_path);
  publish_stats();
}

LlmEngine::~LlmEngine() {
  while (!active_.empty())
    finish(*active_.front(),
           std::make_exception_ptr(Error(ErrorKind::cancelled, "[llm] the engine is closing")));
  try {
    pool_.persist();
  } catch (const std::exception& e) {
    std::cerr << "[llm] writing the KV cache folder failed: " << e.what() << std::endl;
  }
}

LlmEngineStats LlmEngine::stats() const {
  std::lock_guard lock(stats_mu_);
  return stats_;
}

void LlmEngine::publish_stats() {
  LlmEngineStats s = counters_;
  s.scheduler = scheduler_.stats();
  s.kv = pool_.stats();
  s.tiers = tiers_->stats();
  if (draft_) {
    s.draft_forwards = draft_->forwards();
    s.draft_seconds = draft_->seconds();
  }
  std::lock_guard lock(stats_mu_);
  stats_ = s;
}

void LlmEngine::submit(const GenerateRequest& request, TokenCallback on_token, DoneCallback on_done,
                       std::shared_ptr<const std::atomic<bool>> cancel) {
  const int64_t n_prompt = int64_t(request.prompt.size());
  check_arg(n_prompt > 0, "[llm] the prompt is empty");
  check_arg(request.n >= 1, "[llm] n must be at least 1");
  const int32_t vocab = int32_t(model_.config().vocab_size);
  for (int32_t id : request.prompt)
    check_arg(id >= 0 && id < vocab, "[llm] prompt token " + std::to_string(id) +
                                         " is outside the vocabulary of " + std::to_string(vocab));
  for (int32_t id : request.prediction)
    check_arg(id >= 0 && id < vocab, "[llm] prediction token " + std::to_string(id) +
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
  // Alone in the pool (every other request preempted), the worst case (no sharing) must fit,
  // or the request could never finish.
  const int64_t blocks_each = KvCache::blocks_for(n_prompt + max_new);
  check(blocks_each * request.n <= cache_.n_blocks(), ErrorKind::resource_exhausted,
        "[llm] " + std::to_string(request.n) + " choices of " + std::to_string(n_prompt + max_new) +
            " tokens need " + std::to_string(blocks_each * request.n) +
            " KV blocks; the cache holds " + std::to_string(cache_.n_blocks()));

  std::shared_ptr<ByteAutomaton> grammar;
  if (request.grammar) grammar = compile_grammar(request.grammar);  // throws for a bad one
  auto a = std::make_unique<Active>();
  a->spec = request.speculative ? *request.speculative
            : request.prediction.empty() || options_.speculative.enabled()
                ? options_.speculative
                : prediction_config(options_.speculative);
  // Under a grammar the draft model's drafts would need its own masks: prompt lookup and
  // suffix drafts are verified under the grammar's masks, and the bytes the grammar forces
  // are drafted first (propose_drafts).
  if (grammar && a->spec.method == SpecMethod::draft) a->spec = SpeculativeConfig{};
  validate(a->spec);
  check_arg(a->spec.method != SpecMethod::draft || draft_,
            "speculative: the draft method needs a draft model (the server's --draft-model)");
  check_arg(a->spec.method != SpecMethod::mtp || mtp_cache_,
            "speculative: the mtp method needs a model with an MTP module");
  a->on_token = std::move(on_token);
  a->on_done = std::move(on_done);
  a->cancel = std::move(cancel);
  a->submitted = Clock::now();
  a->result.prompt_tokens = n_prompt;
  for (int i = 0; i < request.n; ++i) {
    Active::Choice& c = a->choices.emplace_back();
    c.sampler.emplace(params, vocab, request.prompt, eos_, uint64_t(i));
    c.proposer = make_proposer(a->spec, &suffix_cache_, request.cache_salt, request.prediction);
    if (grammar) {
      if (!token_trie_) token_trie_ = make_token_trie(tokenizer_, vocab);
      // One compiled grammar per choice: an automaton fills its states as it runs, and the
      // choices sample on different threads.
      const std::span<const int32_t> stops = c.sampler->stop_tokens();
      c.constraint = std::make_unique<TokenConstraint>(
          i == 0 ? grammar : compile_grammar(request.grammar), token_trie_,
          std::vector<int32_t>(stops.begin(), stops.end()));
      TokenConstraint* rc = c.constraint.get();
      c.sampler->set_logit_hook(
          [rc](std::span<float> logits, const RowSampling&) { rc->mask(logits); });
    }
    c.decoder.emplace(tokenizer_, /*skip_special_tokens=*/true);
    c.stops = StopMatcher(params.stop);
  }
  a->open_choices = request.n;
  SequenceGroup& g = a->group;
  g.n = request.n;
  g.ns = request.cache_salt;
  g.user = a.get();
  Sequence& first = g.seqs.emplace_back();
  first.id = next_id_;
  first.tokens = request.prompt;
  next_id_ += KvRequestId(request.n);  // the forked choices take the ids after it
  scheduler_.add(&g);
  active_.push_back(std::move(a));
}

std::shared_ptr<const TokenTrie> make_token_trie(const Tokenizer& tokenizer, int32_t vocab) {
  auto bytes = std::make_shared<std::vector<std::string>>(size_t(vocab));
  for (int32_t id = 0; id < vocab; ++id)
    if (tokenizer.has_token(id) && !tokenizer.is_special(id))
      (*bytes)[size_t(id)] = tokenizer.token_bytes(id);
  return std::make_shared<const TokenTrie>(std::move(bytes));
}

GenerateResult LlmEngine::generate(const GenerateRequest& request, const TokenCallback& on_token) {
  std::optional<GenerateResult> out;
  std::exception_ptr error;
  bool done = false;
  submit(request, on_token, [&](GenerateResult* r, std::exception_ptr e) {
    if (r) out = std::move(*r);
    error = e;
    done = true;
  });
  while (!done) check(step() || done, ErrorKind::internal, "[llm] the engine made no progress");
  if (error) std::rethrow_exception(error);
  return std::move(*out);
}

void LlmEngine::finish(Active& a, std::exception_ptr error) {
  scheduler_.remove(&a.group);
  if (draft_)
    for (const Sequence& s : a.group.seqs) draft_->release(s.id);
  GenerateResult& r = a.result;
  r.cached_tokens = std::max<int64_t>(0, a.group.cached_tokens);
  for (auto& c : a.choices) {
    if (c.out.finish == ChoiceFinish::none) c.out.finish = ChoiceFinish::cancelled;
    if (a.spec.method == SpecMethod::suffix && !error)
      suffix_cache_.add_output(a.group.ns, c.out.tokens);
    r.choices.push_back(std::move(c.out));
  }
  GenerateTimings& t = r.timings;
  if (a.started) {
    t.queue_ms = ms_between(a.submitted, a.first_run);
    if (a.token_steps > 0) {
      t.prefill_ms = ms_between(a.first_run, a.first_token);
      t.first_token_ms = ms_between(a.submitted, a.first_token);
      if (a.token_steps > 1)
        t.per_token_ms = ms_between(a.first_token, a.last_token) / double(a.token_steps - 1);
    }
  }
  t.preemptions = a.group.preemptions;
  counters_.prompt_tokens += uint64_t(r.prompt_tokens);
  try {
    if (a.on_done) a.on_done(error ? nullptr : &r, error);
  } catch (const std::exception& e) {
    std::cerr << "[llm] a request's completion callback threw: " << e.what() << std::endl;
  }
  active_.remove_if([&](const std::unique_ptr<Active>& p) { return p.get() == &a; });
}

void LlmEngine::accept(Active& a, int index, const SampleResult& s) {
  Active::Choice& c = a.choices[size_t(index)];
  if (c.constraint) c.constraint->accept(s.token);
  c.out.tokens.push_back(s.token);
  c.out.samples.push_back(s);
  ++a.result.completion_tokens;
  ++counters_.generated_tokens;
  // A sampled id without a token (the model's padded vocabulary rows) adds no text, as the
  // tokenizers crate's decode skips it.
  StopMatcher::Step step =
      c.stops.push(tokenizer_.has_token(s.token) ? c.decoder->push(s.token) : std::string());
  bool done = false;
  if (s.finish != FinishReason::none || step.stopped) {
    if (!step.stopped) step.emit += c.stops.push(c.decoder->flush()).emit;
    if (!c.stops.stopped()) step.emit += c.stops.flush();
    done = true;
    c.out.finish = c.stops.stopped() || s.finish == FinishReason::stop ? ChoiceFinish::stop
                                                                       : ChoiceFinish::length;
    c.out.stop_index = c.stops.stop_index();
  }
  c.out.text += step.emit;
  bool go_on = true;
  if (a.on_token) {
    try {
      go_on = a.on_token(index, step.emit, s);
    } catch (const std::exception& e) {
      std::cerr << "[llm] a request's token callback threw: " << e.what() << std::endl;
      go_on = false;
    }
  }
  if (done) {
    scheduler_.finish_sequence(&a.group, index);
    --a.open_choices;
  } else {
    scheduler_.append_token(&a.group, index, s.token);
  }
  if (!go_on) {  // the whole request is cancelled
    for (int i = 0; i < int(a.choices.size()); ++i) {
      if (a.choices[size_t(i)].out.finish != ChoiceFinish::none) continue;
      a.choices[size_t(i)].out.finish = ChoiceFinish::cancelled;
      if (i < int(a.group.seqs.size())) scheduler_.finish_sequence(&a.group, i);
      --a.open_choices;
    }
  }
}

bool LlmEngine::propose_forced(TokenConstraint& constraint, int k, std::vector<int32_t>& out) {
  if (k <= 0 || !options_.forced_drafts) return false;
  bool final = false;
  const std::string forced = constraint.forced_bytes(kMaxForcedBytes, &final);
  if (forced.empty()) return false;
  std::vector<int32_t> ids = tokenizer_.encode(forced, /*add_special_tokens=*/false);
  // The last token may merge with what follows the forced bytes (`"` and the value's first
  // characters): drafted only when nothing can follow.
  if (!final && !ids.empty()) ids.pop_back();
  if (ids.size() > size_t(k)) ids.resize(size_t(k));
  out = std::move(ids);
  counters_.spec_forced_tokens += uint64_t(out.size());
  return !out.empty();
}

void LlmEngine::propose_drafts() {
  std::vector<DraftRunner::Job> jobs;  // the draft model's, run together after the loop
  bool disabled = false;               // disable_by_batch_size reached: no drafts this step
  if (const int limit = options_.speculative.disable_by_batch_size; limit > 0) {
    int64_t decoding = 0;
    for (SequenceGroup* g : scheduler_.running())
      for (const Sequence& s : g->seqs) decoding += s.finished ? 0 : 1;
    disabled = decoding >= limit;
    counters_.spec_disabled_steps += disabled ? 1 : 0;
  }
  for (SequenceGroup* g : scheduler_.running()) {
    Active& a = *static_cast<Active*>(g->user);
    for (Sequence& s : g->seqs) s.draft.clear();
    const bool constrained = a.choices[0].constraint != nullptr;
    if (disabled || !g->forked() || (!a.spec.enabled() && !constrained)) continue;
    const bool by_draft = a.spec.method == SpecMethod::draft && draft_;
    const bool by_mtp = drafts_with_mtp(a);
    for (size_t i = 0; i < g->seqs.size(); ++i) {
      Sequence& s = g->seqs[i];
      Active::Choice& c = a.choices[i];
      if ((!c.proposer && !by_draft && !by_mtp && !constrained) || s.finished ||
          c.out.finish != ChoiceFinish::none || !pool_.has_request(s.id) ||
          pool_.num_computed(s.id) + 1 != int64_t(s.tokens.size()))
        continue;
      // k + 1 accepted tokens at most: no draft past max_tokens (and so the context).
      const int64_t left = int64_t(*c.sampler->params().max_tokens) - c.sampler->step();
      if (constrained &&
          propose_forced(*c.constraint, int(std::min<int64_t>(kMaxForcedDrafts, left - 1)),
                         s.draft)) {
        a.result.forced_draft_tokens += int64_t(s.draft.size());
        continue;
      }
      const int k = int(std::min<int64_t>(a.spec.num_tokens, left - 1));
      if (by_mtp) {  // one token: the module's guess after the last forward
        if (k > 0 && c.mtp_next >= 0 && c.mtp_len == s.tokens.size()) s.draft.push_back(c.mtp_next);
        continue;
      }
      if (k <= 0 || (!c.proposer && !by_draft)) continue;
      if (by_draft) {
        const SamplingParams& sp = c.sampler->params();
        c.draft_probs.clear();
        jobs.push_back({s.id, s.tokens, k, &s.draft, sp.temperature, c.sampler->seed(),
                        c.sampler->stream(),
                        sp.temperature >= kGreedyTemperature ? &c.draft_probs : nullptr});
      } else {
        c.proposer->propose(s.tokens, k, s.draft);
      }
    }
  }
  if (!jobs.empty()) draft_->propose(jobs);
}

void LlmEngine::prefetch_masks(std::span<const ScheduledRow> rows) {
  using Overlap = LlmEngineOptions::MaskOverlap;
  if (options_.mask_overlap == Overlap::off ||
      (options_.mask_overlap == Overlap::automatic && model_.device() != Device::cuda))
    return;
  std::vector<TokenConstraint*> constraints;
  for (const ScheduledRow& r : rows) {
    if (!r.logits) continue;
    Active& a = *static_cast<Active*>(r.group->user);
    if (!a.choices[0].constraint) continue;
    if (r.drafts == 0 && !r.group->forked()) {  // a finished prompt: every choice samples
      for (Active::Choice& c : a.choices) constraints.push_back(c.constraint.get());
    } else {  // a decode or verify row (a verify row's later positions are not prefetched)
      constraints.push_back(a.choices[size_t(r.seq)].constraint.get());
    }
  }
  if (constraints.empty()) return;
  counters_.prefetched_masks += constraints.size();
  if (!mask_prefetch_)
    mask_prefetch_ =
        std::make_unique<MaskPrefetch>(int(std::max(1u, std::thread::hardware_concurrency() / 2)));
  mask_prefetch_->start(std::move(constraints));
}

void LlmEngine::run_rows(std::span<const ScheduledRow> rows) {
  if (rows.empty()) return;
  batch_.rows.clear();
  verify_tokens_.clear();
  size_t verify_size = 0;
  for (const ScheduledRow& r : rows) verify_size += r.drafts > 0 ? size_t(r.length) : 0;
  verify_tokens_.reserve(verify_size);  // the rows' spans into it stay valid
  for (const ScheduledRow& r : rows) {
    const Sequence& s = r.group->seqs[size_t(r.seq)];
    std::span<const int32_t> tokens =
        std::span(s.tokens).subspan(size_t(r.start), size_t(r.length));
    if (r.drafts > 0) {  // the last accepted token, then the drafts the plan took
      const size_t at = verify_tokens_.size();
      verify_tokens_.push_back(s.tokens[size_t(r.start)]);
      verify_tokens_.insert(verify_tokens_.end(), s.draft.begin(), s.draft.begin() + r.drafts);
      tokens = std::span(verify_tokens_).subspan(at, size_t(r.length));
    }
    batch_.rows.push_back(
        {tokens, int32_t(r.start), pool_.block_table(s.id), r.logits, /*logits_all=*/r.drafts > 0});
  }
  // Requests drafting with the MTP module need the hidden states of their positions.
  scratch_.keep_hidden = std::any_of(rows.begin(), rows.end(), [&](const ScheduledRow& r) {
    return drafts_with_mtp(*static_cast<const Active*>(r.group->user));
  });
  const Clock::time_point f0 = Clock::now();
  prefetch_masks(rows);
  try {
    model_.forward(batch_, cache_, logits_, scratch_);
  } catch (...) {
    if (mask_prefetch_) mask_prefetch_->wait();  // it holds the constraints
    throw;
  }
  const Clock::time_point f1 = Clock::now();
  if (mask_prefetch_) {
    mask_prefetch_->wait();
    counters_.mask_wait_seconds += std::chrono::duration<double>(Clock::now() - f1).count();
  }
  counters_.forward_seconds += std::chrono::duration<double>(f1 - f0).count();
  ++counters_.forwards;
  if (trace_) {
    nlohmann::json requests = nlohmann::json::array();
    int64_t tokens = 0, decode = 0, drafts = 0;
    for (const ScheduledRow& r : rows) {
      tokens += r.length;
      decode += r.decode ? 1 : 0;
      drafts += r.drafts;
      requests.push_back(r.group->seqs[0].id);
    }
    trace_->span("forward", f0, f1, 1,
                 {{"rows", rows.size()},
                  {"tokens", tokens},
                  {"decode_rows", decode},
                  {"draft_tokens", drafts},
                  {"requests", requests}});
  }
  // Verify rows commit what they accept, after the verifier.
  for (const ScheduledRow& r : rows)
    if (r.drafts == 0) pool_.commit(r.group->seqs[size_t(r.seq)].id, r.start + r.length);

  // The sampling rows: one per plain logits row, or n for a prompt that just finished (its
  // group forks, every choice sampling from the prompt's logits); and the verify rows.
  struct Pick {
    Active* a;
    int choice;
    int64_t logits_row;
  };
  std::vector<Pick> picks;
  struct Check {
    Active* a;
    const ScheduledRow* row;
    int64_t logits_row;  // the first of its drafts + 1 rows
    std::vector<SampleResult> out;
  };
  std::vector<Check> checks;
  std::vector<VerifyRow> verify;
  bool gathered = false;
  int64_t k = 0;
  for (const ScheduledRow& r : rows) {
    if (!r.logits) continue;
    Active* a = static_cast<Active*>(r.group->user);
    if (r.drafts > 0) {
      checks.push_back({a, &r, k, {}});
      k += r.drafts + 1;
      continue;
    }
    if (!r.group->forked()) {
      scheduler_.fork_group(r.group, r.group->seqs[0].id + 1);
      for (int c = 0; c < r.group->n; ++c) picks.push_back({a, c, k});
      gathered = true;
    } else {
      picks.push_back({a, r.seq, k});
    }
    ++k;
  }
  std::vector<SampleResult> samples(picks.size());
  if (!picks.empty()) {
    Tensor logits = logits_;
    if (gathered || !checks.empty()) {
      logits = Tensor::empty({int64_t(picks.size()), logits_.dim(1)}, DType::f32);
      for (size_t i = 0; i < picks.size(); ++i)
        logits.slice0(int64_t(i), int64_t(i) + 1)
            .copy_from(logits_.slice0(picks[i].logits_row, picks[i].logits_row + 1));
    }
    std::vector<RowSampling*> samplers;
    for (const Pick& p : picks) samplers.push_back(&*p.a->choices[size_t(p.choice)].sampler);
    sample_rows(logits, samplers, samples);
  }
  if (!checks.empty()) {
    for (Check& c : checks) {
      const ScheduledRow& r = *c.row;
      const Sequence& s = r.group->seqs[size_t(r.seq)];
      Active::Choice& choice = c.a->choices[size_t(r.seq)];
      verify.push_back({&*choice.sampler, logits_.data<float>() + c.logits_row * logits_.dim(1),
                        std::span(s.draft).first(size_t(r.drafts)), &c.out,
                        choice.draft_probs.empty() ? nullptr : choice.draft_probs.data(),
                        choice.constraint.get()});
    }
    verify_rows(verify);
  }
  taken_by_row_.assign(rows.size(), -1);
  if (picks.empty() && checks.empty()) {
    run_mtp(rows, taken_by_row_);
    return;
  }
  const Clock::time_point now = Clock::now();
  if (trace_)
    trace_->span("sample", f1, now, 1, {{"rows", picks.size()}, {"verify_rows", checks.size()}});
  const auto count_step = [&](Active& a) {
    if (a.last_forward != counters_.forwards) {  // once per request per forward
      a.last_forward = counters_.forwards;
      if (a.token_steps++ == 0) a.first_token = now;
      a.last_token = now;
    }
  };
  for (size_t i = 0; i < picks.size(); ++i) {
    Active& a = *picks[i].a;
    count_step(a);
    if (a.failed || a.choices[size_t(picks[i].choice)].out.finish != ChoiceFinish::none) continue;
    try {
      accept(a, picks[i].choice, samples[i]);
    } catch (...) {
      a.failed = std::current_exception();
    }
  }
  for (size_t i = 0; i < checks.size(); ++i) {
    Check& c = checks[i];
    Active& a = *c.a;
    const ScheduledRow& r = *c.row;
    count_step(a);
    ++counters_.spec_rows;
    counters_.spec_draft_tokens += uint64_t(r.drafts);
    const int accepted = accepted_drafts(verify[i]);
    counters_.spec_accepted_tokens += uint64_t(accepted);
    a.result.draft_tokens += r.drafts;
    a.result.accepted_draft_tokens += accepted;
    const Active::Choice& choice = a.choices[size_t(r.seq)];
    int64_t taken = 0;
    for (const SampleResult& sample : c.out) {
      if (a.failed || choice.out.finish != ChoiceFinish::none) break;
      try {
        accept(a, r.seq, sample);
        ++taken;
      } catch (...) {
        a.failed = std::current_exception();
      }
    }
    // The KV of the row's first token and of the drafts that matched is kept; the rest of
    // the row's positions are rolled back.
    const Sequence& s = r.group->seqs[size_t(r.seq)];
    if (!s.finished && pool_.has_request(s.id)) {
      pool_.commit(s.id, r.start + taken);
      pool_.rollback(s.id);
    }
    taken_by_row_[size_t(&r - rows.data())] = taken;
  }
  run_mtp(rows, taken_by_row_);
}

bool LlmEngine::drafts_with_mtp(const Active& a) const {
  return mtp_cache_ && a.spec.method == SpecMethod::mtp && a.spec.enabled() && a.group.n == 1;
}

void LlmEngine::run_mtp(std::span<const ScheduledRow> rows, std::span<const int64_t> taken) {
  if (!scratch_.keep_hidden || !scratch_.hidden.defined()) return;
  Batch batch;
  std::vector<int32_t> index;  // each MTP token's row in the forward's hidden states
  std::vector<Active::Choice*> drafting;
  int64_t t0 = 0;
  for (size_t i = 0; i < rows.size(); t0 += rows[i].length, ++i) {
    const ScheduledRow& r = rows[i];
    Active& a = *static_cast<Active*>(r.group->user);
    if (!drafts_with_mtp(a) || a.failed) continue;
    const Sequence& s = r.group->seqs[size_t(r.seq)];
    if (s.finished || !pool_.has_request(s.id)) continue;
    // The positions this forward committed whose next token is known: a verify row's kept
    // ones, a prompt chunk's or decode row's all (the last one's next is the sampled token).
    const int64_t n = std::min<int64_t>(taken[i] >= 0 ? taken[i] : r.length,
                                        int64_t(s.tokens.size()) - 1 - r.start);
    if (n <= 0) continue;
    const bool latest = r.start + n + 1 == int64_t(s.tokens.size());
    batch.rows.push_back({std::span(s.tokens).subspan(size_t(r.start + 1), size_t(n)),
                          int32_t(r.start), pool_.block_table(s.id), latest, false});
    for (int64_t j = 0; j < n; ++j) index.push_back(int32_t(t0 + j));
    if (latest) {
      Active::Choice& c = a.choices[size_t(r.seq)];
      c.mtp_next = -1;
      c.mtp_len = s.tokens.size();
      drafting.push_back(&c);
    }
  }
  if (batch.rows.empty()) return;
  const int64_t n = int64_t(index.size()), h = model_.config().hidden_size;
  Tensor idx_host = scratch_.host.alloc({n}, DType::i32);
  std::copy(index.begin(), index.end(), idx_host.data<int32_t>());
  Tensor idx = idx_host;
  if (model_.device() != Device::cpu) {
    idx = scratch_.pool.alloc({n}, DType::i32);
    idx.copy_from(idx_host);
  }
  Tensor hidden = scratch_.pool.alloc({n, h}, model_.dtype());
  embedding(scratch_.hidden, idx, hidden);  // gathers the rows
  Tensor logits;
  model_.forward_mtp(batch, hidden, *mtp_cache_, logits, scratch_);
  const int64_t vocab = logits.dim(1);
  for (size_t k = 0; k < drafting.size(); ++k) {
    const float* row = logits.data<float>() + int64_t(k) * vocab;
    drafting[k]->mtp_next = int32_t(std::max_element(row, row + vocab) - row);
  }
}

bool LlmEngine::step() {
  const Clock::time_point t0 = Clock::now();
  // Requests whose client went away leave before the plan.
  for (auto it = active_.begin(); it != active_.end();) {
    Active& a = **it++;
    if (a.cancel && a.cancel->load()) finish(a);
  }
  const Clock::time_point s0 = Clock::now();
  propose_drafts();
  const SchedulePlan plan = scheduler_.schedule();
  if (plan.empty()) {
    publish_stats();
    return false;
  }
  if (trace_) {
    const SchedulerStats st = scheduler_.stats();
    trace_->span("schedule", s0, Clock::now(), 1,
                 {{"tokens", plan.tokens},
                  {"rows", plan.rows.size()},
                  {"waiting", st.waiting},
                  {"running", st.running},
                  {"preempted", plan.preempted.size()}});
  }
  for (const ScheduledRow& r : plan.rows) {
    Active& a = *static_cast<Active*>(r.group->user);
    if (!a.started) {
      a.started = true;
      a.first_run = t0;
    }
  }
  try {
    const auto rows = std::span(plan.rows);
    const size_t n_decode = size_t(
        std::count_if(rows.begin(), rows.end(), [](const ScheduledRow& r) { return r.decode; }));
    if (options_.mixed_prefill || n_decode == 0 || n_decode == rows.size()) {
      run_rows(rows);
    } else {
      run_rows(rows.first(n_decode));
      run_rows(rows.subspan(n_decode));
    }
  } catch (...) {
    // A failed forward fails every request it touched: their KV is in doubt.
    const std::exception_ptr error = std::current_exception();
    std::vector<Active*> touched;
    for (const ScheduledRow& r : plan.rows) {
      Active* a = static_cast<Active*>(r.group->user);
      if (std::find(touched.begin(), touched.end(), a) == touched.end()) touched.push_back(a);
    }
    for (Active* a : touched) finish(*a, error);
  }
  for (auto it = active_.begin(); it != active_.end();) {
    Active& a = **it++;
    if (a.failed) {
      finish(a, a.failed);
    } else if (a.open_choices <= 0) {
      finish(a);
    }
  }
  const Clock::time_point t1 = Clock::now();
  counters_.busy_seconds += std::chrono::duration<double>(t1 - t0).count();
  if (trace_) {
    trace_->span("iteration", t0, t1, 0, {{"tokens", plan.tokens}, {"rows", plan.rows.size()}});
    trace_->flush();
  }
  publish_stats();
  return true;
}

}  // namespace parley
