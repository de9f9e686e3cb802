#include "serving/chat_service.h"

#include <chrono>
#include <filesystem>

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
  engine_ = std::make_unique<LlmEngine>(*model_, *tokenizer_, options_.engine);
  worker_ = std::thread([this] { worker_loop(); });
}

ChatService::~ChatService() { stop(); }

bool ChatService::submit(std::shared_ptr<ChatJob> job) {
  std::lock_guard lock(mu_);
  if (stopping_ || int(queue_.size()) >= options_.queue_capacity) return false;
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

std::string ChatService::model_id() const {
  const auto dir = std::filesystem::path(options_.model_dir).lexically_normal();
  return (dir.has_filename() ? dir : dir.parent_path()).filename().string();
}

ChatStats ChatService::stats() const {
  std::lock_guard lock(mu_);
  ChatStats s = totals_;
  s.queued = int(queue_.size());
  s.running = running_;
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

void ChatService::worker_loop() {
  for (;;) {
    std::shared_ptr<ChatJob> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    const auto t0 = std::chrono::steady_clock::now();
    GenerateResult result;
    std::exception_ptr error;
    try {
      check(!job->cancelled, ErrorKind::cancelled, "[chat] the client went away");
      GenerateRequest req;
      req.prompt = prompt_ids(*job);
      req.params = job->params;
      req.n = job->n;
      req.cache_salt = job->cache_salt;
      std::unique_lock<std::mutex> gpu;  // the GPU to itself (Whisper may share it)
      if (model_->device() == Device::cuda) gpu = std::unique_lock(cuda::exclusive());
      result =
          engine_->generate(req, [&](int choice, std::string_view delta, const SampleResult& s) {
            if (job->on_token) job->on_token(choice, std::string(delta), s);
            return !job->cancelled.load();
          });
      check(!job->cancelled, ErrorKind::cancelled, "[chat] the client went away");
    } catch (...) {
      error = std::current_exception();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    {
      std::lock_guard lock(mu_);
      --running_;
      ++totals_.requests;
      totals_.prompt_tokens += uint64_t(result.prompt_tokens);
      totals_.completion_tokens += uint64_t(result.completion_tokens);
      totals_.compute_seconds += seconds;
    }
    if (job->on_done) job->on_done(error ? nullptr : &result, error);
  }
}

}  // namespace parley
