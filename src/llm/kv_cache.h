// KvCache: the paged key/value memory of one model: per layer K and V
// [n_blocks, kBlockSize, n_kv_heads, head_dim] in the model's dtype on its device (f32 on
// the CPU), allocated once from a block count. Which blocks belong to which sequence is the
// caller's business (a block table per batch row, src/serving's KvPool); the forward pass only
// reads and writes the blocks named.
#pragma once

#include <cstdint>
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

 private:
  int64_t n_blocks_;
  std::vector<Tensor> k_, v_;
};

}  // namespace parley
