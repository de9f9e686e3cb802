// CPU matmul_quant (ops/quant_matmul.h): the f32 reference and the AVX2 8-bit fast path.
// The fast path is llama.cpp's scheme written afresh: a's rows are quantized once per call
// (QuantizedRows), then register tiles of up to kTileRows activation rows by up to
// kTileCols weight rows (the 32-value types; the K-quants R x 1) unpack each weight block
// once for the tile's rows and load each activation block once for its weight rows
// (_mm256_maddubs_epi16 pairs, _mm256_madd_epi16 to int32); the int32 lanes are scaled into
// one f32 accumulator vector per output element, summed at the end. A thread walks its
// slice of w in kWeightBlock pieces, each against every row tile (GEMM-style blocking).
// An element's arithmetic never depends on the tile it is computed in, so results are
// batch invariant.
#include "engine/ops/quant_matmul.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "engine/cpu/avx2.h"
#include "engine/cpu/cpu_common.h"
#include "engine/cpu/vec_math.h"
#include "engine/threadpool.h"

namespace parley::cpu {

namespace {

// Activation rows per group in the reference's chunk size.
constexpr int kRowGroup = 4;
// Bytes ahead of the block being read that the kernels prefetch: the hardware prefetcher
// alone left M = 1 well below the machine's plain streaming rate.
constexpr int kPrefetch = 2048;

// out (f32 dot) -> c[m, n] with the bias and beta of opt.
inline void store(float* c, int64_t idx, float dot, const float* bias, int64_t n, float beta) {
  float v = bias ? dot + bias[n] : dot;
  c[idx] = beta != 0.0f ? v + beta * c[idx] : v;
}

// Rows of w per parallel_for chunk: about 64 KiB of weights per activation-row group.
int64_t column_grain(const QuantMatrix& w, int64_t m) {
  const int64_t groups = (m + kRowGroup - 1) / kRowGroup;
  return std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(1, w.row_bytes() * groups));
}

void matmul_reference(const Tensor& a, const QuantMatrix& w, Tensor& c,
                      const MatmulQuantOptions& opt) {
  const int64_t m = a.dim(0), n = w.rows, k = w.cols;
  const int64_t nb = k / quant_format(w.type).block_size;
  const float* pa = a.data<float>();
  float* pc = c.data<float>();
  const float* bias = opt.bias ? opt.bias->data<float>() : nullptr;
  cpu_threads().parallel_for(n, column_grain(w, m), [&](int64_t n0, int64_t n1) {
    std::vector<float> row(static_cast<size_t>(k));
    std::vector<uint8_t> blocks(size_t(w.packed ? w.block_row_bytes() : 0));
    for (int64_t j = n0; j < n1; ++j) {
      dequantize_blocks(w.type, quant_row_blocks(w, j, blocks.data()), nb, row.data());
      for (int64_t i = 0; i < m; ++i) {
        const float* x = pa + i * k;
        float s = 0.0f;
        for (int64_t t = 0; t < k; ++t) s += x[t] * row[size_t(t)];
        store(pc, i * n + j, s, bias, j, opt.beta);
      }
    }
  });
}

// ---- The fast path.

bool is_k_quant(QuantType t) { return quant_format(t).block_size == 256; }

// a's rows in 8 bits: q [M, K] int8 in [-127, 127] with scale d per group of 32 (the 32-value
// types) or 256 (the K-quants); s = d * sum(q) per 32 (for the q4_1 / q5_1 mins) and the
// int16 sum of q per 16 (for the K-quants' mins and q6_K's offset).
struct QuantizedRows {
  int64_t k = 0;
  int64_t group = 32;
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<float> s;
  std::vector<int16_t> bsums;
  std::vector<int16_t> bsums32;  // the sum of q per 32
  const int8_t* q_row(int64_t i) const { return q.data() + i * k; }
  const float* d_row(int64_t i) const { return d.data() + i * (k / group); }
  const float* s_row(int64_t i) const { return s.data() + i * (k / 32); }
  const int16_t* bsums_row(int64_t i) const { return bsums.data() + i * (k / 16); }
  const int16_t* bsums32_row(int64_t i) const { return bsums32.data() + i * (k / 32); }
};

PARLEY_AVX2 inline int hsum_epi32(__m256i v) {
  __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  x = _mm_add_epi32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(1, 0, 3, 2)));
  x = _mm_add_epi32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(x);
}

