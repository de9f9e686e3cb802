// Counters of system allocations made by the engine (host and device). Tests assert
// that a hot loop run from a warm Pool leaves them unchanged.
#pragma once

#include <cstddef>
#include <cstdint>

namespace parley {

struct AllocStats {
  int64_t host_allocs = 0;
  int64_t device_allocs = 0;
  int64_t host_bytes_live = 0;
  int64_t device_bytes_live = 0;
};

AllocStats alloc_stats();

// The engine's only system allocation entry points; both update the counters.
void* system_alloc(size_t bytes, bool device);
void system_free(void* ptr, size_t bytes, bool device);

}  // namespace parley
