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

void KvCache::copy_block(int64_t src, int64_t dst) {
  check_arg(src >= 0 && src < n_blocks_ && dst >= 0 && dst < n_blocks_,
            "[kv cache] copy_block " + std::to_string(src) + " -> " + std::to_string(dst) +
                " outside " + std::to_string(n_blocks_) + " blocks");
  if (src == dst) return;
  for (size_t l = 0; l < k_.size(); ++l) {
    k_[l].slice0(dst, dst + 1).copy_from(k_[l].slice0(src, src + 1));
    v_[l].slice0(dst, dst + 1).copy_from(v_[l].slice0(src, src + 1));
  }
}

void KvCache::read_block(int64_t b, std::span<uint8_t> out) const {
  check_arg(b >= 0 && b < n_blocks_ && out.size() == block_bytes(),
            "[kv cache] read_block " + std::to_string(b) + ": bad block or buffer size");
  const size_t each = out.size() / (2 * k_.size());
  for (size_t l = 0; l < k_.size(); ++l)
    for (int kv = 0; kv < 2; ++kv) {
      const Tensor src = (kv == 0 ? k_[l] : v_[l]).slice0(b, b + 1);
      Tensor dst = Tensor::view(out.data() + (2 * l + size_t(kv)) * each, src.shape(), src.dtype(),
                                Device::cpu, nullptr);
      dst.copy_from(src);
    }
}

void KvCache::write_block(int64_t b, std::span<const uint8_t> in) {
  check_arg(b >= 0 && b < n_blocks_ && in.size() == block_bytes(),
            "[kv cache] write_block " + std::to_string(b) + ": bad block or buffer size");
  const size_t each = in.size() / (2 * k_.size());
  for (size_t l = 0; l < k_.size(); ++l)
    for (int kv = 0; kv < 2; ++kv) {
      Tensor dst = (kv == 0 ? k_[l] : v_[l]).slice0(b, b + 1);
      const Tensor src = Tensor::view(const_cast<uint8_t*>(in.data()) + (2 * l + size_t(kv)) * each,
                                      dst.shape(), dst.dtype(), Device::cpu, nullptr);
      dst.copy_from(src);
    }
}

}  // namespace parley
