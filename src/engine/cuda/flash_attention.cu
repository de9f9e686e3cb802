// attention_qkv on CUDA (ops/attention.h): a flash-style self-attention kernel for the
// Whisper encoder (L = 1500 positions, D = 64), reading q, k and v straight from the fused
// QKV projection [B, L, 3 * H * 64] and writing [B, L, H * 64], so the heads are never
// permuted and no [L, L] score matrix touches memory (FlashAttention-2's scheme).
//
// One block of 4 warps per (128 query rows, head, batch); each warp owns 32 query rows (two
// m16 tiles) and keeps everything in registers: its Q fragments (loaded once), the scores
// of one key tile and the output accumulator. Two m-tiles per warp let every K and V
// fragment read from shared memory feed two mma (half the shared-memory traffic per FLOP
// of 16 rows per warp) and give each warp two independent softmax chains to interleave.
// Tiles of 64 keys of K and V ([key][d], 128-byte rows whose 16-byte chunks are XOR-swizzled
// by key % 8, so that ldmatrix and cp.async are conflict-free without padding) stream into
// shared memory with cp.async through 3 stages: tile i + 2 loads while tile i is used, and
// one __syncthreads per tile both publishes tile i and frees tile i - 1's stage. Per tile
// and warp:
//   S = Q K^T        mma.sync m16n8k16 (f16/bf16 in, f32 accumulate); K's B fragments come
//                    from ldmatrix (non-transposed: an 8x8 block of [key][d] is b0 or b1)
//   online softmax   rows g and g + 8 of each m-tile per lane (g = lane / 4); the max over
//                    the 4 lanes of a row by shuffles, kept scaled (m = max(S) scale log2e)
//                    so that P = exp2(S scale log2e - m) is one FMA and one ex2, and
//                    O *= exp2(m_old - m); the row sums stay per lane until the end
//   O += P V         the S accumulators, rounded to 16 bits, are exactly the A fragments
//                    of the next mma (the m16n8k16 C layout is its A layout); V's B
//                    fragments come transposed through ldmatrix.trans
// and finally out = O / l. Only the last key tile can hold keys past L: it alone masks
// them to -inf (P = 0); their K and V rows are zeros. A negative scale is folded into Q's
// sign bits, so the max is taken before scaling.
//
// The kernel before it (64 query rows per block, 16 per warp, double-buffered padded tiles,
// K fragments by scalar loads) took 69.6 us a call at L 1500, 20 heads (encoder 6.58-6.60 ms
// a turbo window against 5.81-5.85 with this one, bench/RESULTS.md).
//
// Fragment layouts (PTX ISA, mma.m16n8k16): with g = lane / 4 and t = lane % 4,
//   A: a0 (g, 2t..2t+1)  a1 (g+8, 2t..)  a2 (g, 2t+8..)  a3 (g+8, 2t+8..)   [row, col]
//   B: b0 (k 2t..2t+1, n g)  b1 (k 2t+8..2t+9, n g)
//   C: c0 c1 (g, 2t..2t+1)  c2 c3 (g+8, 2t..2t+1)
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "engine/cuda/common.cuh"
#include "engine/cuda/mma.cuh"
#include "engine/ops/attention.h"

namespace parley::cuda {

namespace {

constexpr int kD = 64;   // head size
constexpr int kBK = 64;  // keys per tile
static_assert(kBK == kD, "K and transposed V tiles share one shape");

constexpr int kWarpsFlash = 4;
constexpr int kRowsPerWarp = 32;                 // two m16 tiles
constexpr int kBQ = kWarpsFlash * kRowsPerWarp;  // query rows per block
constexpr int kThreadsFlash = kWarpsFlash * 32;
constexpr int kStages = 3;
constexpr int kTileElems = kBK * kD;  // one swizzled [key][d] tile
static_assert(2 * kStages * kTileElems * 2 <= 48 * 1024, "static shared memory");

template <typename T>
__device__ __forceinline__ uint32_t ld32(const T* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// 2^x (ex2.approx: 2 ulp, -inf -> +0).
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Element offset of (row, 16-byte chunk c) in a swizzled [64][64] tile: the chunk index is
// XORed with row % 8, so the 8 rows an ldmatrix matrix (or 8 cp.async lanes) touch fall in
// 8 different bank groups.
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * kD + ((chunk ^ (row & 7)) << 3);
}

template <typename T>
__global__ void __launch_bounds__(kThreadsFlash)
    flash_qkv_kernel(const T* qkv, T* out, int64_t len, int heads, float scale_log2) {
  __shared__ __align__(128) T k_s[kStages][kTileElems];  // [stage][key][d], swizzled
  __shared__ __align__(128) T v_s[kStages][kTileElems];  // [stage][key][d], swizzled
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const int64_t q0 = int64_t(blockIdx.x) * kBQ + warp * kRowsPerWarp;
  const int h = int(blockIdx.y);
  const int64_t b = blockIdx.z;
  const int64_t hd = int64_t(heads) * kD, row_stride = 3 * hd;
  const T* base = qkv + b * len * row_stride + int64_t(h) * kD;

  // This lane's rows of Q as A fragments, [m-tile][k-step of 16 over D][a0..a3]. A
  // negative scale flips Q's sign bits (exact), so that sl2 > 0 and max(S) sl2 is the
  // max of the scaled scores.
  const uint32_t sign = scale_log2 < 0.0f ? 0x80008000u : 0u;
  const float sl2 = fabsf(scale_log2);
  uint32_t qa[2][kD / 16][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
    const int64_t r0 = q0 + mt * 16 + g, r1 = r0 + 8;
    const bool ok0 = r0 < len, ok1 = r1 < len;
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const int c = kk * 16 + 2 * t;
      qa[mt][kk][0] = ok0 ? ld32(base + r0 * row_stride + c) ^ sign : 0u;
      qa[mt][kk][1] = ok1 ? ld32(base + r1 * row_stride + c) ^ sign : 0u;
      qa[mt][kk][2] = ok0 ? ld32(base + r0 * row_stride + c + 8) ^ sign : 0u;
      qa[mt][kk][3] = ok1 ? ld32(base + r1 * row_stride + c + 8) ^ sign : 0u;
    }
  }

