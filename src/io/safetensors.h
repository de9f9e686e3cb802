// safetensors reader and writer (https://github.com/huggingface/safetensors, format:
// u64 LE header length N, N bytes of JSON header, then the data section). Tensors are
// zero-copy views into the mapped file; the file stays mapped while any view lives.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/tensor_map.h"

namespace parley::io {

struct SafetensorsFile {
  TensorMap tensors;
  std::map<std::string, Int64Array> int64_tensors;  // I64 tensors, by value
  std::map<std::string, std::string> metadata;      // the header's "__metadata__", if any
};

// Maps `path` and parses it. dtypes F32, F16, BF16, I32, I8 (as tensors) and I64 (copied
// into int64_tensors, at most 2^20 elements each); any other dtype throws
// Error(unsupported) naming it; a malformed file throws Error(invalid_argument).
SafetensorsFile read_safetensors(const std::string& path);

// Parses a whole file image. Tensors view `bytes` (copies where misaligned) and hold
// `owner`, which must keep `bytes` alive; with a null owner the caller keeps `bytes` alive
// as long as the tensors. `name` names the file in error messages.
SafetensorsFile parse_safetensors(std::span<const uint8_t> bytes, std::shared_ptr<const void> owner,
                                  const std::string& name);

// The bytes of a safetensors file holding `tensors` (CUDA tensors are copied to the host).
// Like the reference writer, tensors are laid out by dtype size (largest first), then by
// name, so that every tensor stays aligned to its element size; the header is padded with
// spaces so the data section starts at a multiple of 8 bytes.
std::vector<uint8_t> serialize_safetensors(const TensorMap& tensors,
                                           const std::map<std::string, std::string>& metadata = {});

// Writes serialize_safetensors(...) to `path`; throws Error(not_found) if it cannot be
// written.
void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace parley::io
