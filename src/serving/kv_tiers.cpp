#include "serving/kv_tiers.h"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iostream>

#include "llm/kv_cache.h"

namespace parley {

namespace {

constexpr char kMagic[8] = {'P', 'A', 'R', 'L', 'E', 'Y', 'K', 'V'};
constexpr uint32_t kVersion = 1;
constexpr size_t kChecksumAt = 72;  // header bytes before the checksum
constexpr size_t kHeaderBytes = 88;

void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}
void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}
uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(p[i]) << (8 * i);
  return v;
}
void put_hash(uint8_t* p, const BlockHash& h) {
  put64(p, h.lo);
  put64(p + 8, h.hi);
}
BlockHash get_hash(const uint8_t* p) { return {get64(p), get64(p + 8)}; }

// The header's checksum: SipHash-2-4-128 under the fingerprint of everything but itself.
BlockHash checksum(const BlockHash& fingerprint, const std::vector<uint8_t>& file) {
  std::vector<uint8_t> body(file.begin(), file.begin() + kChecksumAt);
  body.insert(body.end(), file.begin() + kHeaderBytes, file.end());
  return siphash128(fingerprint.lo, fingerprint.hi, body);
}

}  // namespace

KvTiers::KvTiers(KvTierOptions options, size_t block_bytes)
    : options_(std::move(options)), block_bytes_(block_bytes) {
  if (!options_.dir.empty()) scan();
}

void KvTiers::scan() {
  std::error_code ec;
  std::filesystem::create_directories(options_.dir, ec);
  if (ec) {
    std::cerr << "[kv cache] cannot create " << options_.dir << ": " << ec.message()
              << "; the SSD tier is off" << std::endl;
    options_.dir.clear();
    return;
  }
  const size_t file_bytes = kHeaderBytes + 4 * size_t(KvCache::kBlockSize) + block_bytes_;
  for (std::filesystem::directory_iterator it(options_.dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const auto& path = it->path();
    // A block file's temp (name.kvb.tmpPID_N) left by a process killed mid-write: removed.
    if (path.filename().string().find(".kvb.tmp") != std::string::npos) {
      std::error_code rm;
      if (std::filesystem::remove(path, rm)) ++stats_.ssd_stale_temps;
      continue;
    }
    if (path.extension() != ".kvb" || !it->is_regular_file(ec)) continue;
    uint8_t h[kHeaderBytes];
    std::ifstream in(path, std::ios::binary);
    const bool read = in && in.read(reinterpret_cast<char*>(h), kHeaderBytes).good();
    if (!read || std::memcmp(h, kMagic, 8) != 0 || get32(h + 8) != kVersion) {
      ++stats_.ssd_corrupt;
      continue;
    }
    if (get_hash(h + 24) != options_.fingerprint) {
      ++stats_.ssd_foreign;
      continue;
    }
    if (get32(h + 12) != uint32_t(KvCache::kBlockSize) || get64(h + 16) != block_bytes_ ||
        it->file_size(ec) != file_bytes) {
      ++stats_.ssd_corrupt;
      continue;
    }
    disk_[get_hash(h + 40)] = path;
  }
}

void KvTiers::put(const KvBlockRecord& record) {
  if (options_.ram_bytes > 0 && !ram_index_.count(record.hash)) {
    ram_.push_front(record);
    ram_index_[record.hash] = ram_.begin();
    while (!ram_.empty() && ram_.size() * block_bytes_ > options_.ram_bytes) {
      ram_index_.erase(ram_.back().hash);
      ram_.pop_back();
      ++stats_.ram_evictions;
    }
  }
  persist(record);
}

void KvTiers::persist(const KvBlockRecord& record) {
  if (!options_.dir.empty() && !on_disk(record.hash)) write_file(record);
}

void KvTiers::write_file(const KvBlockRecord& record) {
  std::vector<uint8_t> file(kHeaderBytes + 4 * record.tokens.size() + record.payload.size());
  uint8_t* h = file.data();
  std::memcpy(h, kMagic, 8);
  put32(h + 8, kVersion);
  put32(h + 12, uint32_t(record.tokens.size()));
  put64(h + 16, record.payload.size());
  put_hash(h + 24, options_.fingerprint);
  put_hash(h + 40, record.hash);
  put_hash(h + 56, record.parent);
  for (size_t t = 0; t < record.tokens.size(); ++t)
    put32(h + kHeaderBytes + 4 * t, uint32_t(record.tokens[t]));
  if (!record.payload.empty())
    std::memcpy(h + kHeaderBytes + 4 * record.tokens.size(), record.payload.data(),
                record.payload.size());
  put_hash(h + kChecksumAt, checksum(options_.fingerprint, file));

  const std::filesystem::path path =
      std::filesystem::path(options_.dir) / (record.hash.hex() + ".kvb");
  const std::filesystem::path tmp =
      path.string() + ".tmp" + std::to_string(::getpid()) + "_" + std::to_string(tmp_counter_++);
  bool ok = false;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    ok = out && out.write(reinterpret_cast<const char*>(file.data()), std::streamsize(file.size()))
                    .flush()
                    .good();
  }
  std::error_code ec;
  if (ok) std::filesystem::rename(tmp, path, ec);
  if (!ok || ec) {
    std::filesystem::remove(tmp, ec);
    ++stats_.ssd_write_errors;
    return;
  }
  disk_[record.hash] = path;
  ++stats_.ssd_writes;
}

std::optional<KvBlockRecord> KvTiers::read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return std::nullopt;
  const std::streamoff size = in.tellg();
  const size_t want = kHeaderBytes + 4 * size_t(KvCache::kBlockSize) + block_bytes_;
  if (size != std::streamoff(want)) return std::nullopt;
  std::vector<uint8_t> file(want);
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(file.data()), std::streamsize(want))) return std::nullopt;
  const uint8_t* h = file.data();
  if (std::memcmp(h, kMagic, 8) != 0 || get32(h + 8) != kVersion ||
      get32(h + 12) != uint32_t(KvCache::kBlockSize) || get64(h + 16) != block_bytes_ ||
      get_hash(h + 24) != options_.fingerprint ||
      get_hash(h + kChecksumAt) != checksum(options_.fingerprint, file))
    return std::nullopt;
  KvBlockRecord r;
  r.hash = get_hash(h + 40);
  r.parent = get_hash(h + 56);
  r.tokens.resize(size_t(KvCache::kBlockSize));
  for (size_t t = 0; t < r.tokens.size(); ++t)
    r.tokens[t] = int32_t(get32(h + kHeaderBytes + 4 * t));
  if (block_hash(r.parent, r.tokens) != r.hash) return std::nullopt;
  r.payload.assign(file.begin() + std::ptrdiff_t(kHeaderBytes + 4 * r.tokens.size()), file.end());
  return r;
}

std::optional<KvBlockRecord> KvTiers::get(const BlockHash& hash) {
  if (auto it = ram_index_.find(hash); it != ram_index_.end()) {
    ram_.splice(ram_.begin(), ram_, it->second);
    ++stats_.ram_hits;
    return *it->second;
  }
  auto it = disk_.find(hash);
  if (it == disk_.end()) return std::nullopt;
  std::optional<KvBlockRecord> r = read_file(it->second);
  if (!r || r->hash != hash) {
    ++stats_.ssd_corrupt;
    disk_.erase(it);
    return std::nullopt;
  }
  ++stats_.ssd_hits;
  return r;
}

KvTierStats KvTiers::stats() const {
  KvTierStats s = stats_;
  s.ram_blocks = int64_t(ram_.size());
  s.ssd_blocks = int64_t(disk_.size());
  return s;
}

}  // namespace parley
