#include "server/metrics.h"

#include <fstream>
#include <sstream>

#include "whisper/model.h"

namespace parley::server {

void Metrics::count_request(const std::string& route, int status) {
  std::lock_guard lock(mu_);
  ++requests_[{route, status}];
}

void Metrics::count_error(const std::string& kind) {
  std::lock_guard lock(mu_);
  ++errors_[kind];
}

uint64_t resident_memory_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // kB
  }
  return 0;
}

namespace {

// A metric family's "# HELP" and "# TYPE" lines.
void header(std::ostream& o, const char* name, const char* type, const char* help) {
  o << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
}

// A family with one unlabelled sample.
template <typename T>
void scalar(std::ostream& o, const char* name, const char* type, const char* help, T value) {
  header(o, name, type, help);
  o << name << " " << value << "\n";
}

void histogram(std::ostream& o, const char* name, const char* help, const LatencyHistogram& h) {
  header(o, name, "histogram", help);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cumulative += h.counts[i];
    o << name << "_bucket{le=\"" << h.bounds[i] << "\"} " << cumulative << "\n";
  }
  o << name << "_bucket{le=\"+Inf\"} " << h.count << "\n";
  o << name << "_sum " << h.sum << "\n" << name << "_count " << h.count << "\n";
}

}  // namespace

std::string render_chat_metrics(const ChatStats& c) {
  std::ostringstream o;
  o.precision(10);
  const LlmEngineStats& e = c.engine;
  scalar(o, "parley_chat_requests_total", "counter", "Chat and completion requests ended.",
         c.requests);
  scalar(o, "parley_chat_prompt_tokens_total", "counter", "Prompt tokens of ended requests.",
         c.prompt_tokens);
  scalar(o, "parley_chat_generated_tokens_total", "counter", "Tokens sampled, all requests.",
         e.generated_tokens);
  scalar(o, "parley_chat_cached_prompt_tokens_total", "counter",
         "Prompt tokens of ended requests whose KV came from the prefix cache.", c.cached_tokens);
  scalar(o, "parley_chat_requests_waiting", "gauge",
         "Chat requests waiting for a place in the batch.", c.queued);
  scalar(o, "parley_chat_requests_running", "gauge", "Chat requests in the batch.", c.running);
  scalar(o, "parley_chat_iterations_total", "counter", "Scheduler iterations that ran rows.",
         e.scheduler.iterations);
  scalar(o, "parley_chat_scheduled_tokens_total", "counter",
         "Tokens the scheduler put through the model (prefill and decode).",
         e.scheduler.scheduled_tokens);
  scalar(o, "parley_chat_forwards_total", "counter", "Model forward passes.", e.forwards);
  scalar(o, "parley_chat_spec_verify_rows_total", "counter",
         "Speculative decoding: rows whose draft tokens were verified.", e.spec_rows);
  scalar(o, "parley_chat_spec_draft_tokens_total", "counter",
         "Speculative decoding: draft tokens verified.", e.spec_draft_tokens);
  scalar(o, "parley_chat_spec_accepted_tokens_total", "counter",
         "Speculative decoding: draft tokens accepted.", e.spec_accepted_tokens);
  scalar(o, "parley_chat_spec_forced_tokens_total", "counter",
         "Speculative decoding: draft tokens a grammar forced (part of the draft tokens).",
         e.spec_forced_tokens);
  scalar(o, "parley_chat_spec_disabled_steps_total", "counter",
         "Speculative decoding: steps without drafts (--speculative-disable-by-batch-size).",
         e.spec_disabled_steps);
  scalar(o, "parley_chat_grammar_masks_prefetched_total", "counter",
         "Grammar masks computed beside the forward pass.", e.prefetched_masks);
  scalar(o, "parley_chat_preemptions_total", "counter",
         "Requests preempted when the KV blocks ran out (recomputed later).",
         e.scheduler.preemptions);
  scalar(o, "parley_chat_busy_seconds_total", "counter", "Seconds the engine spent in iterations.",
         e.busy_seconds);
  scalar(o, "parley_chat_forward_seconds_total", "counter",
         "Of the busy seconds, those in the model's forward passes.", e.forward_seconds);
  scalar(o, "parley_chat_host_seconds_total", "counter",
         "Of the busy seconds, host work outside the forward passes (scheduling, sampling, "
         "streaming callbacks).",
         e.busy_seconds - e.forward_seconds);
  scalar(o, "parley_chat_kv_blocks_total", "gauge", "KV blocks in the pool.", e.kv.blocks_total);
  scalar(o, "parley_chat_kv_blocks_used", "gauge", "KV blocks referenced by requests.",
         e.kv.blocks_used);
  scalar(o, "parley_chat_kv_blocks_cached", "gauge", "KV blocks holding a cached prefix.",
         e.kv.blocks_cached);
  scalar(o, "parley_chat_prefix_query_tokens_total", "counter",
         "Prompt tokens looked up in the prefix cache.", e.kv.query_tokens);
  scalar(o, "parley_chat_prefix_hit_tokens_total", "counter",
         "Looked-up tokens served from the prefix cache.", e.kv.hit_tokens);
  scalar(o, "parley_chat_prefix_hit_rate", "gauge", "Hit tokens over query tokens.",
         e.kv.query_tokens > 0 ? double(e.kv.hit_tokens) / double(e.kv.query_tokens) : 0.0);
  scalar(o, "parley_chat_kv_evictions_total", "counter", "Cached KV blocks evicted for reuse.",
         e.kv.evictions);
  scalar(o, "parley_chat_kv_tier_hit_blocks_total", "counter",
         "KV blocks restored from the RAM or SSD tier.", e.kv.tier_hit_blocks);
  scalar(o, "parley_chat_kv_ssd_blocks", "gauge", "KV blocks in the SSD tier's folder.",
         e.tiers.ssd_blocks);
  scalar(o, "parley_chat_kv_ssd_writes_total", "counter", "KV block files written.",
         e.tiers.ssd_writes);
  scalar(o, "parley_chat_kv_ssd_hits_total", "counter", "KV blocks read back from files.",
         e.tiers.ssd_hits);
  scalar(o, "parley_chat_kv_ssd_corrupt_total", "counter",
         "KV block files skipped as corrupt or truncated.", e.tiers.ssd_corrupt);
  scalar(o, "parley_chat_kv_ssd_foreign_total", "counter",
         "KV block files skipped as another model's.", e.tiers.ssd_foreign);
  scalar(o, "parley_chat_kv_ssd_stale_temps_total", "counter",
         "Half-written KV block temps of a killed server, removed at start.",
         e.tiers.ssd_stale_temps);
  histogram(o, "parley_chat_time_to_first_token_seconds",
            "From a request's arrival at the engine to its first token.", c.first_token);
  histogram(o, "parley_chat_inter_token_seconds", "Gaps between a choice's successive tokens.",
            c.inter_token);
  return o.str();
}

