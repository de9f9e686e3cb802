// KvPool and KvTiers on the CPU with fake requests and exact block ids (STYLE.md habit 8).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "serving/kv_hash.h"
#include "serving/kv_pool.h"
#include "serving/kv_tiers.h"
#include "serving/serving_test_util.h"

namespace parley {
namespace {

constexpr int64_t kB = KvCache::kBlockSize;

using test::seq;

std::vector<int32_t> table(const KvPool& pool, KvRequestId id) {
  auto t = pool.block_table(id);
  return {t.begin(), t.end()};
}

// Block b's bytes, and a fill of recognizable values.
std::vector<uint8_t> bytes_of(KvCache& cache, int32_t b) {
  std::vector<uint8_t> out(cache.block_bytes());
  cache.read_block(b, out);
  return out;
}
std::vector<uint8_t> pattern(const KvCache& cache, uint8_t seed) {
  std::vector<uint8_t> p(cache.block_bytes());
  for (size_t i = 0; i < p.size(); ++i) p[i] = uint8_t(seed + i * 7);
  return p;
}

using V = std::vector<int32_t>;

TEST(KvHash, SipHash128ReferenceVector) {
  // siphash.c's vectors_sip128[0]: key 00..0f, empty message.
  uint64_t k0 = 0, k1 = 0;
  for (int i = 0; i < 8; ++i) {
    k0 |= uint64_t(i) << (8 * i);
    k1 |= uint64_t(8 + i) << (8 * i);
  }
  const BlockHash h = siphash128(k0, k1, {});
  EXPECT_EQ(h.lo, 0xe6a825ba047f81a3ull);
  EXPECT_EQ(h.hi, 0x930255c71472f66dull);
}

TEST(KvHash, ChainedOverParentAndNamespace) {
  const V t = seq(kB, 100);
  const BlockHash root = namespace_hash(""), salted = namespace_hash("salt");
  EXPECT_NE(root, salted);
  EXPECT_EQ(block_hash(root, t), block_hash(root, t));
  EXPECT_NE(block_hash(root, t), block_hash(salted, t));
  EXPECT_NE(block_hash(block_hash(root, seq(kB, 0)), t),
            block_hash(block_hash(root, seq(kB, 1)), t));
}

TEST(KvPool, AllocatesExactBlocksAndFailsWholly) {
  KvCache cache(test::tiny_kv_config(), 8);
  KvPool pool(cache);
  EXPECT_EQ(pool.lookup_prefix(1, seq(40, 0)), 0);
  ASSERT_TRUE(pool.allocate(1, 40));
  EXPECT_EQ(table(pool, 1), (V{0, 1, 2}));
  EXPECT_EQ(pool.lookup_prefix(2, seq(20, 1000)), 0);
  ASSERT_TRUE(pool.allocate(2, 20));
  EXPECT_EQ(table(pool, 2), (V{3, 4}));
  // 60 tokens need 4 blocks; 3 are left: nothing taken.
  EXPECT_EQ(pool.lookup_prefix(3, seq(60, 2000)), 0);
  EXPECT_FALSE(pool.allocate(3, 60));
  EXPECT_TRUE(table(pool, 3).empty());
  EXPECT_EQ(pool.free_blocks(), 3);
  EXPECT_TRUE(pool.allocate(3, 48));
  EXPECT_EQ(table(pool, 3), (V{5, 6, 7}));
  pool.commit(1, 40);                  // allocate counts from the computed tokens
  EXPECT_FALSE(pool.allocate(1, 10));  // 40 + 10 crosses into a fourth block
  EXPECT_TRUE(pool.allocate(1, 8));    // 48 fits the three it has
  EXPECT_EQ(pool.stats().blocks_used, 8);
  pool.free(2);
  EXPECT_EQ(pool.free_blocks(), 2);
  EXPECT_EQ(pool.stats().blocks_cached, 2);  // request 1's two full blocks
}

TEST(KvPool, SharesCachedPrefixBlocksWithRefcounts) {
  KvCache cache(test::tiny_kv_config(), 8);
  KvPool pool(cache);
  V a = seq(50, 0);
  pool.lookup_prefix(1, a);
  ASSERT_TRUE(pool.allocate(1, 50));
  pool.commit(1, 50);
  EXPECT_EQ(table(pool, 1), (V{0, 1, 2, 3}));
  EXPECT_EQ(pool.stats().blocks_cached, 3);  // the partial block 3 is not
  EXPECT_TRUE(pool.is_cached(2));
  EXPECT_FALSE(pool.is_cached(3));

  V b(a.begin(), a.begin() + 48);
  b.push_back(7);
  b.push_back(8);
  b.push_back(9);
  EXPECT_EQ(pool.lookup_prefix(2, b), 48);
  EXPECT_EQ(pool.num_computed(2), 48);
  EXPECT_EQ(table(pool, 2), (V{0, 1, 2}));
  EXPECT_EQ(pool.ref_count(0), 2);
  ASSERT_TRUE(pool.allocate(2, 3));
  EXPECT_EQ(table(pool, 2), (V{0, 1, 2, 4}));
  const KvPoolStats s = pool.stats();
  EXPECT_EQ(s.query_tokens, 50 + 51);
  EXPECT_EQ(s.hit_tokens, 48);

  // A prompt of exactly the three cached blocks keeps its last block to compute.
  EXPECT_EQ(pool.lookup_prefix(3, V(a.begin(), a.begin() + 48)), 32);
  EXPECT_EQ(table(pool, 3), (V{0, 1}));
  EXPECT_EQ(pool.ref_count(0), 3);
  pool.free(1);
  pool.free(2);
  pool.free(3);
  EXPECT_EQ(pool.stats().blocks_used, 0);
  EXPECT_EQ(pool.stats().blocks_cached, 3);
  EXPECT_EQ(pool.free_blocks(), 8);
}

TEST(KvPool, EvictsLeastRecentlyFreedTailFirst) {
  KvCache cache(test::tiny_kv_config(), 4);
  KvPool pool(cache);
  V a = seq(33, 0);
  pool.lookup_prefix(1, a);
  ASSERT_TRUE(pool.allocate(1, 33));
  pool.commit(1, 33);
  EXPECT_EQ(table(pool, 1), (V{0, 1, 2}));
  pool.free(1);  // 2 goes to the free stack; 1 then 0 join the LRU queue
  EXPECT_EQ(pool.stats().blocks_cached, 2);

  pool.lookup_prefix(2, seq(33, 500));
  ASSERT_TRUE(pool.allocate(2, 33));  // free 2 and 3 first, then evicts 1 (the tail)
  EXPECT_EQ(table(pool, 2), (V{2, 3, 1}));
  EXPECT_EQ(pool.stats().evictions, 1);
  EXPECT_TRUE(pool.is_cached(0));
  EXPECT_FALSE(pool.is_cached(1));
  // The head block still serves a lookup, and a hit leaves the LRU queue.
  EXPECT_EQ(pool.lookup_prefix(3, a), 16);
  EXPECT_EQ(table(pool, 3), (V{0}));
  EXPECT_EQ(pool.free_blocks(), 0);
  EXPECT_FALSE(pool.allocate(3, 17));
  pool.free(2);
  EXPECT_TRUE(pool.allocate(3, 17));
  EXPECT_EQ(table(pool, 3), (V{0, 2, 3}));  // free stack: 2's blocks pushed in reverse
}

TEST(KvPool, HitsRespectParentsAndNamespaces) {
  KvCache cache(test::tiny_kv_config(), 16);
  KvPool pool(cache);
  V a = seq(40, 0);
  pool.lookup_prefix(1, a);
  ASSERT_TRUE(pool.allocate(1, 40));
  pool.commit(1, 40);
  // The same second block after another first block: no hit at all.
  V b = a;
  b[0] = 999;
  EXPECT_EQ(pool.lookup_prefix(2, b), 0);
  // The same tokens in another namespace (cache_salt, adapter): no hit.
  EXPECT_EQ(pool.lookup_prefix(3, a, "salt"), 0);
  ASSERT_TRUE(pool.allocate(3, 40));
  pool.commit(3, 40);
  EXPECT_EQ(pool.stats().blocks_cached, 4);
  EXPECT_EQ(pool.lookup_prefix(4, a, "salt"), 32);
  const V salted = table(pool, 3);
  EXPECT_EQ(table(pool, 4), V(salted.begin(), salted.begin() + 2));
  EXPECT_EQ(pool.lookup_prefix(5, a), 32);
  EXPECT_EQ(table(pool, 5), (V{0, 1}));
}

TEST(KvPool, PublishesGeneratedTokens) {
  KvCache cache(test::tiny_kv_config(), 8);
  KvPool pool(cache);
  V prompt = seq(20, 0), answer = seq(20, 300);
  pool.lookup_prefix(1, prompt);
  ASSERT_TRUE(pool.allocate(1, 20));
  pool.commit(1, 20);
  EXPECT_EQ(pool.stats().blocks_cached, 1);
  for (int32_t t : answer) {  // decode: each token appended, allocated, computed
    pool.append_tokens(1, std::span(&t, 1));
    ASSERT_TRUE(pool.allocate(1, 1));
    pool.commit(1, pool.num_computed(1) + 1);
  }
  EXPECT_EQ(pool.stats().blocks_cached, 2);  // 40 tokens: two full blocks
  pool.free(1);
  V follow = prompt;
  follow.insert(follow.end(), answer.begin(), answer.end());
  follow.push_back(5);
  EXPECT_EQ(pool.lookup_prefix(2, follow), 32);
}

TEST(KvPool, CopiesOnWriteAtDivergence) {
  KvCache cache(test::tiny_kv_config(), 4);
  KvPool pool(cache);
  pool.lookup_prefix(1, seq(20, 0));
  ASSERT_TRUE(pool.allocate(1, 20));
  cache.write_block(1, pattern(cache, 3));
  pool.commit(1, 20);
  pool.fork(1, 2);
  EXPECT_EQ(table(pool, 2), (V{0, 1}));
  EXPECT_EQ(pool.ref_count(1), 2);
  const int32_t t = 42;
  pool.append_tokens(2, std::span(&t, 1));
  ASSERT_TRUE(pool.allocate(2, 1));  // writes position 20, in the shared block 1
  EXPECT_EQ(table(pool, 2), (V{0, 2}));
  EXPECT_EQ(bytes_of(cache, 2), pattern(cache, 3));
  EXPECT_EQ(pool.ref_count(1), 1);
  EXPECT_EQ(pool.ref_count(0), 2);  // the full prompt block stays shared
  pool.append_tokens(1, std::span(&t, 1));
  ASSERT_TRUE(pool.allocate(1, 1));  // no longer shared: written in place
  EXPECT_EQ(table(pool, 1), (V{0, 1}));
  EXPECT_EQ(pool.stats().cow_copies, 1);
  // A copy that does not fit fails whole.
  pool.fork(1, 3);
  pool.fork(1, 4);
  EXPECT_EQ(pool.free_blocks(), 1);
  pool.append_tokens(3, std::span(&t, 1));
  ASSERT_TRUE(pool.allocate(3, 1));
  pool.commit(3, 21);
  EXPECT_EQ(pool.free_blocks(), 0);
  pool.append_tokens(4, std::span(&t, 1));
  EXPECT_FALSE(pool.allocate(4, 1));
  EXPECT_EQ(table(pool, 4), (V{0, 1}));
  EXPECT_EQ(pool.ref_count(1), 2);
}

BlockHash fingerprint(uint64_t x) { return {x, ~x}; }

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag)
      : path(std::filesystem::temp_directory_path() /
             ("parley_kv_" + tag + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

TEST(KvTiers, RamTierRestoresAnEvictedBlock) {
  KvCache cache(test::tiny_kv_config(), 2);
  KvTiers tiers({.ram_bytes = 4 * cache.block_bytes(), .dir = {}, .fingerprint = fingerprint(1)},
                cache.block_bytes());
  KvPool pool(cache, &tiers);
  const V a = seq(17, 0);
  pool.lookup_prefix(1, a);
  ASSERT_TRUE(pool.allocate(1, 17));
  cache.write_block(0, pattern(cache, 9));
  pool.commit(1, 17);
  pool.free(1);
  pool.lookup_prefix(2, seq(20, 700));
  ASSERT_TRUE(pool.allocate(2, 20));  // takes 1, then evicts 0 into the RAM tier
  EXPECT_EQ(pool.stats().evictions, 1);
  EXPECT_EQ(tiers.stats().ram_blocks, 1);
  cache.write_block(0, pattern(cache, 77));  // request 2 overwrites the device block
  pool.free(2);
  EXPECT_EQ(pool.lookup_prefix(3, a), 16);
  const int32_t b = table(pool, 3)[0];
  EXPECT_EQ(bytes_of(cache, b), pattern(cache, 9));
  EXPECT_EQ(pool.stats().tier_hit_blocks, 1);
  EXPECT_EQ(tiers.stats().ram_hits, 1);
}

TEST(KvTiers, SsdTierSurvivesARestartAndSkipsBadFiles) {
  TempDir dir("ssd");
  const V a = seq(40, 0);
  {
    KvCache cache(test::tiny_kv_config(), 4);
    KvTiers tiers({.ram_bytes = 0, .dir = dir.path.string(), .fingerprint = fingerprint(5)},
                  cache.block_bytes());
    KvPool pool(cache, &tiers);
    pool.lookup_prefix(1, a);
    ASSERT_TRUE(pool.allocate(1, 40));
    cache.write_block(0, pattern(cache, 1));
    cache.write_block(1, pattern(cache, 2));
    pool.commit(1, 40);
    pool.free(1);
    pool.persist();
    EXPECT_EQ(tiers.stats().ssd_writes, 2);
  }
  // A new process: the index comes from the folder.
  {
    KvCache cache(test::tiny_kv_config(), 4);
    KvTiers tiers({.ram_bytes = 0, .dir = dir.path.string(), .fingerprint = fingerprint(5)},
                  cache.block_bytes());
    EXPECT_EQ(tiers.stats().ssd_blocks, 2);
    KvPool pool(cache, &tiers);
    EXPECT_EQ(pool.lookup_prefix(1, a), 32);
    EXPECT_EQ(bytes_of(cache, table(pool, 1)[0]), pattern(cache, 1));
    EXPECT_EQ(bytes_of(cache, table(pool, 1)[1]), pattern(cache, 2));
    EXPECT_EQ(tiers.stats().ssd_hits, 2);
  }
  // Another model's fingerprint: both files foreign, nothing served.
  {
    KvCache cache(test::tiny_kv_config(), 4);
    KvTiers tiers({.ram_bytes = 0, .dir = dir.path.string(), .fingerprint = fingerprint(6)},
                  cache.block_bytes());
    EXPECT_EQ(tiers.stats().ssd_foreign, 2);
    EXPECT_EQ(tiers.stats().ssd_blocks, 0);
    KvPool pool(cache, &tiers);
    EXPECT_EQ(pool.lookup_prefix(1, a), 0);
  }
  // One file flipped in its payload (found on read), one truncated, one junk (found at
  // the scan): counted, skipped, never thrown.
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 2u);
  const BlockHash first = block_hash(namespace_hash(""), V(a.begin(), a.begin() + kB));
  const auto first_file = dir.path / (first.hex() + ".kvb");
  const auto second_file = files[0] == first_file ? files[1] : files[0];
  {
    std::fstream f(first_file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x5a');
  }
  std::filesystem::resize_file(second_file, std::filesystem::file_size(second_file) - 3);
  std::ofstream(dir.path / "junk.kvb") << "not a block";
  {
    KvCache cache(test::tiny_kv_config(), 4);
    KvTiers tiers({.ram_bytes = 0, .dir = dir.path.string(), .fingerprint = fingerprint(5)},
                  cache.block_bytes());
    EXPECT_EQ(tiers.stats().ssd_corrupt, 2);  // truncated + junk
    EXPECT_EQ(tiers.stats().ssd_blocks, 1);
    KvPool pool(cache, &tiers);
    EXPECT_EQ(pool.lookup_prefix(1, a), 0);  // the flipped first block fails its checksum
    EXPECT_EQ(tiers.stats().ssd_corrupt, 3);
    EXPECT_EQ(tiers.stats().ssd_blocks, 0);
  }
}

}  // namespace
}  // namespace parley
