// Pool: blocks come back to the pool and are reused without system allocations, trim
// returns them, size classes cover every request, and tensors outliving their pool free
// their memory to the system.
#include <gtest/gtest.h>

#include <vector>

#include "engine/alloc_stats.h"
#include "engine/pool.h"

namespace parley {
namespace {

// The shapes of one decoder-step-like iteration: several sizes, some repeated.
void one_iteration(Pool& pool) {
  std::vector<Tensor> live;
  live.push_back(pool.alloc({4, 384}, DType::f32));
  live.push_back(pool.alloc({4, 1536}, DType::bf16));
  live.push_back(pool.alloc({4, 384}, DType::f32));
  live.push_back(pool.alloc({1, 51865}, DType::f32));
  live.push_back(pool.alloc({3}, DType::i32));
  live.push_back(pool.alloc({1 << 20}, DType::f32));  // above the small-size limit
  for (Tensor& t : live) ASSERT_NE(t.raw(), nullptr);
  live[0].data<float>()[0] = 1.0f;  // the memory is usable
  live.pop_back();                  // drop some early, the rest at the end
}

TEST(Pool, WarmLoopMakesNoSystemAllocations) {
  Pool pool(Device::cpu);
  one_iteration(pool);  // warm-up
  const AllocStats before = alloc_stats();
  for (int i = 0; i < 50; ++i) one_iteration(pool);
  const AllocStats after = alloc_stats();
  EXPECT_EQ(after.host_allocs, before.host_allocs);
  EXPECT_EQ(after.host_bytes_live, before.host_bytes_live);
  EXPECT_EQ(pool.cached_blocks(), 6u);
}

TEST(Pool, ColdPoolAllocates) {
  // The counter the warm test relies on does move when the pool is cold.
  Pool pool(Device::cpu);
  const int64_t before = alloc_stats().host_allocs;
  one_iteration(pool);
  EXPECT_EQ(alloc_stats().host_allocs, before + 6);
}

TEST(Pool, ReusesTheSameBlock) {
  Pool pool(Device::cpu);
  void* first;
  {
    Tensor t = pool.alloc({100}, DType::f32);
    first = t.raw();
  }
  EXPECT_EQ(pool.cached_blocks(), 1u);
  Tensor again = pool.alloc({90}, DType::f32);  // same size class
  EXPECT_EQ(again.raw(), first);
  EXPECT_EQ(pool.cached_blocks(), 0u);
}

TEST(Pool, TrimFreesCachedBlocks) {
  Pool pool(Device::cpu);
  const int64_t live_before = alloc_stats().host_bytes_live;
  { one_iteration(pool); }
  EXPECT_GT(pool.cached_bytes(), 0u);
  EXPECT_EQ(alloc_stats().host_bytes_live, live_before + int64_t(pool.cached_bytes()));
  pool.trim();
  EXPECT_EQ(pool.cached_blocks(), 0u);
  EXPECT_EQ(pool.cached_bytes(), 0u);
  EXPECT_EQ(alloc_stats().host_bytes_live, live_before);
}

TEST(Pool, TensorOutlivingPoolFreesToSystem) {
  const int64_t live_before = alloc_stats().host_bytes_live;
  Tensor survivor;
  {
    Pool pool(Device::cpu);
    survivor = pool.alloc({1000}, DType::f32);
    Tensor cached = pool.alloc({10}, DType::f32);
  }  // the pool and its cached block are gone
  EXPECT_GT(alloc_stats().host_bytes_live, live_before);
  survivor.data<float>()[999] = 3.0f;
  survivor = Tensor();
  EXPECT_EQ(alloc_stats().host_bytes_live, live_before);
}

TEST(Pool, SizeClasses) {
  EXPECT_EQ(Pool::size_class(0), 256u);
  EXPECT_EQ(Pool::size_class(1), 256u);
  EXPECT_EQ(Pool::size_class(256), 256u);
  EXPECT_EQ(Pool::size_class(257), 512u);
  EXPECT_EQ(Pool::size_class(size_t(1) << 20), size_t(1) << 20);
  for (size_t bytes = 1; bytes < (size_t(1) << 34); bytes = bytes * 3 / 2 + 7) {
    const size_t cls = Pool::size_class(bytes);
    ASSERT_GE(cls, bytes);
    ASSERT_LE(cls, bytes + bytes / 4 + 256) << bytes;  // at most 25% (or one granule) waste
    ASSERT_EQ(Pool::size_class(cls), cls) << bytes;    // a class maps to itself
  }
}

}  // namespace
}  // namespace parley
