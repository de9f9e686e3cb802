// KvTiers: where the KV pool's cached blocks go when the device pool evicts them
// (issue 25 item 3): a bounded host-memory LRU (the RAM tier) and a folder of block files
// (the SSD tier, `--kv-cache-dir`) that a later process reads back. Both are keyed by the
// prefix cache's block hash (serving/kv_hash.h); a record carries the block's parent hash
// and token ids so the pool verifies a hit before restoring it.
//
// Copies are synchronous: an eviction writes the block to host memory (and its file) before
// the device block is reused, and a restore reads it back before the request runs. That
// costs a device -> host copy per evicted block on the allocating thread; an asynchronous
// copy stream is future work (docs/ARCHITECTURE.md).
//
// Block files: <hash hex>.kvb, written to a temp name and renamed (a crash leaves no partial
// .kvb), little-endian:
//   magic "PARLEYKV" | u32 version (1) | u32 n_tokens (16) | u64 payload bytes |
//   128-bit model fingerprint | 128-bit block hash | 128-bit parent hash |
//   128-bit checksum (SipHash-2-4-128 of the header before it, the tokens and the payload) |
//   i32 tokens[n_tokens] | payload (KvCache::read_block's bytes)
// At start the folder is scanned and each file's header checked: a file of another model
// (fingerprint) is foreign, one with a bad magic, version or size is corrupt; both are
// counted and skipped, never read. A file is fully verified (checksum, hash chain) when
// read; a bad one is counted corrupt and dropped from the index. No error of the folder or
// its files throws: a write that fails is counted and the block is simply not on disk.
#pragma once

#include <cstdint>
#include <filesystem>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "serving/kv_hash.h"

namespace parley {

struct KvTierOptions {
  uint64_t ram_bytes = 0;  // the RAM tier's capacity; 0: no RAM tier
  std::string dir;         // the SSD tier's folder (created); empty: no SSD tier
  BlockHash fingerprint;   // the model, dtype and KV shapes the blocks belong to
};

struct KvBlockRecord {
  BlockHash hash, parent;
  std::vector<int32_t> tokens;   // the block's token ids
  std::vector<uint8_t> payload;  // its keys and values, KvCache::block_bytes()
};

struct KvTierStats {
  int64_t ram_blocks = 0, ram_hits = 0, ram_evictions = 0;
  int64_t ssd_blocks = 0, ssd_hits = 0, ssd_writes = 0;
  int64_t ssd_corrupt = 0;       // bad magic, version, size, checksum or hash: skipped
  int64_t ssd_foreign = 0;       // another model's fingerprint: skipped
  int64_t ssd_write_errors = 0;  // a block file that could not be written
  int64_t ssd_stale_temps = 0;   // half-written temps of a killed process, removed at start
};

class KvTiers {
 public:
  KvTiers(KvTierOptions options, size_t block_bytes);

  bool enabled() const { return options_.ram_bytes > 0 || !options_.dir.empty(); }
  // An evicted block: into the RAM tier (dropping its least recently used blocks beyond the
  // capacity) and, when not there yet, into the SSD tier.
  void put(const KvBlockRecord& record);
  // A block onto the SSD tier only (KvPool::persist at shutdown).
  void persist(const KvBlockRecord& record);
  bool on_disk(const BlockHash& hash) const { return disk_.count(hash) > 0; }
  // The block from the RAM tier, else its verified file; nullopt when neither has it.
  std::optional<KvBlockRecord> get(const BlockHash& hash);
  KvTierStats stats() const;

 private:
  void scan();
  void write_file(const KvBlockRecord& record);
  std::optional<KvBlockRecord> read_file(const std::filesystem::path& path);

  KvTierOptions options_;
  size_t block_bytes_;
  std::list<KvBlockRecord> ram_;  // most recently used at the front
  std::unordered_map<BlockHash, std::list<KvBlockRecord>::iterator, BlockHashHasher> ram_index_;
  std::unordered_map<BlockHash, std::filesystem::path, BlockHashHasher> disk_;
  KvTierStats stats_;
  uint64_t tmp_counter_ = 0;
};

}  // namespace parley
