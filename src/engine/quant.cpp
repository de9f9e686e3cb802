// Block dequantization on the host (per block, the arithmetic of quant_value in quant.h)
// and the QuantMatrix helpers.
#include "engine/quant.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/error.h"
#include "engine/tensor.h"
#include "engine/threadpool.h"

namespace parley {

namespace {

// 16 values of nibbles: out[i] = low nibble of qs[i], out[16 + i] = high nibble.
inline void split_nibbles16(const uint8_t* qs, int* q) {
  for (int i = 0; i < 16; ++i) {
    q[i] = qs[i] & 15;
    q[16 + i] = qs[i] >> 4;
  }
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void dq_q4_0(const uint8_t* b, float* y) {
  const float d = quant_f16(b);
  int q[32];
  split_nibbles16(b + 2, q);
  for (int i = 0; i < 32; ++i) y[i] = d * float(q[i] - 8);
}

void dq_q4_1(const uint8_t* b, float* y) {
  const float d = quant_f16(b), m = quant_f16(b + 2);
  int q[32];
  split_nibbles16(b + 4, q);
  for (int i = 0; i < 32; ++i) y[i] = d * float(q[i]) + m;
}

void dq_q5_0(const uint8_t* b, float* y) {
  const float d = quant_f16(b);
  const uint32_t qh = load_u32(b + 2);
  int q[32];
  split_nibbles16(b + 6, q);
  for (int i = 0; i < 32; ++i) y[i] = d * float((q[i] | int((qh >> i) & 1) << 4) - 16);
}

void dq_q5_1(const uint8_t* b, float* y) {
  const float d = quant_f16(b), m = quant_f16(b + 2);
  const uint32_t qh = load_u32(b + 4);
  int q[32];
  split_nibbles16(b + 8, q);
  for (int i = 0; i < 32; ++i) y[i] = d * float(q[i] | int((qh >> i) & 1) << 4) + m;
}

void dq_q8_0(const uint8_t* b, float* y) {
  const float d = quant_f16(b);
  for (int i = 0; i < 32; ++i) y[i] = float(int8_t(b[2 + i])) * d;
}

void dq_q2_k(const uint8_t* b, float* y) {
  const float d = quant_f16(b + 80), dmin = quant_f16(b + 82);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* qs = b + 16 + 32 * half;
    for (int s = 0; s < 4; ++s) {
      for (int g = 0; g < 2; ++g) {  // two groups of 16 with their own scale
        const int sc = b[8 * half + 2 * s + g];
        const float dl = d * float(sc & 15), ml = dmin * float(sc >> 4);
        for (int l = 16 * g; l < 16 * g + 16; ++l) *y++ = dl * float((qs[l] >> (2 * s)) & 3) - ml;
      }
    }
  }
}

void dq_q3_k(const uint8_t* b, float* y) {
  const float d = quant_f16(b + 108);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* qs = b + 32 + 32 * half;
    for (int s = 0; s < 4; ++s) {
      const int hshift = 4 * half + s;
      for (int g = 0; g < 2; ++g) {
        const float dl = d * float(quant_k3_scale(b + 96, 8 * half + 2 * s + g));
        for (int l = 16 * g; l < 16 * g + 16; ++l) {
          const int lo = (qs[l] >> (2 * s)) & 3;
          *y++ = dl * float(lo - (((b[l] >> hshift) & 1) ? 0 : 4));
        }
      }
    }
  }
}

// q4_K and q5_K: 8 groups of 32, (d * sc) * q - (dmin * mn); qh null for q4_K.
void dq_k4(const uint8_t* b, const uint8_t* qs, const uint8_t* qh, float* y) {
  const float d = quant_f16(b), dmin = quant_f16(b + 2);
  for (int j = 0; j < 8; ++j) {
    int sc, mn;
    quant_k4_scale_min(b + 4, j, sc, mn);
    const float dl = d * float(sc), ml = dmin * float(mn);
    const uint8_t* q = qs + 32 * (j / 2);
    const int shift = 4 * (j & 1);
    for (int l = 0; l < 32; ++l) {
      int v = (q[l] >> shift) & 15;
      if (qh) v |= ((qh[l] >> j) & 1) << 4;
      *y++ = dl * float(v) - ml;
    }
  }
}

void dq_q6_k(const uint8_t* b, float* y) {
  const float d = quant_f16(b + 208);
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = b + 64 * half;
    const uint8_t* qh = b + 128 + 32 * half;
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t lb = ql[(k & 1) * 32 + l];
        const int lo = k < 2 ? (lb & 15) : (lb >> 4);
        const int hi = (qh[l] >> (2 * k)) & 3;
        const float dl = d * float(sc[8 * half + 2 * k + l / 16]);
        *y++ = dl * float((lo | (hi << 4)) - 32);
      }
    }
  }
}

}  // namespace