PARLEY_AVX2 inline int hsum_epi32_128(__m128i x) {
  x = _mm_add_epi32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(1, 0, 3, 2)));
  x = _mm_add_epi32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(x);
}

// 32 floats times id, rounded to int8 in order; the int32 sums of values 0..15 and 16..31.
PARLEY_AVX2 inline void quantize32(const float* x, float id, int8_t* q, int& sum_lo, int& sum_hi) {
  const __m256 mul = _mm256_set1_ps(id);
  __m256i v[4];
  for (int j = 0; j < 4; ++j) {
    const __m256 f = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * j), mul);
    v[j] = _mm256_cvtps_epi32(_mm256_round_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  sum_lo = hsum_epi32(_mm256_add_epi32(v[0], v[1]));
  sum_hi = hsum_epi32(_mm256_add_epi32(v[2], v[3]));
  // The packs interleave 128-bit lanes; the permute puts the 4-byte groups back in order.
  const __m256i p =
      _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

// Row i of a into out (sized by quantize_rows).
PARLEY_AVX2 void quantize_row(const float* a, int64_t i, QuantizedRows& out) {
  const int64_t k = out.k, group = out.group;
  const float* x = a + i * k;
  for (int64_t g = 0; g < k / group; ++g) {
    const float amax = max_abs(x + g * group, group);
    const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
    out.d[size_t(i * (k / group) + g)] = d;
    for (int64_t b = g * group; b < (g + 1) * group; b += 32) {
      int lo, hi;
      quantize32(x + b, id, out.q.data() + i * k + b, lo, hi);
      out.s[size_t(i * (k / 32) + b / 32)] = d * float(lo + hi);
      out.bsums[size_t(i * (k / 16) + b / 16)] = int16_t(lo);
      out.bsums[size_t(i * (k / 16) + b / 16 + 1)] = int16_t(hi);
      out.bsums32[size_t(i * (k / 32) + b / 32)] = int16_t(lo + hi);
    }
  }
}

// Rows are independent: the pool splits them at prefill (one thread at M = 1).
void quantize_rows(const float* a, int64_t m, int64_t k, int64_t group, QuantizedRows& out) {
  out.k = k;
  out.group = group;
  out.q.resize(size_t(m * k));
  out.d.resize(size_t(m * (k / group)));
  out.s.resize(size_t(m * (k / 32)));
  out.bsums.resize(size_t(m * (k / 16)));
  out.bsums32.resize(size_t(m * (k / 32)));
  cpu_threads().parallel_for(m, 8, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) quantize_row(a, i, out);
  });
}

PARLEY_AVX2 inline float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

PARLEY_AVX2 inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// 16 bytes of nibbles as 32 bytes: low nibbles first (values 0..15), then the high ones.
PARLEY_AVX2 inline __m256i nibbles32(const uint8_t* qs) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), _mm256_set1_epi8(15));
}

// Bit i of the 32-bit qh as byte i: 0x10 when set, else 0.
PARLEY_AVX2 inline __m256i high_bits32(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101,
                                         0x0000000000000000);
  const __m256i sel = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  const __m256i x = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(int(bits)), shuf), sel);
  return _mm256_and_si256(_mm256_cmpeq_epi8(x, sel), _mm256_set1_epi8(0x10));
}

// The _mm256_shuffle_epi8 control that copies int16 word w of each lane to all 8 words.
PARLEY_AVX2 inline __m256i word_bcast(int w) {
  return _mm256_set1_epi16(int16_t(0x0100 + 0x0202 * w));
}

// 8 int32 lane sums of signed w times signed a (|a| <= 127, so the sign trick is exact).
PARLEY_AVX2 inline __m256i dot_signed(__m256i w, __m256i a) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// The same for unsigned w (0..63) times signed a.
PARLEY_AVX2 inline __m256i dot_unsigned(__m256i w, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1));
}

// ---- Kernels. A tile kernel computes out[r * C + c] = dot of weight row c (w + c * ld, nb
// blocks) with activation row m0 + r, for R activation rows and C weight rows: each weight
// block is unpacked once for the R rows and each activation block loaded once for the C
// weight rows. Every output element is one accumulator updated block by block with the same
// instructions whatever R and C, so a tile's shape never changes a result.

