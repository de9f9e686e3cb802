#include "engine/alloc_stats.h"

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>

#include "engine/device.h"
#include "engine/error.h"

namespace parley {

namespace {
std::atomic<int64_t> g_host_allocs{0}, g_device_allocs{0}, g_host_live{0}, g_device_live{0};
constexpr size_t kHostAlign = 64;
}  // namespace

AllocStats alloc_stats() {
  return {g_host_allocs.load(), g_device_allocs.load(), g_host_live.load(), g_device_live.load()};
}

void* system_alloc(size_t bytes, bool device) {
  if (device) {
    void* p = cuda::malloc_device(bytes == 0 ? 1 : bytes);
    g_device_allocs++;
    g_device_live += int64_t(bytes);
    return p;
  }
  const size_t rounded = (bytes + kHostAlign - 1) / kHostAlign * kHostAlign;
  void* p = std::aligned_alloc(kHostAlign, rounded == 0 ? kHostAlign : rounded);
  check(p != nullptr, ErrorKind::resource_exhausted,
        "[memory] could not allocate " + std::to_string(bytes) + " bytes of host memory");
  g_host_allocs++;
  g_host_live += int64_t(bytes);
  return p;
}

void system_free(void* ptr, size_t bytes, bool device) {
  if (!ptr) return;
  if (device) {
    cuda::free_device(ptr);
    g_device_live -= int64_t(bytes);
  } else {
    std::free(ptr);
    g_host_live -= int64_t(bytes);
  }
}

}  // namespace parley
