// ggml tensor types (the `ggml_type` enum shared by GGUF and whisper.cpp's legacy .bin):
// names, block sizes and bytes per block, so readers can bounds-check tensors of any
// known type, and the block-quantized types' dequantization to f32 and QuantMatrix views
// (the block formats themselves are engine/quant.h's).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "engine/quant.h"
#include "engine/tensor.h"

namespace parley::io {

// Values are the on-disk type ids (ggml.h); ids ggml retired (4, 5, 31-33, 36-38) are absent.
enum class GgmlType : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q8_1 = 9,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  q8_k = 15,
  iq2_xxs = 16,
  iq2_xs = 17,
  iq3_xxs = 18,
  iq1_s = 19,
  iq4_nl = 20,
  iq3_s = 21,
  iq2_s = 22,
  iq4_xs = 23,
  i8 = 24,
  i16 = 25,
  i32 = 26,
  i64 = 27,
  f64 = 28,
  iq1_m = 29,
  bf16 = 30,
  tq1_0 = 34,
  tq2_0 = 35,
  mxfp4 = 39,
};

struct GgmlTypeInfo {
  const char* name;     // "q8_0"
  int64_t block_size;   // values per block (1 for plain types)
  int64_t block_bytes;  // bytes per block
};

// Facts about a known type id; nullopt for an id this table does not know.
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id);

// "q8_0", or "type 99" for an unknown id.
std::string ggml_type_name(uint32_t id);

// The parley dtype a plain float/int ggml type maps to (f32, f16, bf16, i8, i32), if any.
std::optional<DType> ggml_type_dtype(uint32_t id);

// Q8_0: blocks of 32 values, each an f16 scale d followed by 32 int8 q; value = d * q.
constexpr int64_t kQ8_0BlockSize = 32;
constexpr int64_t kQ8_0BlockBytes = 34;

// Dequantizes `blocks` (whole Q8_0 blocks) into a new f32 CPU tensor of `shape`, whose
// element count must be 32 * the number of blocks.
Tensor dequantize_q8_0(std::span<const uint8_t> blocks, const Shape& shape);

// The same for every block type engine/quant.h supports (q4_0, q4_1, q5_0, q5_1, q8_0,
// q2_K .. q6_K): blocks of ggml type id `type` into a new f32 CPU tensor of `shape`, whose
// last dimension must be a multiple of the block size and whose blocks must fill `blocks`
// exactly. Other ids: Error(unsupported).
Tensor dequantize_ggml(uint32_t type, std::span<const uint8_t> blocks, const Shape& shape);

// A zero-copy QuantMatrix over a tensor's blocks (a GGUF tensor's raw() and the file's
// owner): shape [..., K] becomes rows = numel / K, cols = K. Errors as dequantize_ggml.
QuantMatrix ggml_quant_matrix(uint32_t type, const Shape& shape, std::span<const uint8_t> blocks,
                              std::shared_ptr<const void> owner);

}  // namespace parley::io
