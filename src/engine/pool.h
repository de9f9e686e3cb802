// Pool: a caching allocator for one device. Tensors it hands out return their block to
// the pool when the last reference goes; a later request of the same size class reuses
// it without a system allocation. Hot loops allocate from a warm pool (STYLE.md #9).
#pragma once

#include <memory>

#include "engine/tensor.h"

namespace parley {

class Pool {
 public:
  explicit Pool(Device device);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  Tensor alloc(const Shape& shape, DType dtype);
  // Blocks held for reuse, and their total bytes.
  size_t cached_blocks() const;
  size_t cached_bytes() const;
  // Returns every cached block to the system.
  void trim();
  Device device() const { return device_; }

  // Size classes: 256-byte granules below 1 MiB, then powers of two split in 4.
  static size_t size_class(size_t bytes);

 private:
  struct State;
  Device device_;
  std::shared_ptr<State> state_;
};

}  // namespace parley
