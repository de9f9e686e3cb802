// Block-quantized weights as ggml stores them (GGUF, whisper.cpp .bin): the block formats,
// their dequantization to f32, and QuantMatrix, a [rows, cols] weight that stays in its
// blocks in memory (zero-copy over an mmap'ed file) for ops/quant_matmul.h.
// This header is the one place that knows the block layouts (ggml-common.h's block_q4_0 ...
// block_q6_K); io/ggml_types and the CPU and CUDA kernels all read them from here.
//
// Layouts (d, dmin, m: f16 little-endian; offsets in bytes; value i of the block):
//   q4_0  32 / 18: d@0, qs[16]@2       q = i<16 ? qs[i]&15 : qs[i-16]>>4; d * (q - 8)
//   q4_1  32 / 20: d@0, m@2, qs[16]@4  the same nibbles; d * q + m
//   q5_0  32 / 22: d@0, qh u32@2, qs[16]@6   q = nibble | bit i of qh << 4; d * (q - 16)
//   q5_1  32 / 24: d@0, m@2, qh@4, qs[16]@8  the same 5-bit q; d * q + m
//   q8_0  32 / 34: d@0, int8 qs[32]@2  d * qs[i]
//   q2_K 256 / 84: scales[16]@0 (lo nibble scale, hi nibble min, per 16 values), qs[64]@16
//                  (2 bits), d@80, dmin@82; (d * sc) * q - (dmin * mn)
//   q3_K 256 / 110: hmask[32]@0, qs[64]@32 (2 low bits), scales[12]@96 (16 6-bit scales,
//                  minus 32), d@108; q = low - 4 unless the hmask bit is set; (d * sc) * q
//   q4_K 256 / 144: d@0, dmin@2, scales[12]@4 (8 6-bit scales and mins), qs[128]@16;
//                  (d * sc) * q - (dmin * mn) per 32 values
//   q5_K 256 / 176: d@0, dmin@2, scales[12]@4, qh[32]@16, qs[128]@48; as q4_K with 5-bit q
//   q6_K 256 / 210: ql[128]@0, qh[64]@128 (2 high bits), int8 scales[16]@192, d@208;
//                  (d * sc) * (q - 32) per 16 values
// The f32 arithmetic (which products first) is gguf.quants' and ggml's, so the results
// agree bit for bit (tests/parity/quant_dequant_test.py).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "engine/device.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define PARLEY_HD __host__ __device__
#else
#define PARLEY_HD
#endif

namespace parley {

enum class QuantType : uint8_t { q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k };

struct QuantFormat {
  const char* name;     // "q4_K", as ggml spells it
  uint32_t ggml_id;     // the ggml_type id on disk
  int32_t block_size;   // values per block
  int32_t block_bytes;  // bytes per block
};

// Every supported type's facts, indexed by QuantType.
inline constexpr QuantFormat kQuantFormats[] = {
    {"q4_0", 2, 32, 18},    {"q4_1", 3, 32, 20},    {"q5_0", 6, 32, 22},    {"q5_1", 7, 32, 24},
    {"q8_0", 8, 32, 34},    {"q2_K", 10, 256, 84},  {"q3_K", 11, 256, 110}, {"q4_K", 12, 256, 144},
    {"q5_K", 13, 256, 176}, {"q6_K", 14, 256, 210},
};
inline constexpr int kQuantTypeCount = 10;

constexpr const QuantFormat& quant_format(QuantType t) { return kQuantFormats[int(t)]; }
inline std::string_view quant_type_name(QuantType t) { return quant_format(t).name; }
// The QuantType of a ggml type id, if parley's quantized kernels take it.
std::optional<QuantType> quant_type_from_ggml(uint32_t ggml_id);

// Dequantizes n_blocks whole blocks of type t into block_size * n_blocks floats.
void dequantize_blocks(QuantType t, const uint8_t* blocks, int64_t n_blocks, float* out);

// A [rows, cols] weight in t's blocks, row-major: row r is cols / block_size blocks at
// data + r * row_bytes(). Its memory belongs to `owner` (an mmap'ed file, a device buffer),
// which the matrix keeps alive. rows = N (out features), cols = K (in features).
//
// packed (q4_K on the CPU only, made by pack_q4_k_x8): the rows regrouped eight at a time so
// that the fast path's 8 int32 lanes are 8 weight rows. Group g (rows 8g..8g+7) is nb
// blocks of kQ4kX8Bytes at data + g * 8 * row_bytes(); block b of the group holds, for
// its 8 rows r, in bytes:
//   0    d[r] (f16, 8 x 2)      16   dmin[r] (f16, 8 x 2)
//   32   scales, pair p = 0..3: 16 bytes, sc(2p) of rows 0..7 then sc(2p + 1) of rows 0..7
//   96   mins, pair p: 16 bytes, mn(2p), mn(2p + 1) of row 0, then of row 1, ...
//   160  qs, chunk (p, t) for p = 0..3, t = 0..7: 32 bytes, row r's bytes 4r..4r+3 are the
//        block's qs[32p + 4t .. 32p + 4t + 3] (low nibbles: values 64p + 4t.., sub-block 2p;
//        high nibbles: values 64p + 32 + 4t.., sub-block 2p + 1)
// (the 6-bit scales and mins unpacked to bytes: 148 bytes per row and block against 144).
// The packing is lossless: quant_row_blocks gives a row's original blocks back.
struct QuantMatrix {
  QuantType type = QuantType::q8_0;
  int64_t rows = 0;
  int64_t cols = 0;  // a multiple of the block size
  const uint8_t* data = nullptr;
  std::shared_ptr<const void> owner;
  Device device = Device::cpu;
  bool packed = false;  // q4_K in 8-row groups (above); rows a multiple of 8

