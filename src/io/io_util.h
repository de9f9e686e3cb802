// Helpers shared by the file readers and writers in src/io: element counts with overflow
// guards, tensors over file bytes (a zero-copy view when aligned, else a copy), and
// writing a whole file.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "engine/error.h"
#include "engine/tensor.h"

namespace parley::io {

// Upper bound on the element count of one tensor read from a file. Far above any real
// model tensor, far below where numel * dtype_size could overflow int64.
constexpr int64_t kMaxFileTensorElements = int64_t(1) << 50;

// Product of `dims`, or nullopt when a dim is negative or the product exceeds
// kMaxFileTensorElements.
inline std::optional<int64_t> checked_numel(std::span<const int64_t> dims) {
  bool any_zero = false;
  for (int64_t d : dims) {
    if (d < 0 || d > kMaxFileTensorElements) return std::nullopt;
    any_zero = any_zero || d == 0;
  }
  if (any_zero) return 0;
  int64_t n = 1;
  for (int64_t d : dims) {
    if (n > kMaxFileTensorElements / d) return std::nullopt;
    n *= d;
  }
  return n;
}

// A CPU tensor over `data` (numel(shape) * dtype_size bytes, already bounds-checked by the
// caller). Aligned data becomes a view that keeps `owner` alive; misaligned data (legacy
// formats do not align tensors) is copied so every consumer may read it as T*. Views of
// mapped files are read-only memory: writing through them faults.
inline Tensor view_or_copy(const uint8_t* data, const Shape& shape, DType dtype,
                           std::shared_ptr<const void> owner) {
  const auto addr = reinterpret_cast<uintptr_t>(data);
  if (addr % dtype_size(dtype) == 0)
    return Tensor::view(const_cast<uint8_t*>(data), shape, dtype, Device::cpu, std::move(owner));
  Tensor t = Tensor::empty(shape, dtype, Device::cpu);
  if (t.nbytes()) std::memcpy(t.raw(), data, t.nbytes());
  return t;
}

// Writes `bytes` to `path` (replacing it). `format` prefixes messages: "[npy]".
inline void write_file(const std::string& path, std::span<const uint8_t> bytes,
                       const std::string& format) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  check(f != nullptr, ErrorKind::not_found,
        format + " cannot open " + path + " for writing: " + std::strerror(errno));
  const size_t n = bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), f);
  const int err = n == bytes.size() ? 0 : errno;
  const bool closed = std::fclose(f) == 0;
  check(n == bytes.size() && closed, ErrorKind::resource_exhausted,
        format + " cannot write " + path + ": " + std::strerror(err ? err : errno));
}

}  // namespace parley::io
