// The replaced global operator new/delete behind alloc_counter.h. Kept in its own file so
// the compiler never inlines these into callers (GCC then warns of new/free mismatches).
#include "sampling/alloc_counter.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<int64_t> g_news{0};
}  // namespace

void* operator new(size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace parley::test {

int64_t operator_new_calls() { return g_news.load(std::memory_order_relaxed); }

}  // namespace parley::test