// a * b + c in one rounding, so the compiler cannot choose per call site.
PARLEY_AVX2 inline float fmadd(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

// The 32-value types: per block an int32 dot (maddubs, madd) times d_w * d_a into the
// element's f32 accumulator; q4_1 / q5_1 add m_w * (d_a * sum a) per block.
template <QuantType T, int R, int C>
PARLEY_AVX2 void tile_32(const uint8_t* w, int64_t ld, int64_t nb, const QuantizedRows& x,
                         int64_t m0, float* out) {
  constexpr int kBytes = quant_format(T).block_bytes;
  constexpr bool kMin = T == QuantType::q4_1 || T == QuantType::q5_1;
  __m256 acc[R][C];
  float mins[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      acc[r][c] = _mm256_setzero_ps();
      mins[r][c] = 0.0f;
    }
  const int8_t* aq = x.q_row(m0);
  const float* ad = x.d_row(m0);
  const float* as = x.s_row(m0);
  const int64_t k = x.k, kd = x.k / x.group;
  // The C rows are read side by side: prefetch the next tile's rows at least kPrefetch ahead.
  const int64_t ahead = std::max<int64_t>(kPrefetch, C * ld);
  for (int64_t b = 0; b < nb; ++b) {
    __m256i q[C], u[C];
    __m256 dw[C];
    float mw[C];
    for (int c = 0; c < C; ++c) {
      const uint8_t* blk = w + c * ld + b * kBytes;
      _mm_prefetch(reinterpret_cast<const char*>(blk) + ahead, _MM_HINT_T0);
      dw[c] = _mm256_set1_ps(f16_at(blk));
      if constexpr (kMin) mw[c] = f16_at(blk + 2);
      if constexpr (T == QuantType::q8_0) {
        q[c] = load256(blk + 2);
      } else if constexpr (T == QuantType::q4_0) {
        q[c] = _mm256_sub_epi8(nibbles32(blk + 2), _mm256_set1_epi8(8));
      } else if constexpr (T == QuantType::q4_1) {
        q[c] = nibbles32(blk + 4);
      } else if constexpr (T == QuantType::q5_0) {
        q[c] = _mm256_sub_epi8(_mm256_or_si256(nibbles32(blk + 6), high_bits32(blk + 2)),
                               _mm256_set1_epi8(16));
      } else {
        q[c] = _mm256_or_si256(nibbles32(blk + 8), high_bits32(blk + 4));
      }
      // maddubs takes one unsigned side: |w| against a with w's signs (|a| <= 127: exact).
      u[c] = kMin ? q[c] : _mm256_sign_epi8(q[c], q[c]);
    }
    for (int r = 0; r < R; ++r) {
      const __m256i a = load256(aq + r * k + 32 * b);
      const __m256 da = _mm256_broadcast_ss(ad + r * kd + b);
      for (int c = 0; c < C; ++c) {
        const __m256i sa = kMin ? a : _mm256_sign_epi8(a, q[c]);
        const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(u[c], sa), _mm256_set1_epi16(1));
        acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw[c], da), acc[r][c]);
        if constexpr (kMin) mins[r][c] = fmadd(mw[c], as[r * (k / 32) + b], mins[r][c]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) out[r * C + c] = hsum8(acc[r][c]) + mins[r][c];
}

// q4_K and q5_K: 8 groups of 32 with 6-bit scales and mins.
template <QuantType T, int R>
PARLEY_AVX2 void dot_k4(const uint8_t* w, int64_t nb, const QuantizedRows& x, int64_t m0,
                        float* out) {
  constexpr bool kQ5 = T == QuantType::q5_k;
  constexpr int kBytes = quant_format(T).block_bytes;
  const __m256i low4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
  float acc[R], mins[R];
  for (int r = 0; r < R; ++r) acc[r] = mins[r] = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w + b * kBytes;
    _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetch, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetch + 64, _MM_HINT_T0);
    const float d = f16_at(blk), dmin = f16_at(blk + 2);
    // The 8 scales and 8 mins, 6 bits each in 12 bytes (quant_k4_scale_min), four at a time.
    uint32_t s3[3], sc[2], mn[2];
    std::memcpy(s3, blk + 4, 12);
    sc[0] = s3[0] & 0x3f3f3f3fu;
    mn[0] = s3[1] & 0x3f3f3f3fu;
    sc[1] = (s3[2] & 0x0f0f0f0fu) | (((s3[0] >> 6) & 0x03030303u) << 4);
    mn[1] = ((s3[2] >> 4) & 0x0f0f0f0fu) | (((s3[1] >> 6) & 0x03030303u) << 4);
    // The 8 scales as int16 in both 128-bit lanes; word_bcast picks one for all 16 lanes.
    const __m128i sc8 = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, int(sc[1]), int(sc[0])));
    const __m256i scales = _mm256_set_m128i(sc8, sc8);
    const __m128i mins16 = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, int(mn[1]), int(mn[0])));
    const uint8_t* qs = blk + (kQ5 ? 48 : 16);
    __m256i hb = kQ5 ? load256(blk + 16) : _mm256_setzero_si256();
    __m256i isum[R];
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      const __m256i raw = load256(qs + 32 * p);
      __m256i lo = _mm256_and_si256(raw, low4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
      if constexpr (kQ5) {
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hb, one), 4));
        hb = _mm256_srli_epi16(hb, 1);
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(hb, one), 4));
        hb = _mm256_srli_epi16(hb, 1);
      }
      const __m256i s_lo = _mm256_shuffle_epi8(scales, word_bcast(2 * p));
      const __m256i s_hi = _mm256_shuffle_epi8(scales, word_bcast(2 * p + 1));
      for (int r = 0; r < R; ++r) {
        const int8_t* a = x.q_row(m0 + r) + 256 * b + 64 * p;
        const __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load256(a)), s_lo);
        const __m256i phi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load256(a + 32)), s_hi);
        isum[r] = _mm256_add_epi32(isum[r], _mm256_add_epi32(plo, phi));
      }
    }
    for (int r = 0; r < R; ++r) {
      const float ad = x.d_row(m0 + r)[b];
      const __m128i bs =
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.bsums32_row(m0 + r) + 8 * b));
      const int msum = hsum_epi32_128(_mm_madd_epi16(mins16, bs));
      // The block's exact integer sums, then one f32 fma each: the packed q4_K kernel's
      // arithmetic lane for lane, so a row's result is the same in either layout.
      acc[r] = fmadd(float(hsum_epi32(isum[r])), d * ad, acc[r]);
      mins[r] = fmadd(float(msum), dmin * ad, mins[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = acc[r] - mins[r];
}

// q4_K packed eight rows to a group (engine/quant.h): R activation rows against the group's
// 8 weight rows, one weight row per int32 lane. Per sub-block pair and chunk, the 4 bytes of
// each row are multiplied (maddubs) against 4 activation bytes broadcast to every lane; the
// int16 pair sums of a sub-block's 8 chunks stay below 8 * 2 * 15 * 127 = 30480, then one
// madd applies the rows' 6-bit scales. The per-block sums are exact integers and the f32
// steps are dot_k4's, so results equal the unpacked layout's bit for bit.
template <int R>
PARLEY_AVX2 void dot_q4k_x8(const uint8_t* g, int64_t nb, const QuantizedRows& x, int64_t m0,
                            float* out) {
  const __m256i low4 = _mm256_set1_epi8(15);
  __m256 acc[R], mins[R];
  for (int r = 0; r < R; ++r) acc[r] = mins[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = g + b * kQ4kX8Bytes;
    __m256i isum[R], msum[R];
    for (int r = 0; r < R; ++r) isum[r] = msum[r] = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      for (int l = 0; l < 5; ++l)
        _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetch + 320 * p + 64 * l,
                     _MM_HINT_T0);
      const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 32 + 16 * p));
      const __m128i mn = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 96 + 16 * p));
      const uint8_t* qs = blk + 160 + 256 * p;
      for (int half = 0; half < 2; ++half) {
        __m256i s16[R];
        for (int r = 0; r < R; ++r) s16[r] = _mm256_setzero_si256();
        for (int t = 0; t < 8; ++t) {
          const __m256i raw = load256(qs + 32 * t);
          const __m256i q = half ? _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4)
                                 : _mm256_and_si256(raw, low4);
          for (int r = 0; r < R; ++r) {
            int32_t a4;
            std::memcpy(&a4, x.q_row(m0 + r) + 256 * b + 64 * p + 32 * half + 4 * t, 4);
            s16[r] = _mm256_add_epi16(s16[r], _mm256_maddubs_epi16(q, _mm256_set1_epi32(a4)));
          }
        }
        // Each row's scale in both int16 halves of its lane.
        const __m256i s =
            _mm256_cvtepu8_epi16(half ? _mm_unpackhi_epi8(sc, sc) : _mm_unpacklo_epi8(sc, sc));
        for (int r = 0; r < R; ++r)
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(s16[r], s));
      }
      const __m256i mn16 = _mm256_cvtepu8_epi16(mn);
      for (int r = 0; r < R; ++r) {
        int32_t bs2;  // a's sums over sub-blocks 2p and 2p + 1
        std::memcpy(&bs2, x.bsums32_row(m0 + r) + 8 * b + 2 * p, 4);
        msum[r] = _mm256_add_epi32(msum[r], _mm256_madd_epi16(mn16, _mm256_set1_epi32(bs2)));
      }
    }
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
    const __m256 dmin =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16)));
    for (int r = 0; r < R; ++r) {
      const __m256 ad = _mm256_set1_ps(x.d_row(m0 + r)[b]);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_mul_ps(d, ad), acc[r]);
      mins[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum[r]), _mm256_mul_ps(dmin, ad), mins[r]);
    }
  }
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(out + 8 * r, _mm256_sub_ps(acc[r], mins[r]));
}