std::optional<QuantType> quant_type_from_ggml(uint32_t ggml_id) {
  for (int t = 0; t < kQuantTypeCount; ++t)
    if (kQuantFormats[t].ggml_id == ggml_id) return QuantType(t);
  return std::nullopt;
}

void dequantize_blocks(QuantType t, const uint8_t* blocks, int64_t n_blocks, float* out) {
  const QuantFormat& f = quant_format(t);
  for (int64_t i = 0; i < n_blocks; ++i) {
    const uint8_t* b = blocks + i * f.block_bytes;
    float* y = out + i * f.block_size;
    switch (t) {
      case QuantType::q4_0: dq_q4_0(b, y); break;
      case QuantType::q4_1: dq_q4_1(b, y); break;
      case QuantType::q5_0: dq_q5_0(b, y); break;
      case QuantType::q5_1: dq_q5_1(b, y); break;
      case QuantType::q8_0: dq_q8_0(b, y); break;
      case QuantType::q2_k: dq_q2_k(b, y); break;
      case QuantType::q3_k: dq_q3_k(b, y); break;
      case QuantType::q4_k: dq_k4(b, b + 16, nullptr, y); break;
      case QuantType::q5_k: dq_k4(b, b + 48, b + 16, y); break;
      case QuantType::q6_k: dq_q6_k(b, y); break;
    }
  }
}

std::string QuantMatrix::describe() const {
  return std::string(quant_type_name(type)) + "[" + std::to_string(rows) + ", " +
         std::to_string(cols) + "] " + std::string(device_name(device)) + (packed ? " x8" : "");
}

QuantMatrix pack_q4_k_x8(const QuantMatrix& m) {
  check_arg(
      m.type == QuantType::q4_k && m.device == Device::cpu && !m.packed && m.rows % kQ4kX8Rows == 0,
      "[quant] pack_q4_k_x8 takes an unpacked q4_K CPU matrix whose rows are a multiple "
      "of 8, got " +
          m.describe());
  const int64_t nb = m.blocks_per_row(), groups = m.rows / kQ4kX8Rows;
  auto store = std::make_shared<std::vector<uint8_t>>(size_t(groups * nb * kQ4kX8Bytes));
  const int64_t rb = m.block_row_bytes();
  constexpr int kBlock = quant_format(QuantType::q4_k).block_bytes;
  cpu_threads().parallel_for(groups, 16, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g)
      for (int64_t b = 0; b < nb; ++b) {
        uint8_t* out = store->data() + (g * nb + b) * kQ4kX8Bytes;
        for (int r = 0; r < kQ4kX8Rows; ++r) {
          const uint8_t* blk = m.data + (g * kQ4kX8Rows + r) * rb + b * kBlock;
          std::memcpy(out + 2 * r, blk, 2);
          std::memcpy(out + 16 + 2 * r, blk + 2, 2);
          for (int j = 0; j < 8; ++j) {
            int sc, mn;
            quant_k4_scale_min(blk + 4, j, sc, mn);
            out[32 + 16 * (j / 2) + 8 * (j % 2) + r] = uint8_t(sc);
            out[96 + 16 * (j / 2) + 2 * r + j % 2] = uint8_t(mn);
          }
          for (int c = 0; c < 32; ++c)  // chunk c = 8p + t holds qs[32p + 4t ..]
            std::memcpy(out + 160 + 32 * c + 4 * r, blk + 16 + 4 * c, 4);
        }
      }
  });
  QuantMatrix out = m;
  out.data = store->data();
  out.owner = std::move(store);
  out.packed = true;
  return out;
}

const uint8_t* quant_row_blocks(const QuantMatrix& m, int64_t j, uint8_t* scratch) {
  if (!m.packed) return m.data + j * m.row_bytes();
  const int64_t nb = m.blocks_per_row(), g = j / kQ4kX8Rows;
  const int r = int(j % kQ4kX8Rows);
  constexpr int kBlock = quant_format(QuantType::q4_k).block_bytes;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* in = m.data + (g * nb + b) * kQ4kX8Bytes;
    uint8_t* blk = scratch + b * kBlock;
    std::memcpy(blk, in + 2 * r, 2);
    std::memcpy(blk + 2, in + 16 + 2 * r, 2);
    // quant_k4_scale_min's encoding, inverted: 6-bit scales and mins 0..3 in bytes 0..7
    // with the top two bits of 4..7 above them, the low nibbles of 4..7 in bytes 8..11.
    uint8_t sc[8], mn[8];
    for (int k = 0; k < 8; ++k) {
      sc[k] = in[32 + 16 * (k / 2) + 8 * (k % 2) + r];
      mn[k] = in[96 + 16 * (k / 2) + 2 * r + k % 2];
    }
    uint8_t* s = blk + 4;
    for (int k = 0; k < 4; ++k) {
      s[k] = uint8_t((sc[k] & 63) | ((sc[k + 4] >> 4) << 6));
      s[k + 4] = uint8_t((mn[k] & 63) | ((mn[k + 4] >> 4) << 6));
      s[k + 8] = uint8_t((sc[k + 4] & 15) | ((mn[k + 4] & 15) << 4));
    }
    for (int c = 0; c < 32; ++c) std::memcpy(blk + 16 + 4 * c, in + 160 + 32 * c + 4 * r, 4);
  }
  return scratch;
}

