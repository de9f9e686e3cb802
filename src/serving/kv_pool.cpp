#include "serving/kv_pool.h"

#include <algorithm>

#include "engine/error.h"

namespace parley {

namespace {
constexpr int64_t kB = KvCache::kBlockSize;
}

KvPool::KvPool(KvCache& cache, KvTiers* tiers)
    : cache_(cache), tiers_(tiers), blocks_(size_t(cache.n_blocks())) {
  free_.reserve(blocks_.size());
  for (int64_t b = cache.n_blocks() - 1; b >= 0; --b) free_.push_back(int32_t(b));
}

KvPool::Request& KvPool::request(KvRequestId id) {
  auto it = requests_.find(id);
  check_arg(it != requests_.end(), "[kv pool] no request " + std::to_string(id));
  return it->second;
}

const KvPool::Request& KvPool::request(KvRequestId id) const {
  auto it = requests_.find(id);
  check_arg(it != requests_.end(), "[kv pool] no request " + std::to_string(id));
  return it->second;
}

BlockHash KvPool::hash_of(Request& r, int64_t block) {
  while (int64_t(r.hashes.size()) <= block) {
    const size_t i = r.hashes.size();
    const BlockHash parent = i == 0 ? r.root : r.hashes[i - 1];
    r.hashes.push_back(block_hash(parent, std::span(r.tokens).subspan(i * size_t(kB), size_t(kB))));
  }
  return r.hashes[size_t(block)];
}

void KvPool::ref(int32_t b) {
  Block& blk = blocks_[size_t(b)];
  if (blk.in_lru) {
    lru_.erase(blk.lru);
    blk.in_lru = false;
  }
  if (blk.ref++ == 0) ++used_;
}

void KvPool::unref(int32_t b) {
  Block& blk = blocks_[size_t(b)];
  if (--blk.ref > 0) return;
  --used_;
  if (blk.hashed) {
    blk.lru = lru_.insert(lru_.end(), b);
    blk.in_lru = true;
  } else {
    free_.push_back(b);
  }
}

KvBlockRecord KvPool::record_of(int32_t b) const {
  const Block& blk = blocks_[size_t(b)];
  KvBlockRecord r{blk.hash, blk.parent, blk.tokens, std::vector<uint8_t>(cache_.block_bytes())};
  cache_.read_block(b, r.payload);
  return r;
}

int32_t KvPool::take_block() {
  int32_t b = -1;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    b = lru_.front();
    lru_.pop_front();
    Block& blk = blocks_[size_t(b)];
    blk.in_lru = false;
    if (tiers_ && tiers_->enabled()) tiers_->put(record_of(b));
    cached_.erase(blk.hash);
    blk.hashed = false;
    blk.tokens.clear();
    ++stats_.evictions;
  } else {
    return -1;
  }
  ref(b);
  return b;
}

int64_t KvPool::lookup_prefix(KvRequestId id, std::span<const int32_t> tokens,
                              std::string_view ns) {
  check_arg(!requests_.count(id), "[kv pool] request " + std::to_string(id) + " is open");
  check_arg(!tokens.empty(), "[kv pool] request " + std::to_string(id) + " has no tokens");
  Request& r = requests_[id];
  r.root = namespace_hash(ns);
  r.tokens.assign(tokens.begin(), tokens.end());
  stats_.query_tokens += int64_t(tokens.size());
  const int64_t n_full = (int64_t(tokens.size()) - 1) / kB;  // one token left to compute
  for (int64_t i = 0; i < n_full; ++i) {
    const BlockHash h = hash_of(r, i);
    const BlockHash parent = i == 0 ? r.root : r.hashes[size_t(i - 1)];
    const auto mine = std::span(r.tokens).subspan(size_t(i * kB), size_t(kB));
    const auto same = [&](const BlockHash& p, const std::vector<int32_t>& t) {
      return p == parent && std::equal(t.begin(), t.end(), mine.begin(), mine.end());
    };
    if (auto it = cached_.find(h); it != cached_.end()) {
      const Block& blk = blocks_[size_t(it->second)];
      if (!same(blk.parent, blk.tokens)) break;  // a hash collision: not our prefix
      ref(it->second);
      r.table.push_back(it->second);
      continue;
    }
    if (!tiers_ || !tiers_->enabled()) break;
    std::optional<KvBlockRecord> rec = tiers_->get(h);
    if (!rec || !same(rec->parent, rec->tokens) || rec->payload.size() != cache_.block_bytes())
      break;
    const int32_t b = take_block();
    if (b < 0) break;
    cache_.write_block(b, rec->payload);
    Block& blk = blocks_[size_t(b)];
    blk.hashed = true;
    blk.hash = h;
    blk.parent = parent;
    blk.tokens = std::move(rec->tokens);
    cached_[h] = b;
    r.table.push_back(b);
    ++stats_.tier_hit_blocks;
  }
  r.computed = int64_t(r.table.size()) * kB;
  r.published = int64_t(r.table.size());
  stats_.hit_tokens += r.computed;
  return r.computed;
}