// q6_K: 16 groups of 16 with int8 scales; q - 32 as q times a minus 32 times a's sums.
template <QuantType, int R>
PARLEY_AVX2 void dot_q6_k(const uint8_t* w, int64_t nb, const QuantizedRows& x, int64_t m0,
                          float* out) {
  const __m256i low4 = _mm256_set1_epi8(15), low2 = _mm256_set1_epi8(3);
  __m256 acc[R];
  float offs[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    offs[r] = 0.0f;
  }
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w + b * 210;
    for (int l = 0; l < 210; l += 64)
      _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetch + l, _MM_HINT_T0);
    const float d = f16_at(blk + 208);
    const auto* sc = reinterpret_cast<const int8_t*>(blk + 192);
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
    __m256i isum[R];
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
    for (int half = 0; half < 2; ++half) {
      const __m256i ql0 = load256(blk + 64 * half), ql1 = load256(blk + 64 * half + 32);
      const __m256i qh = load256(blk + 128 + 32 * half);
      const __m128i sc8 =
          _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + 8 * half)));
      const __m256i scales = _mm256_set_m128i(sc8, sc8);
      for (int k = 0; k < 4; ++k) {
        const __m256i ql = k & 1 ? ql1 : ql0;
        const __m256i lo =
            k < 2 ? _mm256_and_si256(ql, low4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), low4);
        const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k)), low2);
        const __m256i q = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
        // Values 0-15 of the 32 take scale 2k of this half, 16-31 scale 2k + 1.
        const __m256i s = _mm256_shuffle_epi8(
            scales, _mm256_set_m128i(_mm256_castsi256_si128(word_bcast(2 * k + 1)),
                                     _mm256_castsi256_si128(word_bcast(2 * k))));
        for (int r = 0; r < R; ++r) {
          const __m256i a = load256(x.q_row(m0 + r) + 256 * b + 128 * half + 32 * k);
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), s));
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const float ad = x.d_row(m0 + r)[b];
      const __m256i bs = load256(x.bsums_row(m0 + r) + 16 * b);
      const int off = hsum_epi32(_mm256_madd_epi16(sc16, bs));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_set1_ps(d * ad), acc[r]);
      offs[r] += d * ad * float(32 * off);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum8(acc[r]) - offs[r];
}

