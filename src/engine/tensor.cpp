#include "engine/tensor.h"

#include <cstring>

#include "engine/alloc_stats.h"
#include "engine/ops/elementwise.h"

namespace parley {

Shape::Shape(std::initializer_list<int64_t> dims) {
  for (int64_t d : dims) push_back(d);
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < n_; ++i) n *= d_[size_t(i)];
  return n;
}

void Shape::push_back(int64_t v) {
  check_arg(n_ < kMaxDims, "[tensor] more than " + std::to_string(kMaxDims) + " dimensions");
  // -1 is allowed only as reshape's "infer this dimension"; tensors reject it (check_size).
  check_arg(v >= -1, "[tensor] negative dimension " + std::to_string(v));
  d_[size_t(n_++)] = v;
}

bool Shape::operator==(const Shape& o) const {
  if (n_ != o.n_) return false;
  for (int i = 0; i < n_; ++i)
    if (d_[size_t(i)] != o.d_[size_t(i)]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < n_; ++i) {
    if (i) s += ", ";
    s += std::to_string(d_[size_t(i)]);
  }
  return s + "]";
}

namespace {

// Limits a single tensor to 2^40 bytes: anything larger is a corrupt shape, not a model.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 40;

void check_size(const Shape& shape, DType dtype) {
  int64_t bytes = int64_t(dtype_size(dtype));
  for (int64_t d : shape) {
    check_arg(d >= 0, "[tensor] shape " + shape.str() + " has a -1 dimension outside reshape");
    check(d == 0 || bytes <= kMaxTensorBytes / d, ErrorKind::resource_exhausted,
          "[tensor] shape " + shape.str() + " is larger than 1 TiB");
    bytes *= d;
  }
}

}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  check_size(shape, dtype);
  const size_t bytes = size_t(shape.numel()) * dtype_size(dtype);
  const bool on_device = device == Device::cuda;
  void* p = system_alloc(bytes, on_device);
  std::shared_ptr<void> buf(p, [bytes, on_device](void* q) { system_free(q, bytes, on_device); });
  return adopt(std::move(buf), shape, dtype, device);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (device == Device::cpu) {
    if (t.nbytes()) std::memset(t.raw(), 0, t.nbytes());
  } else {
    Tensor host = zeros(shape, dtype, Device::cpu);
    t.copy_from(host);
  }
  return t;
}

Tensor Tensor::view(void* data, const Shape& shape, DType dtype, Device device,
                    std::shared_ptr<const void> owner) {
  check_size(shape, dtype);
  Tensor t;
  t.owner_ = std::move(owner);
  t.data_ = data;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  return t;
}

Tensor Tensor::adopt(std::shared_ptr<void> buffer, const Shape& shape, DType dtype, Device device) {
  void* p = buffer.get();
  return view(p, shape, dtype, device, std::shared_ptr<const void>(std::move(buffer)));
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape s = shape;
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < s.ndim(); ++i) {
    if (s[i] == -1) {
      check_arg(infer < 0, "[tensor] reshape to " + s.str() + " has two -1 dimensions");
      infer = i;
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    check_arg(known > 0 && numel() % known == 0,
              "[tensor] cannot reshape " + shape_.str() + " to " + s.str());
    s[infer] = numel() / known;
  }
  check_arg(s.numel() == numel(), "[tensor] cannot reshape " + shape_.str() + " to " + s.str());
  Tensor t = *this;
  t.shape_ = s;
  return t;
}

Tensor Tensor::slice0(int64_t begin, int64_t end) const {
  check_arg(ndim() >= 1 && 0 <= begin && begin <= end && end <= dim(0),
            "[tensor] slice [" + std::to_string(begin) + ", " + std::to_string(end) + ") of " +
                shape_.str());
  const int64_t row = ndim() ? numel() / std::max<int64_t>(dim(0), 1) : 0;
  Tensor t = *this;
  t.shape_[0] = end - begin;
  t.data_ = static_cast<char*>(data_) + size_t(begin * row) * dtype_size(dtype_);
  return t;
}

Tensor Tensor::to(Device device) const {
  Tensor t = empty(shape_, dtype_, device);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::cast(DType dtype) const {
  Tensor t = empty(shape_, dtype, device_);
  convert(*this, t);
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  check_arg(src.shape_ == shape_ && src.dtype_ == dtype_,
            "[tensor] copy from " + src.describe() + " into " + describe());
  const size_t n = nbytes();
  if (n == 0) return;
  if (device_ == Device::cpu && src.device_ == Device::cpu) {
    std::memmove(data_, src.data_, n);
  } else if (device_ == Device::cuda && src.device_ == Device::cpu) {
    cuda::memcpy_h2d(data_, src.data_, n);
  } else if (device_ == Device::cpu && src.device_ == Device::cuda) {
    cuda::memcpy_d2h(data_, src.data_, n);
  } else {
    cuda::memcpy_d2d(data_, src.data_, n);
  }
}

std::string Tensor::describe() const {
  return std::string(dtype_name(dtype_)) + shape_.str() + " " + std::string(device_name(device_));
}

std::string_view device_name(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

}  // namespace parley
