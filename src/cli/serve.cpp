// `parley serve --model DIR [--whisper DIR]`: the OpenAI-compatible server (docs/SERVER.md).
// --model names a chat model (its config.json's model_type is a chat family) or a Whisper
// model; the audio routes always have one (--whisper, or --model when it is Whisper, or the
// built-in tiny.en). Builds the WhisperService (model residency, batch, queue), the
// ChatService with a chat model, and runs the HTTP server until SIGINT/SIGTERM, which
// drains admitted requests first.
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/load_options.h"
#include "cli/speculative_flags.h"
#include "cli/vad_gate.h"
#include "engine/threadpool.h"
#include "llm/gguf_loader.h"
#include "server/http_server.h"
#include "serving/audio_sessions.h"
#include "serving/chat_service.h"
#include "serving/whisper_service.h"

namespace parley::cli {
namespace {

struct ServeCliOptions {
  std::string model;
  std::string whisper;
  int64_t context = 0;
  int chat_queue = 64;
  double kv_cache_gb = 0;
  double kv_ram_gb = 0;
  std::string kv_cache_dir;
  int64_t max_batch_tokens = 8192;
  int max_running = 8;
  std::string mixed_prefill = "on";
  std::string trace;
  std::string residency = "resident";
  double max_body_mb = 25;
  int whisper_batch = 16;
  int sample_len = 0;
  int interim_slots = 0;
  std::string live_audio_ctx = "fit";
  std::string session_commit = "windows";
  int queue = 64;
  int threads = 0;
  std::string vad = "on";
  std::string vad_model;  // empty: default_vad_model_path()
  server::ServerOptions http;
  DeviceFlags device;
  SpeculativeFlags speculative;
  int audio_ctx = 0;              // LoadOptions::audio_ctx for every transcription (live use)
  AudioSessionsOptions sessions;  // dir empty: $PARLEY_HOME/sessions
  double max_session_mb = 512;
};

void run_serve(ServeCliOptions opt) {
  if (opt.threads > 0) set_cpu_threads(opt.threads);
  check_arg(opt.max_body_mb > 0, "[serve] --max-body-mb must be positive");
  opt.http.max_body_bytes = uint64_t(opt.max_body_mb * 1024 * 1024);
  std::unique_ptr<ChatService> chat;
  if (!opt.model.empty() && is_llm_model(opt.model)) {
    ChatServiceOptions c;
    c.model_dir = opt.model;
    c.load = llm_load_options(opt.device);
    c.queue_capacity = opt.chat_queue;
    c.engine.max_context = opt.context;
    c.engine.kv_cache_gb = opt.kv_cache_gb;
    c.engine.kv_ram_gb = opt.kv_ram_gb;
    c.engine.kv_cache_dir = opt.kv_cache_dir;
    c.engine.max_batch_tokens = opt.max_batch_tokens;
    c.engine.max_running = opt.max_running;
    c.engine.mixed_prefill = opt.mixed_prefill == "on";
    c.engine.trace_path = opt.trace;
    c.engine.speculative = speculative_config(opt.speculative);
    c.draft_model_dir = opt.speculative.draft_model;
    // Without --kv-cache-gb, every running request can reach the full context.
    c.engine.kv_rows = opt.max_running;
    chat = std::make_unique<ChatService>(c);
    opt.model.clear();
  }
  ServiceOptions s;
  s.model_dir = !opt.whisper.empty() ? opt.whisper
                : opt.model.empty()  ? default_model_dir()
                                     : opt.model;
  s.load = load_options(opt.device, opt.audio_ctx);
  s.batch = opt.whisper_batch;
  s.max_sample_len = opt.sample_len;
  s.background_slots = opt.interim_slots;
  s.live_fit_audio_ctx = opt.live_audio_ctx == "fit";
  s.queue_capacity = opt.queue;
  s.residency = opt.residency == "per-request" ? Residency::per_request : Residency::resident;
  s.vad_default = opt.vad == "on";
  if (!opt.vad_model.empty()) {
    s.vad_model = opt.vad_model;  // named: must load
  } else if (std::filesystem::exists(default_vad_model_path())) {
    s.vad_model = default_vad_model_path();
  } else if (s.vad_default) {
    std::cerr << "[serve] no Silero VAD model at " << default_vad_model_path()
              << " (scripts/setup.sh installs it): the silence gate is off" << std::endl;
  }
  WhisperService service(s);
  if (opt.sessions.dir.empty()) opt.sessions.dir = parley_home() + "/sessions";
  opt.sessions.commit = commit_from_name(opt.session_commit);
  check_arg(opt.max_session_mb > 0, "[serve] --max-session-mb must be positive");
  opt.sessions.max_session_bytes = uint64_t(opt.max_session_mb * 1024 * 1024);
  AudioSessions sessions(opt.sessions, service);
  server::serve_http(opt.http, service, chat.get(), &sessions);
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto opt = std::make_shared<ServeCliOptions>();
  auto* cmd = app.add_subcommand(
      "serve", "OpenAI-compatible transcription server (POST /v1/audio/transcriptions ...)");
  cmd->add_option("-m,--model", opt->model,
                  "Chat model folder (Hugging Face layout) or Whisper model folder "
                  "(default: the built-in tiny.en)");
  cmd->add_option("--whisper", opt->whisper,
                  "Whisper model folder for the audio routes beside a chat model "
                  "(default: the built-in tiny.en)");
  cmd->add_option("--context", opt->context,
                  "Chat: longest prompt + output (default: the model's, at most 8192)");
  cmd->add_option(
         "--kv-cache-gb", opt->kv_cache_gb,
         "Chat: KV cache (prefix cache) size in GiB (default: --max-running requests at full "
         "context)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv-cache-ram-gb", opt->kv_ram_gb,
                  "Chat: host memory in GiB for KV blocks evicted from the cache (default: 0, off)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv-cache-dir", opt->kv_cache_dir,
                  "Chat: folder that keeps evicted KV blocks across restarts (default: none)");
  cmd->add_option("--chat-queue", opt->chat_queue,
                  "Chat requests waiting beyond the running ones (429 beyond)")
      ->capture_default_str();
  cmd->add_option("--max-batch-tokens", opt->max_batch_tokens,
                  "Chat: tokens per engine iteration (decode tokens first, then prefill chunks)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-running,--batch", opt->max_running,
                  "Chat: requests batched together (1: one after another)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--mixed-prefill", opt->mixed_prefill,
                  "Chat: prefill chunks share the decode rows' forward (on) or run after it (off)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--trace", opt->trace,
                  "Chat: write a Chrome trace of every engine iteration (schedule, forward, "
                  "sampling, with request numbers) to FILE");
  cmd->add_option("--host", opt->http.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", opt->http.port, "Port (0: any free port)")->capture_default_str();
  cmd->add_option("--api-key", opt->http.api_key,
                  "Require 'Authorization: Bearer KEY' (default: no key)");
  cmd->add_option("--max-body-mb", opt->max_body_mb, "Largest request body, MiB (413 beyond)")
      ->capture_default_str();
  cmd->add_option("--queue", opt->queue, "Requests waiting beyond the running ones (429 beyond)")
      ->capture_default_str();
  cmd->add_option("--whisper-batch,--workers", opt->whisper_batch,
                  "Transcriptions decoded together: their windows share encoder calls and "
                  "decoder steps (1: one at a time)")
      ->capture_default_str();
  cmd->add_option("--sample-len", opt->sample_len,
                  "Most tokens a transcription decodes per 30 s window, every request and live "
                  "stream (openai-whisper's sample_len; 0: the model's 224)")
      ->capture_default_str();
  cmd->add_option("--interim-slots", opt->interim_slots,
                  "Most live streams' interim passes running at once; under more streams "
                  "interim text comes less often (0: a quarter of --whisper-batch)")
      ->capture_default_str();
  cmd->add_option("--live-audio-ctx", opt->live_audio_ctx,
                  "fit: a committed Realtime turn's encoder runs over its audio plus "
                  "2 s in steps of 5 s (at least 15 s), not the whole 30 s window; full: 30 s, as "
                  "a file request")
      ->check(CLI::IsMember({"fit", "full"}))
      ->capture_default_str();
  cmd->add_option("--whisper-residency", opt->residency,
                  "resident: load at start-up; per-request: load per request, free after")
      ->check(CLI::IsMember({"resident", "per-request"}))
      ->capture_default_str();
  cmd->add_option("--io-threads", opt->http.io_threads,
                  "Threads for the connections (HTTP parsing and writing; a Realtime stream's "
                  "audio decoding, resampling and server_vad run on them too)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--cors-origin", opt->http.cors_origin, "Access-Control-Allow-Origin value")
      ->capture_default_str();
  cmd->add_option("--sessions-dir", opt->sessions.dir,
                  "Spool of /v1/audio/sessions (audio and state; reloaded at start-up) "
                  "(default: $PARLEY_HOME/sessions)");
  cmd->add_option("--session-idle-timeout", opt->sessions.idle_timeout_s,
                  "Seconds without requests after which a session and its audio are deleted")
      ->capture_default_str();
  cmd->add_option("--max-sessions", opt->sessions.max_sessions,
                  "Open sessions at once (429 beyond)")
      ->capture_default_str();
  cmd->add_option("--max-session-mb", opt->max_session_mb,
                  "Audio one session may hold, MiB (413 beyond)")
      ->capture_default_str();
  cmd->add_option("--session-commit", opt->session_commit,
                  "A session's default for what it commits during capture: windows (whole "
                  "30 s windows only: the close gives the offline transcript) or agreed (also "
                  "the segments two passes over the audio past the seek agree on: a faster "
                  "close, text that can differ from the offline transcript)")
      ->check(CLI::IsMember({"agreed", "windows"}))
      ->capture_default_str();
  cmd->add_option("--threads", opt->threads, "CPU threads for the model (default: all)");
  add_device_flags(cmd, opt->device);
  add_speculative_flags(cmd, opt->speculative);
  add_whisper_load_flags(cmd, opt->device, opt->audio_ctx);
  cmd->add_option("--vad", opt->vad,
                  "Silence gate for requests that do not set 'vad': audio without speech "
                  "(Silero VAD) gets an empty transcript without running Whisper")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--vad-model", opt->vad_model,
                  "Silero VAD .onnx or .safetensors (default: the one scripts/setup.sh installs)");
  cmd->callback([opt] { run_serve(*opt); });
}

}  // namespace parley::cli