// q2_K and q3_K: 16 groups of 16, 2-bit q (q3_K: plus the hmask bit, q - 4 unless set) with
// 4-bit scale and min (q2_K) or a 6-bit signed scale (q3_K). q3_K's q + 4 (0..7) goes
// through maddubs and 4 times the scaled sums of a come off.
template <QuantType T, int R>
PARLEY_AVX2 void dot_k23(const uint8_t* w, int64_t nb, const QuantizedRows& x, int64_t m0,
                         float* out) {
  constexpr bool kQ3 = T == QuantType::q3_k;
  constexpr int kBytes = quant_format(T).block_bytes;
  const __m256i low2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  __m256 acc[R];
  float offs[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    offs[r] = 0.0f;
  }
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w + b * kBytes;
    _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetch, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetch + 64, _MM_HINT_T0);
    float d, dmin = 0.0f;
    __m128i sc8x16;  // the 16 scales as bytes
    __m256i mins16 = _mm256_setzero_si256();
    if constexpr (kQ3) {
      d = f16_at(blk + 108);
      uint32_t s3[3], sc[4];
      std::memcpy(s3, blk + 96, 12);
      sc[0] = (s3[0] & 0x0f0f0f0fu) | ((s3[2] & 0x03030303u) << 4);
      sc[1] = (s3[1] & 0x0f0f0f0fu) | (((s3[2] >> 2) & 0x03030303u) << 4);
      sc[2] = ((s3[0] >> 4) & 0x0f0f0f0fu) | (((s3[2] >> 4) & 0x03030303u) << 4);
      sc[3] = ((s3[1] >> 4) & 0x0f0f0f0fu) | (((s3[2] >> 6) & 0x03030303u) << 4);
      sc8x16 =
          _mm_sub_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)), _mm_set1_epi8(32));
    } else {
      d = f16_at(blk + 80);
      dmin = f16_at(blk + 82);
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk));
      sc8x16 = _mm_and_si128(raw, _mm_set1_epi8(15));
      mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(15)));
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8x16);  // q2_K's scales are below 16: no sign
    const uint8_t* qs = blk + (kQ3 ? 32 : 16);
    __m256i isum[R];
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
    for (int half = 0; half < 2; ++half) {
      const __m256i raw = load256(qs + 32 * half);
      const __m256i hm = kQ3 ? load256(blk) : _mm256_setzero_si256();
      const __m128i half_sc =
          half ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16);
      const __m256i scales = _mm256_set_m128i(half_sc, half_sc);
      for (int k = 0; k < 4; ++k) {
        __m256i q = _mm256_and_si256(_mm256_srl_epi16(raw, _mm_cvtsi32_si128(2 * k)), low2);
        if constexpr (kQ3) {
          const __m256i bit =
              _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(4 * half + k)), one);
          q = _mm256_or_si256(q, _mm256_slli_epi16(bit, 2));
        }
        const __m256i s = _mm256_shuffle_epi8(
            scales, _mm256_set_m128i(_mm256_castsi256_si128(word_bcast(2 * k + 1)),
                                     _mm256_castsi256_si128(word_bcast(2 * k))));
        for (int r = 0; r < R; ++r) {
          const __m256i a = load256(x.q_row(m0 + r) + 256 * b + 128 * half + 32 * k);
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), s));
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const float ad = x.d_row(m0 + r)[b];
      const __m256i bs = load256(x.bsums_row(m0 + r) + 16 * b);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_set1_ps(d * ad), acc[r]);
      if constexpr (kQ3)
        offs[r] += d * ad * float(4 * hsum_epi32(_mm256_madd_epi16(sc16, bs)));
      else
        offs[r] += dmin * ad * float(hsum_epi32(_mm256_madd_epi16(mins16, bs)));
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum8(acc[r]) - offs[r];
}