QuantMatrix quant_rows(const QuantMatrix& m, int64_t r0, int64_t n) {
  check_arg(r0 >= 0 && n >= 0 && r0 + n <= m.rows, "[quant] rows [" + std::to_string(r0) + ", " +
                                                       std::to_string(r0 + n) + ") are outside " +
                                                       m.describe());
  check_arg(!m.packed || (r0 % kQ4kX8Rows == 0 && n % kQ4kX8Rows == 0),
            "[quant] rows [" + std::to_string(r0) + ", " + std::to_string(r0 + n) + ") of " +
                m.describe() + " split its 8-row groups");
  QuantMatrix out = m;
  out.rows = n;
  out.data = m.data + r0 * m.row_bytes();
  return out;
}

QuantMatrix quant_matrix(QuantType t, int64_t rows, int64_t cols, const void* data, int64_t bytes,
                         std::shared_ptr<const void> owner, Device device,
                         std::string_view source) {
  const QuantFormat& f = quant_format(t);
  const std::string what = "[" + std::string(source) + "] " + f.name + "[" + std::to_string(rows) +
                           ", " + std::to_string(cols) + "]";
  check_arg(rows >= 0 && cols >= 0, what + ": negative size");
  check_arg(cols % f.block_size == 0,
            what + ": cols must be a multiple of the block size " + std::to_string(f.block_size));
  QuantMatrix m{t, rows, cols, static_cast<const uint8_t*>(data), std::move(owner), device};
  check_arg(bytes == m.nbytes(),
            what + " needs " + std::to_string(m.nbytes()) + " bytes, got " + std::to_string(bytes));
  check_arg(data != nullptr || bytes == 0, what + ": no data");
  return m;
}

QuantMatrix quant_matrix_to(const QuantMatrix& m, Device device) {
  check_arg(!m.packed || device == Device::cpu,
            "[quant] " + m.describe() + " is in the CPU's packed layout; copy the unpacked one");
  const int64_t n = m.nbytes();
  // The bytes as an i8 tensor, so device memory comes from (and is counted by) Tensor.
  auto store = std::make_shared<Tensor>(Tensor::empty({n}, DType::i8, device));
  const Tensor src = Tensor::view(const_cast<uint8_t*>(m.data), {n}, DType::i8, m.device, m.owner);
  store->copy_from(src);
  QuantMatrix out = m;
  out.data = static_cast<const uint8_t*>(store->raw());
  out.owner = store;
  out.device = device;
  return out;
}

QuantMatrix quantize_q8_0(const Tensor& w) {
  check_arg(w.dtype() == DType::f32 && w.device() == Device::cpu && w.ndim() == 2,
            "[quant] quantize_q8_0 takes an f32 [rows, cols] CPU tensor, got " + w.describe());
  const int64_t rows = w.dim(0), cols = w.dim(1);
  check_arg(cols % 32 == 0,
            "[quant] quantize_q8_0: cols " + std::to_string(cols) + " is not a multiple of 32");
  const int64_t blocks = rows * cols / 32;
  auto store = std::make_shared<std::vector<uint8_t>>(size_t(blocks * 34));
  const float* src = w.data<float>();
  uint8_t* dst = store->data();
  // Blocks are independent: split over the CPU threads (a load quantizes whole models).
  cpu_threads().parallel_for(blocks, 256, [&](int64_t begin, int64_t end) {
    const float* x = src + begin * 32;
    uint8_t* out = dst + begin * 34;
    for (int64_t b = begin; b < end; ++b, x += 32, out += 34) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      const uint16_t h = f32_to_f16(d);
      out[0] = uint8_t(h & 0xff);
      out[1] = uint8_t(h >> 8);
      for (int i = 0; i < 32; ++i) {
        // Half away from zero, as lround (|t| <= 127, so t - trunc(t) is exact), inline.
        const float t = x[i] * id;
        int v = int(t);
        if (std::fabs(t - float(v)) >= 0.5f) v += t > 0.0f ? 1 : -1;
        out[2 + i] = uint8_t(int8_t(v));
      }
    }
  });
  const uint8_t* data = store->data();
  return quant_matrix(QuantType::q8_0, rows, cols, data, blocks * 34, std::move(store), Device::cpu,
                      "quantize_q8_0");
}

}  // namespace parley
