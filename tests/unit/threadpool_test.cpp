// ThreadPool::parallel_for: every index exactly once for many sizes and grains, chunks of at
// least `grain`, exceptions reach the caller, nested calls run inline, several threads
// may call one pool at once.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "engine/threadpool.h"

namespace parley {
namespace {

// Counts how often each index of [0, n) is visited.
void expect_each_index_once(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::atomic<int64_t> bad_chunks{0};
  pool.parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    // Every chunk but the last holds at least `grain` items.
    if (begin >= end || (end < n && end - begin < grain)) bad_chunks++;
    for (int64_t i = begin; i < end; ++i) hits[size_t(i)]++;
  });
  EXPECT_EQ(bad_chunks.load(), 0) << "n " << n << " grain " << grain;
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(hits[size_t(i)].load(), 1) << "index " << i << " of n " << n << " grain " << grain;
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 3, 7, 31, 64, 100, 1000, 4097, 100003})
      for (int64_t grain : {0, 1, 3, 16, 1000, 200000}) expect_each_index_once(pool, n, grain);
  }
}

TEST(ThreadPool, UsesSeveralThreads) {
  ThreadPool pool(4);
  std::mutex mu;
  std::set<std::thread::id> ids;
  // Chunks that wait for one another cannot all run on one thread in time; the loop
  // just needs enough work to wake the workers.
  pool.parallel_for(64, 1, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::lock_guard lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_GT(ids.size(), 1u);
}

TEST(ThreadPool, ExceptionReachesCaller) {
  ThreadPool pool(4);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.parallel_for(1000, 1,
                                 [&](int64_t begin, int64_t) {
                                   ran++;
                                   if (begin >= 500) throw std::runtime_error("chunk failed");
                                 }),
               std::runtime_error);
  EXPECT_GT(ran.load(), 0);
  // The pool still works afterwards.
  expect_each_index_once(pool, 1000, 1);
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadPool pool(4);
  std::atomic<int> outer_chunks{0}, bad{0};
  std::vector<std::atomic<int>> hits(100 * 50);
  pool.parallel_for(100, 1, [&](int64_t begin, int64_t end) {
    outer_chunks++;
    for (int64_t i = begin; i < end; ++i) {
      const std::thread::id me = std::this_thread::get_id();
      int inner_calls = 0;
      pool.parallel_for(50, 1, [&](int64_t b, int64_t e) {
        inner_calls++;
        if (std::this_thread::get_id() != me || b != 0 || e != 50) bad++;
        for (int64_t j = b; j < e; ++j) hits[size_t(i * 50 + j)]++;
      });
      if (inner_calls != 1) bad++;
    }
  });
  EXPECT_GT(outer_chunks.load(), 1);
  EXPECT_EQ(bad.load(), 0);
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPool, ConcurrentCallers) {
  ThreadPool pool(3);
  constexpr int kCallers = 6, kRounds = 40;
  constexpr int64_t kN = 3000;
  std::atomic<int> failures{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int r = 0; r < kRounds; ++r) {
        std::vector<int> hits(kN, 0);  // each chunk writes its own indices
        pool.parallel_for(kN, 7 + c, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
        });
        for (int h : hits)
          if (h != 1) failures++;
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ThreadPool, GlobalPoolCanBeResized) {
  set_cpu_threads(3);
  EXPECT_EQ(cpu_threads().size(), 3);
  expect_each_index_once(cpu_threads(), 10000, 10);
  set_cpu_threads(int(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace
}  // namespace parley