// The K-quants as R x 1 tiles (wider tiles did not pay: the unpacked block and its scales
// already fill the registers).
template <QuantType T, int R, int C>
PARLEY_AVX2 void tile_rows(const uint8_t* w, int64_t ld, int64_t nb, const QuantizedRows& x,
                           int64_t m0, float* out) {
  static_assert(C == 1);
  (void)ld;
  if constexpr (T == QuantType::q4_k || T == QuantType::q5_k)
    dot_k4<T, R>(w, nb, x, m0, out);
  else if constexpr (T == QuantType::q6_k)
    dot_q6_k<T, R>(w, nb, x, m0, out);
  else
    dot_k23<T, R>(w, nb, x, m0, out);
}

// A row of tiles: weight rows [0, cols) (cols a multiple of C) against activation rows
// m0..m0 + R, out[r * ldo + j]. One call per span keeps the dispatch off the M = 1 path
// (at M = 1 a tile is a single weight row of a few hundred bytes).
template <int R, int C, auto Tile>
PARLEY_AVX2 void tile_span(const uint8_t* w, int64_t ld, int64_t nb, const QuantizedRows& x,
                           int64_t m0, int64_t cols, float* out, int64_t ldo) {
  float o[R * C];
  for (int64_t j = 0; j < cols; j += C) {
    Tile(w + j * ld, ld, nb, x, m0, o);
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) out[r * ldo + j + c] = o[r * C + c];
  }
}

