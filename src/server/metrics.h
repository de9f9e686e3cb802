// Server counters and their Prometheus text exposition (GET /metrics): requests by route
// and status, errors by kind, audio seconds, compute seconds and the real-time factor,
// queue depth, running requests, model residency and the process's resident memory.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "serving/chat_service.h"
#include "serving/whisper_service.h"

namespace parley::server {

class Metrics {
 public:
  void count_request(const std::string& route, int status);
  // kind: an ErrorKind name, or an edge refusal: unauthorized, queue_full, body_too_large,
  // bad_request, not_found, cancelled.
  void count_error(const std::string& kind);
  std::string render(const ServiceStats& service) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, uint64_t> errors_;
};

// The chat engine's families (parley_chat_*): requests and tokens, the scheduler's queue,
// running requests, iterations and preemptions, the KV pool's blocks and prefix-cache hits,
// and the time-to-first-token and inter-token histograms.
std::string render_chat_metrics(const ChatStats& chat);

// VmRSS of this process in bytes (/proc/self/status), 0 when unknown.
uint64_t resident_memory_bytes();

}  // namespace parley::server
