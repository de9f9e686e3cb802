// Skinny GEMM for decoder steps (matmul's fast path for a few rows, see matmul.cu):
// c [M, N] = alpha * a [M, K] @ w^T + bias + beta * c with w [N, K] row-major (a Linear
// weight, trans_b), M <= 8, f16 or bf16 inputs, f32 accumulation, one rounding to c's
// dtype (f32 or the inputs') at the end; optionally exact GELU after the bias (fc1 + GELU in
// one launch; then beta must be 0). At M <= 8 a GEMM is bound by reading w once; on
// the H200 cuBLAS took ~7.6 us for ~7.6 MB per decoder-step GEMM (about 1 TB/s, bench/
// RESULTS.md); this kernel aims at streaming w at full bandwidth.
//
// Taken when b is 2-D, trans_b, the inputs are f16/bf16, M = a.numel() / K is 1..8, K is a
// multiple of 8 and a and w are 16-byte aligned (so every row is); anything else returns
// false and stays on cuBLAS (f32, the parity oracle, always does).
//
// Memory plan: each warp owns kCols adjacent columns (rows of w) and one slice of K (a
// block's warps split K into `parts` slices so a short N still puts enough warps in
// flight). Lane l reads the 16-byte vectors l, l + 32, l + 64, ... of its slice of those rows
// (8 halves each, coalesced: a warp reads 512 contiguous bytes per row and step), kUnroll
// vectors per row in flight before any FMA, bypassing L1 (w is read once). a is tiny (at
// most 8 x 5120 halves) and read directly from global through L1, where every warp of the
// SM finds it; each a vector serves the kCols columns. M x kCols f32 accumulators per lane,
// a butterfly warp reduction, the slices' sums added in shared memory, then one thread per
// (row m, column j) applies alpha, bias and beta * c; c's element is read and written by that
// one thread, so c may be the residual stream updated in place (beta = 1). No allocation or
// sync: safe under CUDA graph capture.
//
// Each launch is a programmatic dependent of the kernel before it (common.cuh): the block
// requests its first pass of weights, which no kernel writes, then waits for the inputs. A
// decoder step's GEMMs are ~2-13 MB each, a few microseconds of streaming, so the launch gap
// and the first DRAM round trip were a large part of every one (bench/RESULTS.md).
#include <cstdint>

#include "engine/cuda/common.cuh"

namespace parley::cuda {

namespace {

constexpr int kWarps = 8;    // warps per block
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

// a [M, K] and w [N, K] of T; c [M, N] of TC; kvecs = K / 8. A block's kWarps warps are
// `parts` slices of K times kWarps / parts groups of kCols columns: warp w computes the
// partial sums of columns group (w % groups) over K slice (w / groups), and the slices'
// partials meet in shared memory. Splitting K gives a short row (N = 1280 outputs of K =
// 5120) enough warps in flight to stream its weights at full bandwidth.
template <typename T, typename TC, int M>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_kernel(const T* __restrict__ a, const T* __restrict__ w, TC* c, int64_t n, int kvecs,
                int parts, float alpha, float beta, ParamRef bias, bool gelu) {
  __shared__ float partial[kWarps][M][kCols];
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
  const int groups = kWarps / parts;
  const int group = warp % groups, part = warp / groups;
  const int64_t col0 = (int64_t(blockIdx.x) * groups + group) * kCols;
  const int per_part = (kvecs + parts - 1) / parts;
  const int v_begin = part * per_part;
  const int v_end = v_begin + per_part < kvecs ? v_begin + per_part : kvecs;
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

  uint4 wbuf[kUnroll][kCols];
  const auto load_w = [&](int base) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int v = base + u * 32;
#pragma unroll
      for (int j = 0; j < kCols; ++j)
        wbuf[u][j] = v < v_end ? load_stream(wv[j] + v) : make_uint4(0, 0, 0, 0);
    }
  };
  // The first pass's weights (for Whisper's shapes, all of this lane's) are requested before
  // waiting for the kernel that writes a: they stream in while it finishes.
  const int first = v_begin + lane;
  load_w(first);
  wait_for_inputs();
  allow_dependents();
  for (int base = first; base < v_end; base += 32 * kUnroll) {
    if (base != first) load_w(base);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int v = base + u * 32;
      if (v >= v_end) break;
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
      if (lane == 0) partial[warp][m][j] = s;
    }
  __syncthreads();
  // Thread t < groups * M * kCols finishes output (group, m, j): the parts' sum in order.
  const int t = int(threadIdx.x);
  if (t >= groups * M * kCols) return;
  const int g = t / (M * kCols), m = (t / kCols) % M, j = t % kCols;
  const int64_t col = (int64_t(blockIdx.x) * groups + g) * kCols + j;
  if (col >= n) return;
  float s = 0.0f;
  for (int p = 0; p < parts; ++p) s += partial[p * groups + g][m][j];
  float r = alpha * s;
  if (bias.ptr) r += load_param(bias, col);
  if (gelu) r = gelu_erf(r);  // the caller guarantees beta == 0
  TC* out = c + int64_t(m) * n + col;
  if (beta != 0.0f) r += beta * dev_to_f32(*out);
  *out = dev_from_f32<TC>(r);
}
static_assert(kMaxRows * kCols <= kWarps * 32, "one thread writes each output of a group");