using TileFn = void (*)(const uint8_t*, int64_t, int64_t, const QuantizedRows&, int64_t, int64_t,
                        float*, int64_t);

// Tile shapes: up to kTileRows activation rows by up to kTileCols weight rows.
constexpr int kTileRows = 4, kTileCols = 4;

// The widest tile (weight rows) per activation-row count for the 32-value types: R x C
// accumulators and C unpacked weight vectors within the 16 ymm registers. One weight row at a
// time at M = 1: several rows side by side streamed slower from DRAM (q8_0 4096 x 4096 cold:
// 22-28 GB/s at C = 4 against 29-30 at C = 1 on the 2-core EPYC).
constexpr int kCols32[kTileRows] = {1, 4, 3, 2};

struct Tiles {
  TileFn fn[kTileRows][kTileCols] = {};  // fn[R - 1][C - 1]
  int cols[kTileRows] = {};              // the widest tile (C) used for R rows
};

template <QuantType T>
Tiles make_tiles() {
  Tiles t;
  auto row = [&]<int R>(std::integral_constant<int, R>) {
    if constexpr (quant_format(T).block_size == 32) {
      t.fn[R - 1][0] = &tile_span<R, 1, tile_32<T, R, 1>>;
      t.fn[R - 1][1] = &tile_span<R, 2, tile_32<T, R, 2>>;
      t.fn[R - 1][2] = &tile_span<R, 3, tile_32<T, R, 3>>;
      t.fn[R - 1][3] = &tile_span<R, 4, tile_32<T, R, 4>>;
      t.cols[R - 1] = kCols32[R - 1];
    } else {
      t.fn[R - 1][0] = &tile_span<R, 1, tile_rows<T, R, 1>>;
      t.cols[R - 1] = 1;
    }
  };
  row(std::integral_constant<int, 1>{});
  row(std::integral_constant<int, 2>{});
  row(std::integral_constant<int, 3>{});
  row(std::integral_constant<int, 4>{});
  return t;
}

const Tiles& tiles(QuantType t) {
  static const Tiles q4_0 = make_tiles<QuantType::q4_0>(), q4_1 = make_tiles<QuantType::q4_1>(),
                     q5_0 = make_tiles<QuantType::q5_0>(), q5_1 = make_tiles<QuantType::q5_1>(),
                     q8_0 = make_tiles<QuantType::q8_0>(), q2_k = make_tiles<QuantType::q2_k>(),
                     q3_k = make_tiles<QuantType::q3_k>(), q4_k = make_tiles<QuantType::q4_k>(),
                     q5_k = make_tiles<QuantType::q5_k>(), q6_k = make_tiles<QuantType::q6_k>();
  switch (t) {
    case QuantType::q4_0: return q4_0;
    case QuantType::q4_1: return q4_1;
    case QuantType::q5_0: return q5_0;
    case QuantType::q5_1: return q5_1;
    case QuantType::q8_0: return q8_0;
    case QuantType::q4_k: return q4_k;
    case QuantType::q5_k: return q5_k;
    case QuantType::q6_k: return q6_k;
    case QuantType::q2_k: return q2_k;
    case QuantType::q3_k: break;
  }
  return q3_k;
}

// Weight bytes per cache block: a thread's slice of w is walked this many bytes at a time,
// each block against every tile of activation rows, so the block stays in L2 while the
// R-row activation tile stays in L1.
constexpr int64_t kWeightBlock = 128 << 10;
// Weight rows per kernel call (a multiple of every tile width).
constexpr int64_t kSpan = 48;

