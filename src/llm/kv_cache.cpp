// KvCache: one allocation per layer and tensor, zero-filled (an unwritten slot is never
// read: attention stops at the row's last position).
#include "llm/kv_cache.h"

#include "engine/error.h"

namespace parley {

KvCache::KvCache(const LlmConfig& config, int64_t n_blocks) : n_blocks_(n_blocks) {
  check_arg(n_blocks > 0, "[kv cache] n_blocks must be positive, got " + std::to_string(n_blocks));
  const Shape shape{n_blocks, kBlockSize, config.n_kv_heads, config.head_dim};
  for (int64_t l = 0; l < config.n_layers; ++l) {
    k_.push_back(Tensor::zeros(shape, DType::f32));
    v_.push_back(Tensor::zeros(shape, DType::f32));
  }
}

}  // namespace parley