  float o[2][kD / 8][4];  // [m-tile][n-tile of 8 over D][c0..c3]
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int j = 0; j < kD / 8; ++j) o[mt][j][0] = o[mt][j][1] = o[mt][j][2] = o[mt][j][3] = 0.0f;
  // Per m-tile and row (g, g + 8): the running max in scaled units and this lane's part of
  // the row sum (the 4 lanes of a row share the max, so their parts add up at the end).
  float m[2][2] = {{-INFINITY, -INFINITY}, {-INFINITY, -INFINITY}};
  float l[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};

  // 64 keys x 8 chunks of 16 bytes per tile and matrix: 4 chunks of K and of V per thread.
  auto load_tile = [&](int stage, int64_t k0) {
#pragma unroll
    for (int i = tid; i < kBK * (kD / 8); i += kThreadsFlash) {
      const int r = i >> 3, c = i & 7;
      const bool valid = k0 + r < len;
      const T* row = base + (valid ? (k0 + r) * row_stride : 0);
      cp_async16(&k_s[stage][swz(r, c)], row + hd + c * 8, valid);
      cp_async16(&v_s[stage][swz(r, c)], row + 2 * hd + c * 8, valid);
    }
  };
  // Per-lane ldmatrix offsets (the XOR term is row % 8 = lane % 8 for every matrix).
  // K: matrix l / 8 of each x4 is the d chunk l / 8 (+ 4 for the second x4) of keys 8j..
  // V (transposed): matrix mi = l / 8 is keys +8 (mi & 1) of the k-step, d chunk +(mi >> 1).
  const int mi = lane >> 3, r8 = lane & 7;

  const int64_t tiles = (len + kBK - 1) / kBK;
  // cp.async groups: one per tile, committed even when empty, so that "all but the newest
  // group complete" always means "this tile has landed".
  load_tile(0, 0);
  cp_async_commit();
  if (tiles > 1) load_tile(1, kBK);
  cp_async_commit();
  int stage = 0;
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const int64_t k0 = tile * kBK;
    cp_async_wait<1>();
    // Tile `tile` is in shared memory for every warp, and every warp is done with tile - 1,
    // whose stage the load below refills.
    __syncthreads();
    if (tile + 2 < tiles) load_tile(stage == 0 ? 2 : stage - 1, k0 + 2 * kBK);
    cp_async_commit();
    const T* k_tile = k_s[stage];
    const T* v_tile = v_s[stage];
    stage = stage == kStages - 1 ? 0 : stage + 1;

    float s[2][kBK / 8][4];  // [m-tile][n-tile of 8 keys][c0..c3]
#pragma unroll
    for (int j = 0; j < kBK / 8; ++j) {
      uint32_t kb[2][4];  // b0 b1 of k-steps 0, 1 | 2, 3
      ldmatrix_x4(kb[0], k_tile + swz(j * 8 + r8, mi));
      ldmatrix_x4(kb[1], k_tile + swz(j * 8 + r8, 4 + mi));
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < kD / 16; ++kk)
          mma16816(s[mt][j], qa[mt][kk], kb[kk >> 1][(kk & 1) * 2], kb[kk >> 1][(kk & 1) * 2 + 1],
                   T{});
      }
    }

    if (k0 + kBK > len) {  // the last tile, partial: keys past L get P = 0
      const int valid = int(len - k0);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int j = 0; j < kBK / 8; ++j) {
          const int key = j * 8 + 2 * t;
          if (key >= valid) s[mt][j][0] = s[mt][j][2] = -INFINITY;
          if (key + 1 >= valid) s[mt][j][1] = s[mt][j][3] = -INFINITY;
        }
    }