void matmul_fast(const Tensor& a, const QuantMatrix& w, Tensor& c, const MatmulQuantOptions& opt) {
  const int64_t m = a.dim(0), n = w.rows, k = w.cols;
  const QuantFormat& f = quant_format(w.type);
  const int64_t nb = k / f.block_size, ld = w.row_bytes();
  // Reused across calls on this thread: no allocation per decode step once warm.
  thread_local QuantizedRows rows;
  quantize_rows(a.data<float>(), m, k, is_k_quant(w.type) ? 256 : 32, rows);
  const Tiles& t = tiles(w.type);
  float* pc = c.data<float>();
  const float* bias = opt.bias ? opt.bias->data<float>() : nullptr;
  const QuantizedRows& x = rows;
  const int64_t block_rows =
      std::max<int64_t>(kTileCols, kWeightBlock / ld / kTileCols * kTileCols);
  const int64_t grain = std::max<int64_t>(kTileCols, (int64_t(1) << 16) / ld);
  cpu_threads().parallel_for(n, grain, [&](int64_t n0, int64_t n1) {
    float out[kTileRows * kSpan];
    for (int64_t j0 = n0; j0 < n1; j0 += block_rows) {
      const int64_t j1 = std::min(n1, j0 + block_rows);
      for (int64_t i = 0; i < m; i += kTileRows) {
        const int r = int(std::min<int64_t>(kTileRows, m - i));
        const int cols = t.cols[r - 1];
        for (int64_t s0 = j0; s0 < j1; s0 += kSpan) {
          const int64_t len = std::min<int64_t>(kSpan, j1 - s0), full = len / cols * cols;
          if (full > 0) t.fn[r - 1][cols - 1](w.data + s0 * ld, ld, nb, x, i, full, out, kSpan);
          if (full < len)
            t.fn[r - 1][0](w.data + (s0 + full) * ld, ld, nb, x, i, len - full, out + full, kSpan);
          for (int rr = 0; rr < r; ++rr)
            for (int64_t j = 0; j < len; ++j)
              store(pc, (i + rr) * n + s0 + j, out[rr * kSpan + j], bias, s0 + j, opt.beta);
        }
      }
    }
  });
}

// The packed q4_K path: as matmul_fast, whole 8-row groups per kernel call.
void matmul_packed(const Tensor& a, const QuantMatrix& w, Tensor& c,
                   const MatmulQuantOptions& opt) {
  using Kernel = void (*)(const uint8_t*, int64_t, const QuantizedRows&, int64_t, float*);
  static constexpr Kernel kKernels[kTileRows] = {&dot_q4k_x8<1>, &dot_q4k_x8<2>, &dot_q4k_x8<3>,
                                                 &dot_q4k_x8<4>};
  const int64_t m = a.dim(0), n = w.rows, nb = w.blocks_per_row();
  const int64_t group_bytes = nb * kQ4kX8Bytes, groups = n / kQ4kX8Rows;
  thread_local QuantizedRows rows;
  quantize_rows(a.data<float>(), m, w.cols, 256, rows);
  float* pc = c.data<float>();
  const float* bias = opt.bias ? opt.bias->data<float>() : nullptr;
  const QuantizedRows& x = rows;
  const int64_t block_groups = std::max<int64_t>(1, kWeightBlock / group_bytes);
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 16) / group_bytes);
  cpu_threads().parallel_for(groups, grain, [&](int64_t g0, int64_t g1) {
    float out[kTileRows * kQ4kX8Rows];
    for (int64_t j0 = g0; j0 < g1; j0 += block_groups) {
      const int64_t j1 = std::min(g1, j0 + block_groups);
      for (int64_t i = 0; i < m; i += kTileRows) {
        const int r = int(std::min<int64_t>(kTileRows, m - i));
        for (int64_t g = j0; g < j1; ++g) {
          kKernels[r - 1](w.data + g * group_bytes, nb, x, i, out);
          for (int rr = 0; rr < r; ++rr)
            for (int j = 0; j < kQ4kX8Rows; ++j) {
              const int64_t col = g * kQ4kX8Rows + j;
              store(pc, (i + rr) * n + col, out[rr * kQ4kX8Rows + j], bias, col, opt.beta);
            }
        }
      }
    }
  });
}

}  // namespace

bool quant_fast_path(QuantType) { return cpu_has_avx2(); }

QuantMatrix matmul_quant_layout(const QuantMatrix& w) {
  if (w.type != QuantType::q4_k || w.packed || w.rows % kQ4kX8Rows != 0 || !cpu_has_avx2())
    return w;
  return pack_q4_k_x8(w);
}

void matmul_quant(const Tensor& a, const QuantMatrix& w, Tensor& c, const MatmulQuantOptions& opt) {
  if (opt.reference || !cpu::quant_fast_path(w.type))
    matmul_reference(a, w, c, opt);
  else if (w.packed)
    matmul_packed(a, w, c, opt);
  else
    matmul_fast(a, w, c, opt);
}

}  // namespace parley::cpu
