#include "serving/chat_service.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string_view>

#include "engine/error.h"
#include "llm/gguf_template.h"

namespace parley {

std::string render_conversation(const LoadedChatTemplate& tmpl,
                                const nlohmann::ordered_json& messages,
                                const nlohmann::ordered_json& tools,
                                const nlohmann::ordered_json& template_kwargs,
                                bool add_generation_prompt) {
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  if (template_kwargs.is_object())
    for (const auto& [k, v] : template_kwargs.items()) ctx[k] = v;
  ctx["messages"] = alias_reasoning_fields(messages);
  ctx["tools"] = tools;
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = tmpl.bos_token;
  ctx["eos_token"] = tmpl.eos_token;
  return tmpl.tmpl.render(ctx);
}

ChatService::ChatService(ChatServiceOptions options) : options_(std::move(options)) {
  model_ = std::make_unique<LlmModel>(LlmModel::load(options_.model_dir, options_.load));
  tokenizer_ = std::make_unique<Tokenizer>(load_llm_tokenizer(options_.model_dir));
  try {
    template_ = std::make_unique<LoadedChatTemplate>(load_llm_chat_template(options_.model_dir));
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::not_found) throw;  // a template that does not parse: fail now
    template_error_ = e.what();
  }
  if (!options_.draft_model_dir.empty())
    draft_ = std::make_unique<LlmModel>(LlmModel::load(options_.draft_model_dir, options_.load));
  engine_ = std::make_unique<LlmEngine>(*model_, *tokenizer_, options_.engine, draft_.get());
  worker_ = std::thread([this] { worker_loop(); });
}

ChatService::~ChatService() { stop(); }

bool ChatService::submit(std::shared_ptr<ChatJob> job) {
  std::lock_guard lock(mu_);
  const int64_t waiting = int64_t(queue_.size()) + engine_->stats().scheduler.waiting;
  if (stopping_ || waiting >= options_.queue_capacity) return false;
  queue_.push_back(std::move(job));
  cv_.notify_one();
  return true;
}

void ChatService::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

std::string ChatService::template_source() const {
  return template_ ? template_->tmpl.source() : std::string();
}

std::string ChatService::model_id() const {
  const auto dir = std::filesystem::path(options_.model_dir).lexically_normal();
  return (dir.has_filename() ? dir : dir.parent_path()).filename().string();
}

ChatStats ChatService::stats() const {
  const LlmEngineStats e = engine_->stats();
  std::lock_guard lock(mu_);
  ChatStats s = totals_;
  s.queued = int(queue_.size() + size_t(e.scheduler.waiting));
  s.running = int(e.scheduler.running);
  s.engine = e;
  return s;
}

std::vector<int32_t> ChatService::prompt_ids(const ChatJob& job) const {
  if (!job.prompt_ids.empty()) return job.prompt_ids;
  if (!job.chat) return tokenizer_->encode(job.prompt, /*add_special_tokens=*/true);
  check_arg(template_ != nullptr, "[chat] this model has no chat template (" + template_error_ +
                                      "); use /v1/completions");
  return tokenizer_->encode(render_conversation(*template_, job.messages, job.tools,
                                                job.template_kwargs, job.add_generation_prompt),
                            /*add_special_tokens=*/false);
}

// The engine thread: new jobs join the engine between iterations; the HTTP threads rendered
// and tokenized them already, and the callbacks only hand text to their connections.
void ChatService::worker_loop() {
  for (;;) {
    std::deque<std::shared_ptr<ChatJob>> incoming;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !engine_->idle(); });
      if (stopping_ && queue_.empty() && engine_->idle()) return;
      incoming.swap(queue_);
    }
    for (auto& job : incoming) admit(std::move(job));
    std::unique_lock<std::mutex> gpu;  // the GPU to itself for the iteration (Whisper shares it)
    if (model_->device() == Device::cuda) gpu = std::unique_lock(cuda::exclusive());
    engine_->step();
  }
}

void ChatService::admit(std::shared_ptr<ChatJob> job) {
  const auto fail = [&](std::exception_ptr error) {
    if (job->on_done) job->on_done(nullptr, error);
  };
  if (job->cancelled) {
    fail(std::make_exception_ptr(Error(ErrorKind::cancelled, "[chat] the client went away")));
    return;
  }
  try {
    GenerateRequest req;
    req.prompt = prompt_ids(*job);
    req.params = job->params;
    req.n = job->n;
    req.cache_salt = job->cache_salt;
    req.speculative = job->speculative;
    req.grammar = job->grammar;
    if (!job->prediction.empty())
      req.prediction = tokenizer_->encode(job->prediction, /*add_special_tokens=*/false);
    ChatJob* j = job.get();
    // Each choice's gap since its previous token goes into the inter-token histogram.
    auto on_token = [this, j,
                     last = std::vector<std::chrono::steady_clock::time_point>(size_t(job->n))](
                        int choice, std::string_view delta, const SampleResult& s) mutable {
      const auto now = std::chrono::steady_clock::now();
      auto& prev = last[size_t(choice)];
      if (prev != std::chrono::steady_clock::time_point{}) {
        std::lock_guard lock(mu_);
        totals_.inter_token.add(std::chrono::duration<double>(now - prev).count());
      }
      prev = now;
      if (j->on_token) j->on_token(choice, std::string(delta), s);
      return !j->cancelled.load();
    };
    auto on_done = [this, job](GenerateResult* r, std::exception_ptr error) {
      {
        std::lock_guard lock(mu_);
        ++totals_.requests;
        if (r) {
          totals_.prompt_tokens += uint64_t(r->prompt_tokens);
          totals_.completion_tokens += uint64_t(r->completion_tokens);
          totals_.cached_tokens += uint64_t(r->cached_tokens);
          if (r->completion_tokens > 0) totals_.first_token.add(r->timings.first_token_ms / 1e3);
        }
      }
      if (!error && job->cancelled)
        error = std::make_exception_ptr(Error(ErrorKind::cancelled, "[chat] the client went away"));
      if (job->on_done) job->on_done(error ? nullptr : r, error);
    };
    engine_->submit(req, std::move(on_token), std::move(on_done),
                    std::shared_ptr<const std::atomic<bool>>(job, &job->cancelled));
  } catch (...) {
    fail(std::current_exception());
  }
}

}  // namespace parley
