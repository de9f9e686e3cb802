// LatencyHistogram: a Prometheus histogram's buckets (upper bounds, in seconds) and counts,
// filled by the services and rendered by the server's /metrics (server/metrics.cpp).
#pragma once

#include <cstdint>
#include <vector>

namespace parley {

struct LatencyHistogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // per bucket, not cumulative; one more: +Inf
  double sum = 0;
  uint64_t count = 0;
  explicit LatencyHistogram(std::vector<double> upper_bounds = {})
      : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}
  void add(double seconds);
};

}  // namespace parley
