#include "serving/latency_histogram.h"

#include <algorithm>

namespace parley {

void LatencyHistogram::add(double seconds) {
  const auto it = std::lower_bound(bounds.begin(), bounds.end(), seconds);
  ++counts[size_t(it - bounds.begin())];
  sum += seconds;
  ++count;
}

}  // namespace parley
