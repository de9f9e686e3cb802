// Skinny GEMM for decoder steps (matmul's fast path for a few rows, see matmul.cu):
// c [M, N] = alpha * a [M, K] @ w^T + bias + beta * c with w [N, K] row-major (a Linear
// weight, trans_b), M <= 8, f16 or bf16 inputs, f32 accumulation, one rounding to c's
// dtype (f32 or the inputs') at the end. At M <= 8 a GEMM is bound by reading w once, and
// cuBLAS reaches about a fifth of the H200's bandwidth on these shapes; this kernel aims
// at streaming w at full bandwidth.
//
// Taken when b is 2-D, trans_b, the inputs are f16/bf16, M = a.numel() / K is 1..8, K is a
// multiple of 8 and a and w are 16-byte aligned (so every row is); anything else returns
// false and stays on cuBLAS (f32, the parity oracle, always does).
//
// Memory plan: each warp owns kCols adjacent columns (rows of w). Lane l reads the 16-byte
// vectors l, l + 32, l + 64, ... of those rows (8 halves each, coalesced: a warp reads
// 512 contiguous bytes per row and step), kUnroll vectors per row in flight before any
// FMA, bypassing L1 (w is read once). a is tiny (at most 8 x 5120 halves) and read
// directly from global through L1, where every warp of the SM finds it; each a vector
// serves the kCols columns. M x kCols f32 accumulators per lane, a butterfly warp
// reduction, then lane m * kCols + j writes (row m, column j) with alpha, bias and
// beta * c applied; c's element is read and written by that one thread, so c may be the
// residual stream updated in place (beta = 1). No shared memory, allocation or sync:
// safe under CUDA graph capture.
#include <cstdint>

#include "engine/cuda/common.cuh"

namespace parley::cuda {

namespace {

constexpr int kWarps = 4;    // warps per block
constexpr int kCols = 2;     // columns (rows of w) per warp
constexpr int kUnroll = 8;   // 16-byte vectors per row and lane in flight
constexpr int kMaxRows = 8;  // the largest M taken
constexpr int kVec = 8;      // halves per 16-byte vector

// A 16-byte load of data read once: no L1 allocation, through the non-coherent path (w is
// not written during the kernel).
__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

template <typename T>
__device__ __forceinline__ void unpack(uint4 v, float (&f)[kVec]) {
  const T* h = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < kVec; ++i) f[i] = dev_to_f32(h[i]);
}

// a [M, K] and w [N, K] of T; c [M, N] of TC; kvecs = K / 8. One warp per kCols columns.
template <typename T, typename TC, int M>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_kernel(const T* __restrict__ a, const T* __restrict__ w, TC* c, int64_t n, int kvecs,
                float alpha, float beta, ParamRef bias) {
  const int lane = int(threadIdx.x & 31);
  const int64_t col0 = (int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * kCols;
  if (col0 >= n) return;
  const uint4* av = reinterpret_cast<const uint4*>(a);
  const uint4* wv[kCols];
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    // Past the last column, re-read a valid row (its result is never written).
    const int64_t col = col0 + j < n ? col0 + j : n - 1;
    wv[j] = reinterpret_cast<const uint4*>(w) + col * kvecs;
  }

  float acc[M][kCols];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int j = 0; j < kCols; ++j) acc[m][j] = 0.0f;

  for (int base = lane; base < kvecs; base += 32 * kUnroll) {
    uint4 wbuf[kUnroll][kCols];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int v = base + u * 32;
#pragma unroll
      for (int j = 0; j < kCols; ++j)
        wbuf[u][j] = v < kvecs ? load_stream(wv[j] + v) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int v = base + u * 32;
      if (v >= kvecs) break;
      float wf[kCols][kVec];
#pragma unroll
      for (int j = 0; j < kCols; ++j) unpack<T>(wbuf[u][j], wf[j]);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float af[kVec];
        unpack<T>(__ldg(av + int64_t(m) * kvecs + v), af);
#pragma unroll
        for (int j = 0; j < kCols; ++j)
#pragma unroll
          for (int i = 0; i < kVec; ++i) acc[m][j] = fmaf(af[i], wf[j][i], acc[m][j]);
      }
    }
  }

#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const float s = warp_reduce(acc[m][j], SumOp{});
      const int64_t col = col0 + j;
      if (lane != m * kCols + j || col >= n) continue;
      float r = alpha * s;
      if (bias.ptr) r += load_param(bias, col);
      TC* out = c + int64_t(m) * n + col;
      if (beta != 0.0f) r += beta * dev_to_f32(*out);
      *out = dev_from_f32<TC>(r);
    }
}
static_assert(kMaxRows * kCols <= 32, "one lane writes each output of a warp");

template <typename T, typename TC, int M>
void launch(const GemmArgs& g, ParamRef bias) {
  const int64_t warps = (g.n + kCols - 1) / kCols;
  const unsigned blocks = unsigned((warps + kWarps - 1) / kWarps);
  gemv_kernel<T, TC, M><<<blocks, kWarps * 32, 0, stream()>>>(
      static_cast<const T*>(g.a), static_cast<const T*>(g.b), static_cast<TC*>(g.c), g.n,
      int(g.k / kVec), g.alpha, g.beta, bias);
}

template <typename T, typename TC>
void launch_rows(const GemmArgs& g, ParamRef bias) {
  switch (g.m) {
    case 1: return launch<T, TC, 1>(g, bias);
    case 2: return launch<T, TC, 2>(g, bias);
    case 3: return launch<T, TC, 3>(g, bias);
    case 4: return launch<T, TC, 4>(g, bias);
    case 5: return launch<T, TC, 5>(g, bias);
    case 6: return launch<T, TC, 6>(g, bias);
    case 7: return launch<T, TC, 7>(g, bias);
    default: return launch<T, TC, 8>(g, bias);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool gemv(const GemmArgs& g, ParamRef bias, const char* op) {
  const bool half = g.ab_type == DType::f16 || g.ab_type == DType::bf16;
  if (!half || g.batch != 1 || !g.trans_b || g.m < 1 || g.m > kMaxRows || g.k <= 0 ||
      g.k % kVec != 0 || g.k / kVec > INT32_MAX || !aligned16(g.a) || !aligned16(g.b) ||
      (g.c_type != DType::f32 && g.c_type != g.ab_type))
    return false;
  const int64_t blocks = (g.n + kCols * kWarps - 1) / (kCols * kWarps);
  if (g.n <= 0 || blocks > INT32_MAX) return false;
  dispatch_device_float(g.ab_type, op, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (sizeof(T) == 2) {
      if (g.c_type == DType::f32)
        launch_rows<T, float>(g, bias);
      else
        launch_rows<T, T>(g, bias);
    }
  });
  check_launch(op);
  return true;
}

}  // namespace parley::cuda
