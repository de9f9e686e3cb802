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

std::string Metrics::render(const ServiceStats& s) const {
  std::ostringstream o;
  o.precision(10);
  {
    std::lock_guard lock(mu_);
    o << "# HELP parley_requests_total HTTP requests answered, by route and status.\n"
         "# TYPE parley_requests_total counter\n";
    for (const auto& [key, n] : requests_)
      o << "parley_requests_total{route=\"" << key.first << "\",status=\"" << key.second << "\"} "
        << n << "\n";
    o << "# HELP parley_errors_total Failed requests, by error kind.\n"
         "# TYPE parley_errors_total counter\n";
    for (const auto& [kind, n] : errors_)
      o << "parley_errors_total{kind=\"" << kind << "\"} " << n << "\n";
  }
  const double rtf = s.audio_seconds > 0 ? s.compute_seconds / s.audio_seconds : 0;
  o << "# HELP parley_audio_seconds_total Seconds of audio transcribed.\n"
       "# TYPE parley_audio_seconds_total counter\n"
    << "parley_audio_seconds_total " << s.audio_seconds << "\n"
    << "# HELP parley_compute_seconds_total Wall seconds workers spent transcribing.\n"
       "# TYPE parley_compute_seconds_total counter\n"
    << "parley_compute_seconds_total " << s.compute_seconds << "\n"
    << "# HELP parley_real_time_factor Compute seconds per audio second, over all requests so "
       "far (lower is faster).\n"
       "# TYPE parley_real_time_factor gauge\n"
    << "parley_real_time_factor " << rtf << "\n"
    << "# HELP parley_queue_depth Requests waiting for a worker.\n"
       "# TYPE parley_queue_depth gauge\n"
    << "parley_queue_depth " << s.queued << "\n"
    << "# HELP parley_requests_running Requests being transcribed.\n"
       "# TYPE parley_requests_running gauge\n"
    << "parley_requests_running " << s.running << "\n"
    << "# HELP parley_model_loaded Whether the Whisper model is in memory.\n"
       "# TYPE parley_model_loaded gauge\n"
    << "parley_model_loaded " << (s.model_loaded ? 1 : 0) << "\n"
    << "# HELP parley_vad_skipped_total Requests the VAD gate answered without Whisper.\n"
       "# TYPE parley_vad_skipped_total counter\n"
    << "parley_vad_skipped_total " << s.vad_skipped << "\n"
    << "# HELP parley_whisper_encoder_runs_total Whisper encoder passes.\n"
       "# TYPE parley_whisper_encoder_runs_total counter\n"
    << "parley_whisper_encoder_runs_total " << whisper_run_counters().encoder_runs << "\n"
    << "# HELP parley_whisper_decoder_runs_total Whisper decoder passes.\n"
       "# TYPE parley_whisper_decoder_runs_total counter\n"
    << "parley_whisper_decoder_runs_total " << whisper_run_counters().decoder_runs << "\n"
    << "# HELP process_resident_memory_bytes Resident memory of the server process.\n"
       "# TYPE process_resident_memory_bytes gauge\n"
    << "process_resident_memory_bytes " << resident_memory_bytes() << "\n";
  return o.str();
}

}  // namespace parley::server
