// Tensor: a dtype, a shape (row-major, contiguous) and a device pointer. A tensor either
// owns its memory (from the system or from a Pool) or is a view that keeps its owner
// alive through a shared handle (an mmap'ed file, a parent tensor).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "engine/device.h"
#include "engine/dtype.h"

namespace parley {

class Shape {
 public:
  static constexpr int kMaxDims = 6;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  template <typename It>
  Shape(It begin, It end) {
    for (auto it = begin; it != end; ++it) push_back(int64_t(*it));
  }
  int ndim() const { return n_; }
  int64_t operator[](int i) const { return d_[size_t(i < 0 ? i + n_ : i)]; }
  int64_t& operator[](int i) { return d_[size_t(i < 0 ? i + n_ : i)]; }
  int64_t numel() const;
  void push_back(int64_t v);
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string str() const;  // "[2, 3, 4]"
  const int64_t* begin() const { return d_.data(); }
  const int64_t* end() const { return d_.data() + n_; }

 private:
  std::array<int64_t, kMaxDims> d_{};
  int n_ = 0;
};

class Tensor {
 public:
  Tensor() = default;

  // New memory from the system allocator of `device` (counted, see alloc_stats.h).
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::cpu);
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::cpu);
  // A view of memory owned elsewhere; `owner` (may be null) is kept alive by the view.
  static Tensor view(void* data, const Shape& shape, DType dtype, Device device,
                     std::shared_ptr<const void> owner);
  // Wraps memory with an owner handle; used by pools.
  static Tensor adopt(std::shared_ptr<void> buffer, const Shape& shape, DType dtype, Device device);

  bool defined() const { return data_ != nullptr || shape_.numel() == 0; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return shape_.ndim(); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool is_cuda() const { return device_ == Device::cuda; }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <typename T>
  T* data() {
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(data_);
  }

  // Same memory, new shape with the same number of elements; one dim may be -1.
  Tensor reshape(const Shape& shape) const;
  // Rows [begin, end) along dimension 0, sharing memory.
  Tensor slice0(int64_t begin, int64_t end) const;
  // A copy on `device` (same dtype).
  Tensor to(Device device) const;
  // A copy with another dtype (float <-> float, on this tensor's device).
  Tensor cast(DType dtype) const;
  // Copies `src` into this tensor: same shape and dtype, any devices.
  void copy_from(const Tensor& src);

  std::string describe() const;  // "f32[2, 3] cpu"

 private:
  std::shared_ptr<const void> owner_;
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
};

}  // namespace parley