// K slices per block: the fewest that keep every SM busy (at least one block each) with a
// lane's slice of a row in one pass (at most kUnroll vectors). Fewer slices mean more
// loads in flight per thread and fewer partial sums; a decoder step's GEMMs are latency
// bound, so bytes in flight are what sets their speed (H200: turbo's fc1, 5120 x 1280,
// took 11.9 us in 2 slices, bench/RESULTS.md). Short rows fall back to the most slices.
int parts_for(int kvecs, int64_t n) {
  for (int parts = 1; parts < kWarps; parts *= 2) {
    const int64_t cols_per_block = int64_t(kWarps / parts) * kCols;
    const int64_t blocks = (n + cols_per_block - 1) / cols_per_block;
    const int lane_vecs = ((kvecs + parts - 1) / parts + 31) / 32;
    if (lane_vecs <= kUnroll && blocks >= sm_count()) return parts;
  }
  return kWarps;
}

// A programmatic dependent launch (common.cuh): the weights' first loads overlap the tail
// of the kernel before.
template <typename T, typename TC, int M>
void launch(const GemmArgs& g, ParamRef bias, bool gelu) {
  const int kvecs = int(g.k / kVec), parts = parts_for(kvecs, g.n);
  const int64_t cols_per_block = int64_t(kWarps / parts) * kCols;
  const unsigned blocks = unsigned((g.n + cols_per_block - 1) / cols_per_block);
  launch_dependent(gemv_kernel<T, TC, M>, dim3(blocks), dim3(kWarps * 32), 0,
                   static_cast<const T*>(g.a), static_cast<const T*>(g.b), static_cast<TC*>(g.c),
                   g.n, kvecs, parts, g.alpha, g.beta, bias, gelu);
}

template <typename T, typename TC>
void launch_rows(const GemmArgs& g, ParamRef bias, bool gelu) {
  switch (g.m) {
    case 1: return launch<T, TC, 1>(g, bias, gelu);
    case 2: return launch<T, TC, 2>(g, bias, gelu);
    case 3: return launch<T, TC, 3>(g, bias, gelu);
    case 4: return launch<T, TC, 4>(g, bias, gelu);
    case 5: return launch<T, TC, 5>(g, bias, gelu);
    case 6: return launch<T, TC, 6>(g, bias, gelu);
    case 7: return launch<T, TC, 7>(g, bias, gelu);
    default: return launch<T, TC, 8>(g, bias, gelu);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool gemv(const GemmArgs& g, ParamRef bias, bool gelu, const char* op) {
  const bool half = g.ab_type == DType::f16 || g.ab_type == DType::bf16;
  if (!half || g.batch != 1 || !g.trans_b || g.m < 1 || g.m > kMaxRows || g.k <= 0 ||
      g.k % kVec != 0 || g.k / kVec > INT32_MAX || !aligned16(g.a) || !aligned16(g.b) ||
      (g.c_type != DType::f32 && g.c_type != g.ab_type) || (gelu && g.beta != 0.0f))
    return false;
  const int64_t blocks = (g.n + kCols - 1) / kCols;  // at most: one column group a block
  if (g.n <= 0 || blocks > INT32_MAX) return false;
  dispatch_device_float(g.ab_type, op, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (sizeof(T) == 2) {
      if (g.c_type == DType::f32)
        launch_rows<T, float>(g, bias, gelu);
      else
        launch_rows<T, T>(g, bias, gelu);
    }
  });
  return true;
}

}  // namespace parley::cuda
