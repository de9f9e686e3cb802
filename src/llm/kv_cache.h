// KvCache: the paged key/value memory of one model: per layer K and V
// [n_blocks, kBlockSize, n_kv_heads, head_dim] in the model's dtype on its device (f32 on
// the CPU), allocated once from a block count. Which blocks belong to which sequence is the
// caller's business (a block table per batch row, src/serving's KvPool); the forward pass only
// reads and writes the blocks named.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/tensor.h"
#include "llm/config.h"

namespace parley {

class KvCache {
 public:
  static constexpr int64_t kBlockSize = 16;  // tokens per block

  KvCache(const LlmConfig& config, int64_t n_blocks, Device device = Device::cpu,
          DType dtype = DType::f32);

  int64_t n_blocks() const { return n_blocks_; }
  Tensor& k(int64_t layer) { return k_[size_t(layer)]; }
  Tensor& v(int64_t layer) { return v_[size_t(layer)]; }

  // Blocks a sequence of n_tokens positions needs.
  static int64_t blocks_for(int64_t n_tokens) { return (n_tokens + kBlockSize - 1) / kBlockSize; }

  int64_t n_layers() const { return int64_t(k_.size()); }
  DType dtype() const { return k_.front().dtype(); }
  Device device() const { return k_.front().device(); }
  // Bytes of one block over every layer, K and V: what read_block / write_block move.
  size_t block_bytes() const { return 2 * k_.size() * k_.front().slice0(0, 1).nbytes(); }
  // Block dst's keys and values in every layer become block src's (a device copy; the
  // KV pool's copy-on-write).
  void copy_block(int64_t src, int64_t dst);
  // Block b's keys and values to / from host memory of block_bytes(): per layer K then V,
  // each [kBlockSize, n_kv_heads, head_dim] in the cache's dtype (the KV tiers' payload).
  void read_block(int64_t b, std::span<uint8_t> out) const;
  void write_block(int64_t b, std::span<const uint8_t> in);

 private:
  int64_t n_blocks_;
  std::vector<Tensor> k_, v_;
};

}  // namespace parley
