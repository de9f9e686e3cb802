// GGUF (v2, v3) reader (ggml's docs/gguf.md): typed metadata key/values, tensor infos, and
// tensors as zero-copy views into the mapped file. F32/F16/BF16 (and I8/I32) tensors become
// Tensors; Q8_0 is exposed as raw blocks plus dequantize_q8_0; other types are listed and
// throw Error(unsupported) when their data is asked for as a Tensor.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "io/ggml_types.h"
#include "io/tensor_map.h"

namespace parley::io {

// Metadata value types; the ids are the on-disk gguf_type values.
enum class GgufType : uint32_t {
  uint8 = 0,
  int8 = 1,
  uint16 = 2,
  int16 = 3,
  uint32 = 4,
  int32 = 5,
  float32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  uint64 = 10,
  int64 = 11,
  float64 = 12,
};

std::string gguf_type_name(GgufType t);  // "uint32", "array", ...

struct GgufArray;
// One metadata value; the variant's index is its GgufType id.
using GgufValue = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                               std::string, GgufArray, uint64_t, int64_t, double>;

// An array value: one element type, its elements stored as a vector of that type
// (the variant's index is again the GgufType id; nested arrays are vector<GgufArray>).
struct GgufArray {
  std::variant<std::vector<uint8_t>, std::vector<int8_t>, std::vector<uint16_t>,
               std::vector<int16_t>, std::vector<uint32_t>, std::vector<int32_t>,
               std::vector<float>, std::vector<bool>, std::vector<std::string>,
               std::vector<GgufArray>, std::vector<uint64_t>, std::vector<int64_t>,
               std::vector<double>>
      items;
  GgufType type() const { return GgufType(items.index()); }
  size_t size() const;
};

inline GgufType gguf_type_of(const GgufValue& v) { return GgufType(v.index()); }

struct GgufTensorInfo {
  std::string name;
  Shape shape;          // row-major: GGUF's dims (innermost first, ne[0]) reversed
  uint32_t type = 0;    // ggml type id (GgmlType)
  uint64_t offset = 0;  // from the start of the data section
  uint64_t nbytes = 0;  // 0 when the type is unknown to ggml_type_info
};

class GgufFile {
 public:
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }  // file offset of the data section

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  // The value of `key`, or null.
  const GgufValue* find(const std::string& key) const;
  // The value of `key` as T (exact type); throws not_found when absent and
  // invalid_argument naming both types when it has another type.
  template <typename T>
  const T& get(const std::string& key) const {
    const GgufValue& v = require(key);
    if (const T* p = std::get_if<T>(&v)) return *p;
    wrong_type(key, v, GgufType(GgufValue(T{}).index()));
  }

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo& info(const std::string& name) const;  // throws not_found
  // The tensor's bytes in the file, for any type (Q8_0: nbytes / 34 blocks).
  std::span<const uint8_t> raw(const std::string& name) const;
  // A CPU view for f32, f16, bf16, i8 and i32 tensors; Error(unsupported) otherwise
  // (use raw + dequantize_q8_0 for Q8_0).
  Tensor tensor(const std::string& name) const;
  // Every tensor that tensor() can return, by name.
  TensorMap float_tensors() const;
  // Keeps the file image alive (for views built from raw()).
  const std::shared_ptr<const void>& owner() const { return owner_; }
  const std::string& source() const { return source_; }

 private:
  friend GgufFile parse_gguf(std::span<const uint8_t>, std::shared_ptr<const void>,
                             const std::string&);
  const GgufValue& require(const std::string& key) const;
  [[noreturn]] void wrong_type(const std::string& key, const GgufValue& v, GgufType want) const;

  std::string source_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::span<const uint8_t> bytes_;
  std::shared_ptr<const void> owner_;
};

// Maps and parses `path`; malformed files throw Error(invalid_argument), GGUF v1 and
// big-endian files Error(unsupported).
GgufFile read_gguf(const std::string& path);

// Parses a whole file image; `owner` keeps `bytes` alive (null: the caller keeps them alive
// as long as the GgufFile and its tensors). `name` names the file in messages.
GgufFile parse_gguf(std::span<const uint8_t> bytes, std::shared_ptr<const void> owner,
                    const std::string& name);

}  // namespace parley::io
