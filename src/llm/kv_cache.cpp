// KvCache: one allocation per layer and tensor, zero-filled on the CPU (an unwritten slot
// is never read: attention stops at the row's last position; on CUDA it is left as is).
#include "llm/kv_cache.h"

#include "engine/error.h"

namespace parley {

KvCache::KvCache(const LlmConfig& config, int64_t n_blocks, Device device, DType dtype)
    : n_blocks_(n_blocks) {
  check_arg(n_blocks > 0, "[kv cache] n_blocks must be positive, got " + std::to_string(n_blocks));
  const Shape shape{n_blocks, kBlockSize, config.n_kv_heads, config.head_dim};
  for (int64_t l = 0; l < config.n_layers; ++l) {
    k_.push_back(device == Device::cpu ? Tensor::zeros(shape, dtype)
                                       : Tensor::empty(shape, dtype, device));
    v_.push_back(device == Device::cpu ? Tensor::zeros(shape, dtype)
                                       : Tensor::empty(shape, dtype, device));
  }
}

}  // namespace parley