#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
      for (int j = 0; j < kBK / 8; ++j) {
        mx0 = fmaxf(mx0, fmaxf(s[mt][j][0], s[mt][j][1]));
        mx1 = fmaxf(mx1, fmaxf(s[mt][j][2], s[mt][j][3]));
      }
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
      // Finite (a tile has a valid key); alpha is 0 on the first tile (m = -inf).
      const float mn0 = fmaxf(m[mt][0], mx0 * sl2), mn1 = fmaxf(m[mt][1], mx1 * sl2);
      const float a0 = ex2(m[mt][0] - mn0), a1 = ex2(m[mt][1] - mn1);
      m[mt][0] = mn0;
      m[mt][1] = mn1;
      float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
      for (int j = 0; j < kBK / 8; ++j) {
        s[mt][j][0] = ex2(fmaf(s[mt][j][0], sl2, -mn0));
        s[mt][j][1] = ex2(fmaf(s[mt][j][1], sl2, -mn0));
        s[mt][j][2] = ex2(fmaf(s[mt][j][2], sl2, -mn1));
        s[mt][j][3] = ex2(fmaf(s[mt][j][3], sl2, -mn1));
        sum0 += s[mt][j][0] + s[mt][j][1];
        sum1 += s[mt][j][2] + s[mt][j][3];
      }
      l[mt][0] = fmaf(l[mt][0], a0, sum0);
      l[mt][1] = fmaf(l[mt][1], a1, sum1);
#pragma unroll
      for (int j = 0; j < kD / 8; ++j) {
        o[mt][j][0] *= a0;
        o[mt][j][1] *= a0;
        o[mt][j][2] *= a1;
        o[mt][j][3] *= a1;
      }
    }

#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      uint32_t pa[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        pa[mt][0] = pack2(s[mt][2 * kk][0], s[mt][2 * kk][1], T{});
        pa[mt][1] = pack2(s[mt][2 * kk][2], s[mt][2 * kk][3], T{});
        pa[mt][2] = pack2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1], T{});
        pa[mt][3] = pack2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3], T{});
      }
#pragma unroll
      for (int j = 0; j < kD / 8; j += 2) {
        uint32_t bv[4];  // b0 b1 of d tiles j and j + 1
        ldmatrix_x4_trans(bv, v_tile + swz(kk * 16 + (mi & 1) * 8 + r8, j + (mi >> 1)));
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          mma16816(o[mt][j], pa[mt], bv[0], bv[1], T{});
          mma16816(o[mt][j + 1], pa[mt], bv[2], bv[3], T{});
        }
      }
    }
  }

#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
    const int64_t r0 = q0 + mt * 16 + g, r1 = r0 + 8;
    float l0 = l[mt][0], l1 = l[mt][1];
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
    T* out0 = out + (b * len + r0) * hd + int64_t(h) * kD + 2 * t;
    T* out1 = out0 + 8 * hd;
#pragma unroll
    for (int j = 0; j < kD / 8; ++j) {
      if (r0 < len)
        *reinterpret_cast<uint32_t*>(out0 + j * 8) =
            pack2(o[mt][j][0] * inv0, o[mt][j][1] * inv0, T{});
      if (r1 < len)
        *reinterpret_cast<uint32_t*>(out1 + j * 8) =
            pack2(o[mt][j][2] * inv1, o[mt][j][3] * inv1, T{});
    }
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

bool attention_qkv_fused(const Tensor& qkv, int n_head, const Tensor& out,
                         const AttentionOptions& opt) {
  if (qkv.dtype() != DType::f16 && qkv.dtype() != DType::bf16) return false;
  if (opt.causal || opt.key_mask) return false;
  const int64_t hd = qkv.dim(2) / 3;
  return hd == int64_t(n_head) * kD && n_head <= 65535 && qkv.dim(0) <= 65535 &&
         aligned16(qkv.raw()) && aligned16(out.raw());
}

void attention_qkv(const Tensor& qkv, int n_head, Tensor& out, const AttentionOptions& opt) {
  constexpr const char* kOp = "attention_qkv";
  const int64_t batch = qkv.dim(0), len = qkv.dim(1);
  const float scale = opt.scale != 0.0f ? opt.scale : 1.0f / std::sqrt(float(kD));
  // |scale log2e| at least FLT_MIN keeps the kernel's masked -inf times scale at -inf.
  const float scale_log2 =
      std::copysign(std::fmax(std::fabs(scale * 1.4426950408889634f), FLT_MIN), scale);
  const int64_t blocks = (len + kBQ - 1) / kBQ;
  if (!(blocks <= int64_t(0x7fffffff)))
    throw Error(ErrorKind::unsupported,
                "[attention_qkv] L = " + std::to_string(len) + " exceeds the CUDA grid");
  dispatch_device_float(qkv.dtype(), kOp, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, float>) {
      const dim3 grid{unsigned(blocks), unsigned(n_head), unsigned(batch)};
      flash_qkv_kernel<T><<<grid, kThreadsFlash, 0, stream()>>>(qkv.data<T>(), out.data<T>(), len,
                                                                n_head, scale_log2);
    } else {
      throw Error(ErrorKind::internal, "[attention_qkv] no fused f32 kernel");
    }
  });
  check_launch(kOp);
}

}  // namespace parley::cuda
