#include "engine/pool.h"

#include <bit>
#include <map>
#include <mutex>
#include <vector>

#include "engine/alloc_stats.h"

namespace parley {

struct Pool::State {
  std::mutex mu;
  bool device = false;
  std::map<size_t, std::vector<void*>> free_blocks;  // size class -> blocks

  ~State() {
    for (auto& [size, blocks] : free_blocks)
      for (void* p : blocks) system_free(p, size, device);
  }
};

Pool::Pool(Device device) : device_(device), state_(std::make_shared<State>()) {
  state_->device = device == Device::cuda;
}

Pool::~Pool() = default;

size_t Pool::size_class(size_t bytes) {
  constexpr size_t kGranule = 256, kSmall = size_t(1) << 20;
  if (bytes <= kSmall)
    return (bytes + kGranule - 1) / kGranule * kGranule + (bytes == 0 ? kGranule : 0);
  const size_t top = std::bit_floor(bytes);
  const size_t step = top / 4;
  return (bytes + step - 1) / step * step;
}

Tensor Pool::alloc(const Shape& shape, DType dtype) {
  const size_t bytes = size_t(shape.numel()) * dtype_size(dtype);
  const size_t cls = size_class(bytes);
  void* p = nullptr;
  {
    std::lock_guard lock(state_->mu);
    auto it = state_->free_blocks.find(cls);
    if (it != state_->free_blocks.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
    }
  }
  if (!p) p = system_alloc(cls, state_->device);
  std::weak_ptr<State> weak = state_;
  const bool on_device = state_->device;
  std::shared_ptr<void> buf(p, [weak, cls, on_device](void* q) {
    if (auto s = weak.lock()) {
      std::lock_guard lock(s->mu);
      s->free_blocks[cls].push_back(q);
    } else {
      system_free(q, cls, on_device);
    }
  });
  return Tensor::adopt(std::move(buf), shape, dtype, device_);
}

size_t Pool::cached_blocks() const {
  std::lock_guard lock(state_->mu);
  size_t n = 0;
  for (auto& [size, blocks] : state_->free_blocks) n += blocks.size();
  return n;
}

size_t Pool::cached_bytes() const {
  std::lock_guard lock(state_->mu);
  size_t n = 0;
  for (auto& [size, blocks] : state_->free_blocks) n += size * blocks.size();
  return n;
}

void Pool::trim() {
  std::lock_guard lock(state_->mu);
  for (auto& [size, blocks] : state_->free_blocks)
    for (void* p : blocks) system_free(p, size, state_->device);
  state_->free_blocks.clear();
}

}  // namespace parley
