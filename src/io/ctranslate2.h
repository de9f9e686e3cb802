// Reads CTranslate2's model.bin (the weights of faster-whisper model directories; the
// config.json and vocabulary beside it are read elsewhere). Layout, little-endian, as
// written by ctranslate2/specs/model_spec.py and read by src/models/model.cc:
//   u32 binary_version                       1..6 (6 since late 2022)
//   string spec_name, u32 spec_revision      version >= 2 ("WhisperSpec", 3)
//   u32 variable count, then per variable:
//     string name, u8 rank, u32 dims[rank],
//     version >= 4: u8 type id (CTranslate2's DataType), u32 byte count
//     version <= 3: u8 item size (4 float32, 2 int16, 1 int8), u32 element count
//     the raw data, packed right after (so usually not aligned to its element size)
//   version >= 3: u32 alias count, then per alias: string alias, string target
// where string = u16 length (including a terminating NUL) + the bytes. Versions 4, 5
// and 6 share this layout: 5 (2022) changed how int8 weights were rounded when
// quantized, 6 (2022) moved model attributes to config.json.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "engine/tensor.h"
#include "io/tensor_map.h"

namespace parley::io {

// CTranslate2's DataType ids, in the order of include/ctranslate2/types.h.
enum class Ct2Type : uint8_t {
  float32 = 0,
  int8 = 1,
  int16 = 2,
  int32 = 3,
  float16 = 4,
  bfloat16 = 5
};

std::string_view ct2_type_name(Ct2Type t);

// One stored variable, whatever its type.
struct Ct2Variable {
  Shape shape;
  Ct2Type type = Ct2Type::float32;
  std::span<const uint8_t> bytes;  // its data in the file (little-endian, maybe unaligned)
};

struct Ct2Model {
  std::string source;  // "[ctranslate2] path", the prefix of error messages
  uint32_t binary_version = 0;
  std::string spec_name;                         // "WhisperSpec"; empty for binary version 1
  uint32_t spec_revision = 0;                    // 1 for binary version 1, as CTranslate2 assumes
  std::map<std::string, Ct2Variable> variables;  // every stored variable, by name
  std::map<std::string, std::string> aliases;    // alias -> the variable it names
  // Every variable whose type has a parley DType (all but int16), and every alias of
  // one, which is the same view. A zero-copy view of the file when its data is aligned
  // to its element size, otherwise an aligned copy (io_util.h's view_or_copy).
  TensorMap tensors;
  std::shared_ptr<const void> owner;  // keeps `variables[...].bytes` alive

  // The tensor `name` (a variable or an alias); throws not_found, or unsupported for
  // an int16 variable.
  const Tensor& tensor(const std::string& name) const;
  // A one-element int8 / int16 / int32 variable (the specs' scalars such as
  // "decoder/num_heads"), widened; throws not_found or invalid_argument.
  int64_t scalar_int(const std::string& name) const;
  bool contains(const std::string& name) const {
    return variables.count(name) != 0 || aliases.count(name) != 0;
  }
};

// Maps `path` (a model.bin) and reads it.
Ct2Model read_ctranslate2(const std::string& path);

// Parses a model.bin image held in memory; `name` names it in errors. Views into `bytes`
// keep `owner` alive; with a null owner the caller keeps `bytes` alive as long as the
// result.
Ct2Model parse_ctranslate2(std::span<const uint8_t> bytes, const std::string& name,
                           std::shared_ptr<const void> owner = nullptr);

}  // namespace parley::io