std::string Metrics::render(const ServiceStats& s) const {
  std::ostringstream o;
  o.precision(10);
  {
    std::lock_guard lock(mu_);
    header(o, "parley_requests_total", "counter", "HTTP requests answered, by route and status.");
    for (const auto& [key, n] : requests_)
      o << "parley_requests_total{route=\"" << key.first << "\",status=\"" << key.second << "\"} "
        << n << "\n";
    header(o, "parley_errors_total", "counter", "Failed requests, by error kind.");
    for (const auto& [kind, n] : errors_)
      o << "parley_errors_total{kind=\"" << kind << "\"} " << n << "\n";
  }
  const double rtf = s.audio_seconds > 0 ? s.compute_seconds / s.audio_seconds : 0;
  const auto runs = whisper_run_counters();
  scalar(o, "parley_audio_seconds_total", "counter", "Seconds of audio transcribed.",
         s.audio_seconds);
  scalar(o, "parley_compute_seconds_total", "counter",
         "Wall seconds the engine spent transcribing.", s.compute_seconds);
  scalar(o, "parley_real_time_factor", "gauge",
         "Compute seconds per audio second, over all requests so far (lower is faster).", rtf);
  scalar(o, "parley_queue_depth", "gauge", "Requests waiting for a slot in the batch.", s.queued);
  scalar(o, "parley_requests_running", "gauge", "Requests being transcribed.", s.running);
  scalar(o, "parley_model_loaded", "gauge", "Whether the Whisper model is in memory.",
         s.model_loaded ? 1 : 0);
  scalar(o, "parley_vad_skipped_total", "counter",
         "Requests the VAD gate answered without Whisper.", s.vad_skipped);
  scalar(o, "parley_whisper_background_yielded_total", "counter",
         "Interim (background) jobs cancelled to free a batch slot for a waiting request.",
         s.background_yielded);
  scalar(o, "parley_whisper_encoder_runs_total", "counter", "Whisper encoder passes.",
         runs.encoder_runs);
  scalar(o, "parley_whisper_decoder_runs_total", "counter", "Whisper decoder passes.",
         runs.decoder_runs);
  scalar(o, "parley_whisper_windows_total", "counter",
         "30 s windows decoded in the engine's batch.", s.windows);
  scalar(o, "parley_whisper_fitted_windows_total", "counter",
         "Windows encoded over a context fitted to their audio (--live-audio-ctx fit).",
         s.fitted_windows);
  scalar(o, "parley_whisper_batch_encodes_total", "counter",
         "Encoder calls of the engine's batch (windows of several requests share one).",
         s.encoder_batches);
  scalar(o, "parley_whisper_batch_steps_total", "counter",
         "Decoder steps of the engine's batch (one token for every window in it).",
         s.decoder_steps);
  scalar(o, "parley_whisper_encode_seconds_total", "counter",
         "Engine wall seconds in the batch's encoder calls.", s.encode_seconds);
  scalar(o, "parley_whisper_decode_seconds_total", "counter",
         "Engine wall seconds in the batch's prefills and decoder steps.", s.decode_seconds);
  scalar(o, "parley_whisper_fallback_seconds_total", "counter",
         "Engine wall seconds re-decoding windows alone (temperature fallback).",
         s.fallback_seconds);
  scalar(o, "parley_whisper_start_seconds_total", "counter",
         "Engine wall seconds taking requests in (audio decoding, VAD gate, log-mel).",
         s.start_seconds);
  histogram(o, "parley_realtime_commit_to_completed_seconds",
            "Realtime turns: from input_audio_buffer.committed to its transcription's "
            ".completed, as the server sent them.",
            s.live_turn);
  scalar(o, "process_resident_memory_bytes", "gauge", "Resident memory of the server process.",
         resident_memory_bytes());
  return o.str();
}

}  // namespace parley::server