  int64_t blocks_per_row() const { return cols / quant_format(type).block_size; }
  // Bytes of one row's blocks as ggml stores them.
  int64_t block_row_bytes() const { return blocks_per_row() * quant_format(type).block_bytes; }
  // Bytes per row in memory (packed: a group's bytes / 8).
  int64_t row_bytes() const;
  int64_t nbytes() const { return rows * row_bytes(); }
  std::string describe() const;  // "q4_K[4096, 4096] cpu", "... cpu x8"
};

// The packed q4_K layout's facts.
inline constexpr int kQ4kX8Rows = 8;
inline constexpr int kQ4kX8Bytes = 1184;  // one block of one group
inline int64_t QuantMatrix::row_bytes() const {
  return packed ? blocks_per_row() * kQ4kX8Bytes / kQ4kX8Rows : block_row_bytes();
}

// m (q4_K on the CPU, rows a multiple of 8, not packed) regrouped into memory of its own.
QuantMatrix pack_q4_k_x8(const QuantMatrix& m);
// Row j's blocks as ggml stores them: a pointer into m's memory, or (packed) the row
// rebuilt into `scratch` (block_row_bytes() bytes), which is returned.
const uint8_t* quant_row_blocks(const QuantMatrix& m, int64_t j, uint8_t* scratch);
// Rows [r0, r0 + n) of m, the same memory (packed: r0 and n multiples of 8).
QuantMatrix quant_rows(const QuantMatrix& m, int64_t r0, int64_t n);

// Checks that `bytes` blocks hold a [rows, cols] matrix of type t (cols a multiple of the
// block size, bytes the exact count) and wraps them, under `owner`; errors name `source`.
QuantMatrix quant_matrix(QuantType t, int64_t rows, int64_t cols, const void* data, int64_t bytes,
                         std::shared_ptr<const void> owner, Device device = Device::cpu,
                         std::string_view source = "quant");
// A copy of m's bytes on `device` (its own memory; not for packed matrices, which are CPU-only).
QuantMatrix quant_matrix_to(const QuantMatrix& m, Device device);

class Tensor;
// w (f32 [rows, cols] on the CPU, contiguous, cols a multiple of 32) in q8_0 blocks of its
// own memory: per 32 values d = max|x| / 127, stored as f16, and q = round(x / d) with the
// unrounded d, as ggml's reference quantizer (quantize_row_q8_0_ref) computes them.
QuantMatrix quantize_q8_0(const Tensor& w);

// ---- Element decoding, on the host and in CUDA kernels alike (one value at a time; the
// block loops in quant.cpp are the fast host form of the same arithmetic, and a test
// checks that the two agree for every type).

PARLEY_HD inline float quant_f16(const uint8_t* p) {
  const uint32_t h = uint32_t(p[0]) | (uint32_t(p[1]) << 8);
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(uint16_t(h)));  // exact, as the bit decoding below
#endif
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: man * 2^-24, normalized
    uint32_t e = 113;
    while (!(man & 0x400u)) {
      man <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

// The 6-bit scale and min j (0..7) of a q4_K / q5_K block's 12 scale bytes.
PARLEY_HD inline void quant_k4_scale_min(const uint8_t* s, int j, int& sc, int& mn) {
  if (j < 4) {
    sc = s[j] & 63;
    mn = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// The 6-bit scale j (0..15) of a q3_K block's 12 scale bytes, minus 32.
PARLEY_HD inline int quant_k3_scale(const uint8_t* s, int j) {
  const int lo = j < 8 ? (s[j] & 15) : (s[j - 8] >> 4);
  const int hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
  return (lo | (hi << 4)) - 32;
}

// Value i (0 <= i < block_size) of the block at `blk`.
PARLEY_HD inline float quant_value(QuantType t, const uint8_t* blk, int i) {
  switch (t) {
    case QuantType::q4_0: {
      const int q = i < 16 ? (blk[2 + i] & 15) : (blk[2 + i - 16] >> 4);
      return quant_f16(blk) * float(q - 8);
    }
    case QuantType::q4_1: {
      const int q = i < 16 ? (blk[4 + i] & 15) : (blk[4 + i - 16] >> 4);
      return quant_f16(blk) * float(q) + quant_f16(blk + 2);
    }
    case QuantType::q5_0: {
      const uint32_t qh = uint32_t(blk[2]) | (uint32_t(blk[3]) << 8) | (uint32_t(blk[4]) << 16) |
                          (uint32_t(blk[5]) << 24);
      const int lo = i < 16 ? (blk[6 + i] & 15) : (blk[6 + i - 16] >> 4);
      return quant_f16(blk) * float((lo | int((qh >> i) & 1) << 4) - 16);
    }
    case QuantType::q5_1: {
      const uint32_t qh = uint32_t(blk[4]) | (uint32_t(blk[5]) << 8) | (uint32_t(blk[6]) << 16) |
                          (uint32_t(blk[7]) << 24);
      const int lo = i < 16 ? (blk[8 + i] & 15) : (blk[8 + i - 16] >> 4);
      return quant_f16(blk) * float(lo | int((qh >> i) & 1) << 4) + quant_f16(blk + 2);
    }
    case QuantType::q8_0: return float(int8_t(blk[2 + i])) * quant_f16(blk);
    case QuantType::q2_k: {
      const int sc = blk[i / 16];
      const int j = i % 128;
      const int q = (blk[16 + 32 * (i / 128) + j % 32] >> (2 * (j / 32))) & 3;
      return quant_f16(blk + 80) * float(sc & 15) * float(q) - quant_f16(blk + 82) * float(sc >> 4);
    }
    case QuantType::q3_k: {
      const int j = i % 128;
      const int lo = (blk[32 + 32 * (i / 128) + j % 32] >> (2 * (j / 32))) & 3;
      const int hbit = (blk[i % 32] >> (i / 32)) & 1;
      const float dl = quant_f16(blk + 108) * float(quant_k3_scale(blk + 96, i / 16));
      return dl * float(lo - (hbit ? 0 : 4));
    }
    case QuantType::q4_k:
    case QuantType::q5_k: {
      int sc, mn;
      quant_k4_scale_min(blk + 4, i / 32, sc, mn);
      const uint8_t* qs = blk + (t == QuantType::q4_k ? 16 : 48);
      int q = (qs[32 * (i / 64) + i % 32] >> (4 * ((i / 32) & 1))) & 15;
      if (t == QuantType::q5_k) q |= ((blk[16 + i % 32] >> (i / 32)) & 1) << 4;
      return quant_f16(blk) * float(sc) * float(q) - quant_f16(blk + 2) * float(mn);
    }
    case QuantType::q6_k: {
      const int half = i / 128, j = i % 128, k = j / 32, l = j % 32;
      const uint8_t lb = blk[64 * half + (k & 1) * 32 + l];
      const int lo = k < 2 ? (lb & 15) : (lb >> 4);
      const int hi = (blk[128 + 32 * half + l] >> (2 * k)) & 3;
      const float dl = quant_f16(blk + 208) * float(int8_t(blk[192 + i / 16]));
      return dl * float((lo | (hi << 4)) - 32);
    }
  }
  return 0.0f;
}

}  // namespace parley
