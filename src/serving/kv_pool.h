// KvPool: the chat engine's KV block manager and prefix cache (DESIGN.md section 8; vLLM v1's
// KVCacheManager + BlockPool + FreeKVCacheBlockQueue). It hands out the blocks of one
// KvCache (kBlockSize = 16 tokens each) to requests, counts references so requests share
// blocks, and keeps every full block it has computed under its chained hash
// (serving/kv_hash.h) after its requests are gone, until the space is needed.
//
// A request: lookup_prefix (opens it with its prompt: the longest chain of cached full
// blocks goes into its block table), then per step append_tokens for tokens it learns,
// allocate(request, n_new_tokens) before the forward that computes them, commit(request,
// n_computed) after it (publishes newly full blocks), and free at the end. fork copies a
// request's table for another (the n choices of one prompt): shared blocks are written by
// neither; allocate gives a request that must write into a shared block a private copy
// first (copy-on-write, KvCache::copy_block).
//
// allocate is the one call where a scheduler meets the pool (STYLE.md habit 8): it returns
// false and takes nothing when the blocks (free ones, then cached ones nobody references)
// do not cover the request's need, so the scheduler can preempt.
//
// Free blocks: never-hashed blocks go to a free stack (reused first, last freed first);
// cached blocks whose last reference went join an LRU queue (a request's blocks in
// reverse, so a prefix's head outlives its tail, as in vLLM) and are evicted from its front
// when the free stack is empty: the block loses its hash (and goes to the KvTiers, when
// given, so a later lookup can restore it). A cached block that a lookup hits leaves the
// queue. Not thread-safe: one engine thread owns it.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "llm/kv_cache.h"
#include "serving/kv_hash.h"
#include "serving/kv_tiers.h"

namespace parley {

using KvRequestId = uint64_t;

struct KvPoolStats {
  int64_t blocks_total = 0;
  int64_t blocks_used = 0;      // referenced by a request
  int64_t blocks_cached = 0;    // on the device under a hash (used or evictable)
  int64_t blocks_free = 0;      // allocatable now: free and evictable
  int64_t query_tokens = 0;     // prompt tokens looked up
  int64_t hit_tokens = 0;       // of which served from the cache (device or tiers)
  int64_t tier_hit_blocks = 0;  // blocks restored from the RAM or SSD tier
  int64_t evictions = 0;        // cached blocks that lost their hash for reuse
  int64_t cow_copies = 0;       // private copies of shared blocks
};

class KvPool {
 public:
  // tiers (optional) outlives the pool.
  explicit KvPool(KvCache& cache, KvTiers* tiers = nullptr);

  // Opens request `id` with its prompt in namespace `ns` (adapter, media identity,
  // cache_salt; "" the default): the longest chain of cached full blocks, capped so at
  // least one prompt token is left to compute, joins its table (device blocks referenced,
  // tier blocks restored into free ones). Returns the tokens served, its num_computed.
  int64_t lookup_prefix(KvRequestId id, std::span<const int32_t> tokens, std::string_view ns = {});
  // Blocks for the request's next n_new_tokens positions (after num_computed), with a private
  // copy of any shared block among them. False, with nothing taken, when the pool cannot.
  bool allocate(KvRequestId id, int64_t n_new_tokens);
  // Tokens after the prompt (sampled ones), in order, before the forward that computes them.
  void append_tokens(KvRequestId id, std::span<const int32_t> tokens);
  // The request's first n_computed tokens now have their KV in its blocks: full blocks among
  // them are published under their hash (a block whose hash is already cached stays private).
  void commit(KvRequestId id, int64_t n_computed);
  // Speculative positions that were not accepted: the blocks past those the request's
  // computed tokens occupy go back to the free list (no copy: the block of the last computed
  // token keeps stale keys past it, overwritten by the next write).
  void rollback(KvRequestId id);
  // Opens dst as a copy of src: its tokens, computed count and blocks (referenced, shared).
  void fork(KvRequestId src, KvRequestId dst);
  // Drops the request's references; its cached blocks stay until evicted.
  void free(KvRequestId id);
  // Every cached device block onto the SSD tier (a shutdown; no-op without one).
  void persist();

  bool has_request(KvRequestId id) const { return requests_.count(id) > 0; }
  std::span<const int32_t> block_table(KvRequestId id) const;
  int64_t num_computed(KvRequestId id) const;
  int64_t free_blocks() const { return int64_t(free_.size() + lru_.size()); }
  int ref_count(int32_t block) const { return blocks_[size_t(block)].ref; }
  bool is_cached(int32_t block) const { return blocks_[size_t(block)].hashed; }
  KvPoolStats stats() const;
  KvCache& cache() { return cache_; }

 private:
  struct Block {
    int ref = 0;
    bool hashed = false;
    bool in_lru = false;
    BlockHash hash, parent;
    std::vector<int32_t> tokens;
    std::list<int32_t>::iterator lru;
  };
  struct Request {
    BlockHash root;
    std::vector<int32_t> tokens;
    std::vector<int32_t> table;
    std::vector<BlockHash> hashes;  // of its first full blocks, in order
    int64_t computed = 0;
    int64_t published = 0;  // full blocks commit has seen
  };

  Request& request(KvRequestId id);
  const Request& request(KvRequestId id) const;
  BlockHash hash_of(Request& r, int64_t block);
  int32_t take_block();  // -1 when none is left
  void ref(int32_t b);
  void unref(int32_t b);
  KvBlockRecord record_of(int32_t b) const;

  KvCache& cache_;
  KvTiers* tiers_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;  // never-hashed free blocks, the next at the back
  std::list<int32_t> lru_;     // cached, unreferenced: the next evicted at the front
  std::unordered_map<BlockHash, int32_t, BlockHashHasher> cached_;
  std::unordered_map<KvRequestId, Request> requests_;
  int64_t used_ = 0;
  KvPoolStats stats_;
};

}  // namespace parley