bool KvPool::allocate(KvRequestId id, int64_t n_new_tokens) {
  Request& r = request(id);
  check_arg(n_new_tokens >= 0, "[kv pool] negative n_new_tokens");
  const int64_t end = KvCache::blocks_for(r.computed + n_new_tokens);
  const int64_t have = int64_t(r.table.size());
  std::vector<int64_t> cow;  // table slots the new tokens write that others share
  for (int64_t i = r.computed / kB; i < std::min(end, have); ++i)
    if (n_new_tokens > 0 && blocks_[size_t(r.table[size_t(i)])].ref > 1) cow.push_back(i);
  const int64_t need = std::max<int64_t>(0, end - have) + int64_t(cow.size());
  if (need > free_blocks()) return false;
  for (int64_t i : cow) {
    const int32_t src = r.table[size_t(i)];
    const int32_t dst = take_block();
    cache_.copy_block(src, dst);
    unref(src);
    r.table[size_t(i)] = dst;
    ++stats_.cow_copies;
  }
  for (int64_t i = have; i < end; ++i) r.table.push_back(take_block());
  return true;
}

void KvPool::append_tokens(KvRequestId id, std::span<const int32_t> tokens) {
  Request& r = request(id);
  r.tokens.insert(r.tokens.end(), tokens.begin(), tokens.end());
}

void KvPool::commit(KvRequestId id, int64_t n_computed) {
  Request& r = request(id);
  check_arg(n_computed >= r.computed && n_computed <= int64_t(r.tokens.size()) &&
                n_computed <= int64_t(r.table.size()) * kB,
            "[kv pool] commit of " + std::to_string(n_computed) + " tokens: request " +
                std::to_string(id) + " has " + std::to_string(r.computed) + " computed, " +
                std::to_string(r.tokens.size()) + " known, " + std::to_string(r.table.size()) +
                " blocks");
  r.computed = n_computed;
  for (; r.published < n_computed / kB; ++r.published) {
    const int64_t i = r.published;
    const int32_t b = r.table[size_t(i)];
    Block& blk = blocks_[size_t(b)];
    const BlockHash h = hash_of(r, i);
    if (blk.hashed || cached_.count(h)) continue;  // already cached (here or a twin block)
    blk.hashed = true;
    blk.hash = h;
    blk.parent = i == 0 ? r.root : r.hashes[size_t(i - 1)];
    blk.tokens.assign(r.tokens.begin() + i * kB, r.tokens.begin() + (i + 1) * kB);
    cached_[h] = b;
  }
}

void KvPool::rollback(KvRequestId id) {
  Request& r = request(id);
  const size_t keep = size_t(KvCache::blocks_for(r.computed));
  while (r.table.size() > keep) {
    unref(r.table.back());
    r.table.pop_back();
  }
}

void KvPool::fork(KvRequestId src, KvRequestId dst) {
  check_arg(!requests_.count(dst), "[kv pool] request " + std::to_string(dst) + " is open");
  Request copy = request(src);
  for (int32_t b : copy.table) ref(b);
  requests_[dst] = std::move(copy);
}

void KvPool::free(KvRequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  const std::vector<int32_t>& table = it->second.table;
  for (auto b = table.rbegin(); b != table.rend(); ++b) unref(*b);
  requests_.erase(it);
}

void KvPool::persist() {
  if (!tiers_) return;
  for (const auto& [hash, b] : cached_)
    if (!tiers_->on_disk(hash)) tiers_->persist(record_of(b));
}

std::span<const int32_t> KvPool::block_table(KvRequestId id) const { return request(id).table; }

int64_t KvPool::num_computed(KvRequestId id) const { return request(id).computed; }

KvPoolStats KvPool::stats() const {
  KvPoolStats s = stats_;
  s.blocks_total = int64_t(blocks_.size());
  s.blocks_used = used_;
  s.blocks_cached = int64_t(cached_.size());
  s.blocks_free = free_blocks();
  return s;
}

}  // namespace parley
