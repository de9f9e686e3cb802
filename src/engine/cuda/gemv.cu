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
// Two kernels, by M. Below kMmaMinRows rows (greedy steps) gemv_kernel's FMAs; from it on
// (beam steps, batched sequences) gemv_mma_kernel's tensor cores, whose time does not grow
// with M. On the H200 (`parley bench ops`, gemm_step, weights from DRAM, f16), per GEMM:
//   1280 x 1280:  FMA 4.0 / 4.4 / 4.7 / 5.0 / 5.6 / 7.8 us at M = 1 / 2 / 3 / 4 / 5 / 8,
//                 mma 5.2 / 5.2 / 5.2 / 5.1 / 5.1 / 5.3
//   5120 x 1280:  FMA 8.4 / 9.2 / 9.5 / 10.0 / 11.2 / 15.0, mma 8.5 / 8.7 / 8.8 / 8.9 / 9.0 / 8.9
// The weights are loaded with an L2 evict-first policy: a step reads each once, and the
// step's other data (the cross-attention K/V, the KV caches, the activations) then stays in
// L2 from one step to the next (PARLEY_GEMV_EVICT=0 loads them as any other data).
//
// gemv_kernel's memory plan: each warp owns kCols adjacent columns (rows of w) and one slice of K
// (a block's warps split K into `parts` slices so a short N still puts enough warps in flight).
// Lane l reads the 16-byte vectors l, l + 32, l + 64, ... of its slice of those rows (8 halves
// each, coalesced: a warp reads 512 contiguous bytes per row and step), kUnroll vectors per row in
// flight before any FMA, bypassing L1 (w is read once). a is tiny (at most 8 x 5120 halves) and
// read directly from global through L1, where every warp of the SM finds it; each a vector serves
// the kCols columns. M x kCols f32 accumulators per lane, a butterfly warp reduction, the slices'
// sums added in shared memory, then one thread per (row m, column j) applies alpha, bias and beta *
// c; c's element is read and written by that one thread, so c may be the residual stream updated in
// place (beta = 1). No allocation or sync: safe under CUDA graph capture.
//
// gemv_mma_kernel: mma.sync m16n8k16 with a's rows as the A operand (rows 0-7; 8-15 are
// zero) and 8 columns of w (8 rows of w) as B. Lane (g = lane / 4, t = lane % 4) holds B
// elements of column g and A elements of row g at the same four k slots, and since a dot
// product does not care in which order k is visited, each lane's slots are simply the 8
// halves of one 16-byte vector it loads: vector v of w's row col0 + g and of a's row g feed
// two mmas (halves 0-3 the first, 4-7 the second; PTX ISA fragment layouts: a0 (g, 2t..2t+1),
// a2 (g, 2t+8..2t+9); b0 (k 2t..2t+1, n g), b1 (k 2t+8..2t+9, n g)). A warp owns 8 columns and
// one slice of K; a step of it covers 4 vectors per column (t = 0..3), kMmaUnroll steps in
// flight. The FMA kernel issues ~M x 20 instructions per 16 bytes of w, the mma kernel 4.
//
// LayerNorm folded in (MatmulOptions::norm, gemv_kernel only, so 1-3 rows): each lane
// multiplies the a vector it loads by gamma's matching vector (a weight, read through L1 like
// a) before its FMAs, and sums that vector's values and squares for the row's mean and
// variance in the same pass. The sums take the warp reduction and the shared-memory sum of
// the K slices beside the products, and the thread writing output (m, col) finishes it as
//   rstd (s - mean w_gamma[col]) + w_shift[col],  rstd = 1 / sqrt(E[a^2] - mean^2 + eps)
// with w_gamma and w_shift read before the wait like the bias: the norm costs a decoder step
// no launch and no memory trip of its own. (A block normalizing a into shared memory before
// its product, measured in the twelfth session, put two reductions, a barrier and a second
// trip to L2 on every block's critical path, bench/RESULTS.md.)
//
// Each launch is a programmatic dependent of the kernel before it (common.cuh): the block
// requests its first pass of weights, which no kernel writes, and the bias of the outputs it
// will write, then waits for the inputs, and right after requests c's old values (beta != 0):
// the epilogue finds its inputs in registers instead of making two more dependent trips to
// memory after the reduction (with the same for the norms' gamma and beta, a greedy turbo
// step went from 0.278 to 0.246 ms on the H200, bench/RESULTS.md). A
// decoder step's GEMMs are ~2-13 MB each, a few microseconds of streaming, so the launch gap
// and the first DRAM round trip were a large part of every one (bench/RESULTS.md).
#include <cstdint>
#include <type_traits>

#include "engine/cuda/choice.cuh"
#include "engine/cuda/common.cuh"
#include "engine/cuda/mma.cuh"
#include "engine/env.h"
#include "engine/ops/reduce.h"

namespace parley::cuda {

namespace {

constexpr int kWarps = 8;   // warps per block
constexpr int kCols = 2;    // columns (rows of w) per warp
constexpr int kUnroll = 8;  // 16-byte vectors per row and lane in flight (2-8 rows)
// One row (a greedy step): 5 vectors in flight (all of a lane's for K = 1280, or a slice of
// 5120) and at most 80 registers, so that three blocks fit an SM and a GEMM's blocks find
// room beside the kernel before them to request their weights early (programmatic launch;
// H200, turbo: 0.2007-0.2014 -> 0.1973-0.1980 ms a greedy step, bench/RESULTS.md). Two and
// three rows keep 8 vectors and two blocks an SM (at most 128 registers; at 80 their
// accumulators would spill).
constexpr int unroll_of(int m) { return m == 1 ? 5 : kUnroll; }
constexpr int min_blocks_of(int m) { return m == 1 ? 3 : 2; }
constexpr int kMaxRows = 8;  // the largest M taken
constexpr int kVec = 8;      // halves per 16-byte vector

// A 16-byte load of data read once: no L1 allocation, through the non-coherent path (w is
// not written during the kernel), with an L2 cache policy (stream_policy).
__device__ __forceinline__ uint4 load_stream(const uint4* p, uint64_t policy) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p), "l"(policy));
  return r;
}

// The L2 policy of the weight loads: evict first (the default), or normal.
__device__ __forceinline__ uint64_t stream_policy(bool evict_first) {
  uint64_t p;
  if (evict_first)
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  else
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(p));
  return p;
}

// The epilogue's inputs of output (m, col), read ahead of the product by the thread that
// writes it: the bias (a weight: before the wait for the kernel before) and c's old value
// when beta != 0 (just after the wait, so its latency hides behind the weight stream instead
// of following the reduction). One thread per element reads and writes c, so c may be the
// residual stream updated in place. Past the last column nothing is read.
// Both loads always set their field (0 without a bias or with beta == 0): the tensor-core
// kernel keeps these in shared memory, which nothing initializes.
struct OutputIn {
  float bias, old;
};
__device__ __forceinline__ void load_bias(OutputIn& o, ParamRef bias, int64_t col, int64_t n) {
  o.bias = bias.ptr && col < n ? load_param(bias, col) : 0.0f;
}
template <typename TC>
__device__ __forceinline__ void load_old(OutputIn& o, const TC* c, int64_t n, int m, int64_t col,
                                         float beta) {
  o.old = beta != 0.0f && col < n ? dev_to_f32(c[int64_t(m) * n + col]) : 0.0f;
}

// Output (m, col) of the sum s: alpha, bias, GELU and beta * c, rounded into c; returns
// the value before the rounding.
template <typename TC>
__device__ __forceinline__ float write_output(float s, TC* c, int64_t n, int m, int64_t col,
                                              float alpha, float beta, const OutputIn& in,
                                              bool gelu) {
  float r = alpha * s + in.bias;
  if (gelu) r = gelu_erf(r);  // the caller guarantees beta == 0
  if (beta != 0.0f) r += beta * in.old;
  c[int64_t(m) * n + col] = dev_from_f32<TC>(r);
  return r;
}

// The folded norm's per-column inputs (the header), read ahead like the bias.
struct FoldIn {
  float w_gamma, w_shift;
};

// A 4-byte copy from global to shared memory that does not hold a register meanwhile
// (cp.async); copy_async_wait() in the issuing thread makes it visible to that thread.
__device__ __forceinline__ void copy_async4(void* smem, const void* gmem) {
  const unsigned dst = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(gmem) : "memory");
}
__device__ __forceinline__ void copy_async_wait() {
  asm volatile("cp.async.wait_all;" ::: "memory");
}

// Warp 0 of a Choose block (every lane calls it): the block's outputs as one segment of the
// row's choice (choice.cuh). Lanes with `live` hold output `col` of value r; x' is -inf where
// the mask or a range of the rule row drops it. The best candidate of each side of the split
// by the ranking's butterfly, the sums of exp(x' - max) by a second one; lane 0 writes them
// (a Top1Partial: the candidates' values are the maxima).
__device__ __forceinline__ void choose_segment(bool live, int64_t col, float r, bool masked,
                                               const int32_t* rule, int width, int32_t v,
                                               Top1Partial* out) {
  constexpr float kNegInf = -INFINITY;
  const int32_t g = int32_t(col), split = split_of(rule, v);
  const int n_ranges = (width - 1) / 2;
  bool off = masked;
  for (int q = 0; q < n_ranges && !off; ++q) off = g >= rule[1 + 2 * q] && g < rule[2 + 2 * q];
  const float x = off ? kNegInf : r;
  const bool head = g < split;
  Cand hc{0.0f, -1}, tc{0.0f, -1};
  if (live) (head ? hc : tc) = Cand{x, g};
  for (int offset = 16; offset > 0; offset >>= 1) {
    hc = first_of(hc, Cand{__shfl_xor_sync(0xffffffffu, hc.v, offset),
                           __shfl_xor_sync(0xffffffffu, hc.i, offset)});
    tc = first_of(tc, Cand{__shfl_xor_sync(0xffffffffu, tc.v, offset),
                           __shfl_xor_sync(0xffffffffu, tc.i, offset)});
  }
  // The first candidate is the maximum (MaxOp's, NaN included) where a side has one.
  const float hm = hc.i >= 0 ? hc.v : kNegInf, tm = tc.i >= 0 ? tc.v : kNegInf;
  const bool finite = live && x != kNegInf;
  float hs = finite && head ? expf(x - hm) : 0.0f, ts = finite && !head ? expf(x - tm) : 0.0f;
  for (int offset = 16; offset > 0; offset >>= 1) {
    hs += __shfl_xor_sync(0xffffffffu, hs, offset);
    ts += __shfl_xor_sync(0xffffffffu, ts, offset);
  }
  if ((threadIdx.x & 31) == 0) out[blockIdx.x] = Top1Partial{{hm, hs, tm, ts}, hc.i, tc.i, {0, 0}};
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
//
// Choose (one row into f32 c): the block's outputs are also a segment of the row's token
// choice (gemv with a GemvChoice): warp 0, which holds every writer (at most 16), ranks and
// sums them under the mask (bytes read before the wait: no kernel writes them) and the rule
// row (copied to shared memory right after the wait, while the weights stream) and writes
// the segment's partials to `partials` (choice's logprobs, indices and advance are the
// merge's); masked_top1_merge's block merges them after this launch.
template <typename T, typename TC, int M, bool Fold, bool Choose>
__global__ void __launch_bounds__(kWarps * 32, min_blocks_of(M))
    gemv_kernel(const T* __restrict__ a, const T* __restrict__ w, TC* c, int64_t n, int kvecs,
                int parts, float alpha, float beta, ParamRef bias, bool gelu, bool evict_first,
                GemvNorm norm, GemvChoice choice, Top1Partial* partials) {
  static_assert(!Choose || (M == 1 && std::is_same_v<TC, float>), "a choice of one f32 row");
  __shared__ float partial[kWarps][M][kCols];
  __shared__ float stats[Fold ? kWarps : 1][M][2];  // the K slice's sum of a and of a^2
  __shared__ int32_t rule[Choose ? 1 + 2 * kMaskedTopKMaxRanges : 1];
  const uint64_t policy = stream_policy(evict_first);
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
  const int groups = kWarps / parts;
  const int group = warp % groups, part = warp / groups;
  // Thread t < groups * M * kCols finishes output (group og, row om, column oj) at the end.
  const int t = int(threadIdx.x);
  const bool writer = t < groups * M * kCols;
  const int og = t / (M * kCols), om = (t / kCols) % M, oj = t % kCols;
  const int64_t out_col = (int64_t(blockIdx.x) * groups + og) * kCols + oj;
  OutputIn in{0.0f, 0.0f};
  FoldIn fold{0.0f, 0.0f};
  if (writer) load_bias(in, bias, out_col, n);
  if (Fold && writer && out_col < n) fold = {norm.w_gamma[out_col], norm.w_shift[out_col]};
  const bool masked = Choose && writer && out_col < n && choice.mask && choice.mask[out_col];
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
  float sum[M], sum_sq[M];  // Fold: this lane's sums of a and a^2 per row
#pragma unroll
  for (int m = 0; m < M; ++m) {
    sum[m] = sum_sq[m] = 0.0f;
#pragma unroll
    for (int j = 0; j < kCols; ++j) acc[m][j] = 0.0f;
  }
  const uint4* gv = reinterpret_cast<const uint4*>(norm.gamma);

  constexpr int kU = unroll_of(M);
  uint4 wbuf[kU][kCols];
  const auto load_w = [&](int base) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int v = base + u * 32;
#pragma unroll
      for (int j = 0; j < kCols; ++j)
        wbuf[u][j] = v < v_end ? load_stream(wv[j] + v, policy) : make_uint4(0, 0, 0, 0);
    }
  };
  // The first pass's weights (for Whisper's shapes, all of this lane's) are requested before
  // waiting for the kernel that writes a: they stream in while it finishes.
  const int first = v_begin + lane;
  load_w(first);
  wait_for_inputs();
  allow_dependents();
  if (writer) load_old(in, c, n, om, out_col, beta);
  if (Choose && t < choice.width) copy_async4(&rule[t], choice.rules + t);
  for (int base = first; base < v_end; base += 32 * kU) {
    if (base != first) load_w(base);
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int v = base + u * 32;
      if (v >= v_end) break;
      float wf[kCols][kVec];
#pragma unroll
      for (int j = 0; j < kCols; ++j) unpack<T>(wbuf[u][j], wf[j]);
      float gf[kVec];
      if constexpr (Fold) unpack<T>(__ldg(gv + v), gf);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float af[kVec];
        unpack<T>(__ldg(av + int64_t(m) * kvecs + v), af);
        if constexpr (Fold) {
#pragma unroll
          for (int i = 0; i < kVec; ++i) {
            sum[m] += af[i];
            sum_sq[m] = fmaf(af[i], af[i], sum_sq[m]);
            af[i] *= gf[i];
          }
        }
#pragma unroll
        for (int j = 0; j < kCols; ++j)
#pragma unroll
          for (int i = 0; i < kVec; ++i) acc[m][j] = fmaf(af[i], wf[j][i], acc[m][j]);
      }
    }
  }

#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const float s = warp_reduce(acc[m][j], SumOp{});
      if (lane == 0) partial[warp][m][j] = s;
    }
    if constexpr (Fold) {
      const float s1 = warp_reduce(sum[m], SumOp{}), s2 = warp_reduce(sum_sq[m], SumOp{});
      if (lane == 0) {
        stats[warp][m][0] = s1;
        stats[warp][m][1] = s2;
      }
    }
  }
  if constexpr (Choose) copy_async_wait();  // the rule row, before the barrier publishes it
  __syncthreads();
  // The parts' sum in order.
  const bool live = writer && out_col < n;
  if (Choose ? warp != 0 : !live) return;
  float r = 0.0f;
  if (live) {
    float s = 0.0f;
    for (int p = 0; p < parts; ++p) s += partial[p * groups + og][om][oj];
    if constexpr (Fold) {
      float s1 = 0.0f, s2 = 0.0f;  // every warp of a part summed the same slice of the row
      for (int p = 0; p < parts; ++p) {
        s1 += stats[p * groups + og][om][0];
        s2 += stats[p * groups + og][om][1];
      }
      const float mean = s1 * norm.inv_k;
      const float var = fmaxf(fmaf(s2, norm.inv_k, -mean * mean), 0.0f);
      s = rsqrtf(var + norm.eps) * fmaf(-mean, fold.w_gamma, s) + fold.w_shift;
    }
    r = write_output(s, c, n, om, out_col, alpha, beta, in, gelu);
  }
  if constexpr (Choose)
    choose_segment(live, out_col, r, masked, rule, choice.width, int32_t(n), partials);
}
static_assert(kMaxRows * kCols <= kWarps * 32, "one thread writes each output of a group");

// gemv_mma_kernel (the header): 8 columns a warp, 4 vectors a column per step.
constexpr int kMmaMinRows = 4;  // M from which it is taken
constexpr int kMmaCols = 8;
constexpr int kMmaUnroll = 10;
constexpr int kMmaStep = 4;

__host__ __device__ inline int mma_slice_vecs(int kvecs, int parts) {
  return ((kvecs + parts - 1) / parts + kMmaStep - 1) / kMmaStep * kMmaStep;
}

template <typename T, typename TC, int M>
__global__ void __launch_bounds__(kWarps * 32, 3)
    gemv_mma_kernel(const T* __restrict__ a, const T* __restrict__ w, TC* c, int64_t n, int kvecs,
                    int parts, float alpha, float beta, ParamRef bias, bool gelu,
                    bool evict_first) {
  __shared__ float partial[kWarps][M][kMmaCols];
  const uint64_t policy = stream_policy(evict_first);
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
  const int g = lane >> 2, t = lane & 3;
  const int groups = kWarps / parts;
  const int group = warp % groups, part = warp / groups;
  const int64_t col0 = (int64_t(blockIdx.x) * groups + group) * kMmaCols;
  const int per_part = mma_slice_vecs(kvecs, parts);
  const int v_begin = part * per_part;
  const int v_end = v_begin + per_part < kvecs ? v_begin + per_part : kvecs;
  const int64_t col = col0 + g < n ? col0 + g : n - 1;
  const uint4* wrow = reinterpret_cast<const uint4*>(w) + col * kvecs;
  // The thread's outputs o = threadIdx.x + u * blocksize, u < kOuts: fn(u, group, row, column
  // in the group, column of c) for each, with the column maybe past n.
  constexpr int kOuts = (kWarps * M * kMmaCols + kWarps * 32 - 1) / (kWarps * 32);
  const int n_out = groups * M * kMmaCols;
  const auto for_outputs = [&](auto fn) {
#pragma unroll
    for (int u = 0; u < kOuts; ++u) {
      const int o = int(threadIdx.x) + u * kWarps * 32;
      if (o >= n_out) break;
      const int gi = o / (M * kMmaCols), m = (o / kMmaCols) % M, j = o % kMmaCols;
      fn(u, gi, m, j, (int64_t(blockIdx.x) * groups + gi) * kMmaCols + j);
    }
  };
  // In shared memory, each thread its own slots: registers are what bounds this kernel.
  __shared__ OutputIn in[kOuts][kWarps * 32];
  const auto load_outputs = [&](bool bias_too, bool old_too) {
    for_outputs([&](int u, int, int m, int, int64_t oc) {
      if (bias_too) load_bias(in[u][threadIdx.x], bias, oc, n);
      if (old_too) load_old(in[u][threadIdx.x], c, n, m, oc, beta);
    });
  };
  uint4 wbuf[kMmaUnroll];
  const auto load_w = [&](int base) {
#pragma unroll
    for (int u = 0; u < kMmaUnroll; ++u) {
      const int v = base + u * kMmaStep + t;
      wbuf[u] = v < v_end ? load_stream(wrow + v, policy) : make_uint4(0, 0, 0, 0);
    }
  };
  load_w(v_begin);
  load_outputs(true, false);  // after the weights: its shared-memory store waits for the bias
  wait_for_inputs();
  allow_dependents();
  load_outputs(false, true);
  const uint4* arow = reinterpret_cast<const uint4*>(a) + int64_t(g < M ? g : 0) * kvecs;
  float acc0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int base = v_begin; base < v_end; base += kMmaStep * kMmaUnroll) {
    if (base != v_begin) load_w(base);
#pragma unroll
    for (int u = 0; u < kMmaUnroll; ++u) {
      if (base + u * kMmaStep >= v_end) break;  // the same for the whole warp
      const int v = base + u * kMmaStep + t;
      const uint4 av = g < M && v < v_end ? __ldg(arow + v) : make_uint4(0, 0, 0, 0);
      // A's rows 8-15 (a1, a3) are zero: at most 8 rows of a.
      mma16816(acc0, {av.x, 0u, av.y, 0u}, wbuf[u].x, wbuf[u].y, T{});
      mma16816(acc1, {av.z, 0u, av.w, 0u}, wbuf[u].z, wbuf[u].w, T{});
    }
  }
  if (g < M) {
    partial[warp][g][2 * t] = acc0[0] + acc1[0];
    partial[warp][g][2 * t + 1] = acc0[1] + acc1[1];
  }
  __syncthreads();
  for_outputs([&](int u, int gi, int m, int j, int64_t out_col) {
    if (out_col >= n) return;
    float s = 0.0f;
    for (int p = 0; p < parts; ++p) s += partial[p * groups + gi][m][j];
    write_output(s, c, n, m, out_col, alpha, beta, in[u][threadIdx.x], gelu);
  });
}

// K slices per block: the fewest that keep every SM busy (at least one block each) with a
// lane's slice of a column in one pass (at most max_steps loads, lane_steps(parts)). Fewer
// slices mean more loads in flight per thread and fewer partial sums; a decoder step's GEMMs
// are latency bound, so bytes in flight are what sets their speed (H200: turbo's fc1, 5120 x
// 1280, took 11.9 us in 2 slices, bench/RESULTS.md). Short rows fall back to the most slices.
template <typename Steps>
int parts_for(int64_t n, int cols_per_warp, int max_steps, Steps lane_steps) {
  for (int parts = 1; parts < kWarps; parts *= 2) {
    const int64_t cols_per_block = int64_t(kWarps / parts) * cols_per_warp;
    const int64_t blocks = (n + cols_per_block - 1) / cols_per_block;
    if (lane_steps(parts) <= max_steps && blocks >= sm_count()) return parts;
  }
  return kWarps;
}

// PARLEY_GEMV_EVICT=0 loads the weights with L2's normal policy (to compare).
bool evict_first() {
  static const bool on = env_switch_on("PARLEY_GEMV_EVICT");
  return on;
}

// The grid of a launch: K slices per block and blocks.
struct Grid {
  int parts;
  unsigned blocks;
};
template <int M>
Grid grid_of(const GemmArgs& g) {
  constexpr bool kMma = M >= kMmaMinRows;
  const int kvecs = int(g.k / kVec);
  const int cols = kMma ? kMmaCols : kCols;
  const int parts = kMma ? parts_for(g.n, kMmaCols, kMmaUnroll,
                                     [&](int p) { return mma_slice_vecs(kvecs, p) / kMmaStep; })
                         : parts_for(g.n, kCols, unroll_of(M),
                                     [&](int p) { return ((kvecs + p - 1) / p + 31) / 32; });
  const int64_t cols_per_block = int64_t(kWarps / parts) * cols;
  return {parts, unsigned((g.n + cols_per_block - 1) / cols_per_block)};
}

// A programmatic dependent launch (common.cuh): the weights' first loads overlap the tail
// of the kernel before.
template <typename T, typename TC, int M, bool Fold, bool Choose = false>
void launch(const GemmArgs& g, ParamRef bias, bool gelu, const GemvNorm& norm,
            const GemvChoice& choice = {}, Top1Partial* partials = nullptr) {
  constexpr bool kMma = M >= kMmaMinRows;
  static_assert(!(kMma && Fold), "the norm folds into the FMA kernel only");
  const int kvecs = int(g.k / kVec);
  const Grid grid = grid_of<M>(g);
  if constexpr (kMma) {
    launch_dependent(gemv_mma_kernel<T, TC, M>, dim3(grid.blocks), dim3(kWarps * 32), 0,
                     static_cast<const T*>(g.a), static_cast<const T*>(g.b), static_cast<TC*>(g.c),
                     g.n, kvecs, grid.parts, g.alpha, g.beta, bias, gelu, evict_first());
  } else {
    launch_dependent(gemv_kernel<T, TC, M, Fold, Choose>, dim3(grid.blocks), dim3(kWarps * 32), 0,
                     static_cast<const T*>(g.a), static_cast<const T*>(g.b), static_cast<TC*>(g.c),
                     g.n, kvecs, grid.parts, g.alpha, g.beta, bias, gelu, evict_first(), norm,
                     choice, partials);
  }
}

// launch<T, TC, M, Fold> for M = g.m (1..8). The norm folds into the FMA kernel only: gemv
// refuses a norm from kMmaMinRows rows on, so those instantiations are never reached.
template <typename T, typename TC, bool Fold>
void launch_rows(const GemmArgs& g, ParamRef bias, bool gelu, const GemvNorm& norm) {
  const auto rows = [&](auto m) {
    constexpr int M = decltype(m)::value;
    if constexpr (Fold && M >= kMmaMinRows)
      throw Error(ErrorKind::internal, "[matmul] a folded norm with 4 or more rows");
    else
      launch<T, TC, M, Fold>(g, bias, gelu, norm);
  };
  switch (g.m) {
    case 1: return rows(std::integral_constant<int, 1>{});
    case 2: return rows(std::integral_constant<int, 2>{});
    case 3: return rows(std::integral_constant<int, 3>{});
    case 4: return rows(std::integral_constant<int, 4>{});
    case 5: return rows(std::integral_constant<int, 5>{});
    case 6: return rows(std::integral_constant<int, 6>{});
    case 7: return rows(std::integral_constant<int, 7>{});
    default: return rows(std::integral_constant<int, 8>{});
  }
}

// One row into f32 c with its token choice: the GEMM, whose blocks are the choice's segments,
// then the merge, with the segments' partials in the scratch buffer held across both.
template <typename T, bool Fold>
void launch_choice(const GemmArgs& g, ParamRef bias, bool gelu, const GemvNorm& norm,
                   const GemvChoice& choice) {
  const unsigned segments = grid_of<1>(g).blocks;
  Scratch scratch(size_t(segments) * sizeof(Top1Partial));
  auto* partials = static_cast<Top1Partial*>(scratch.data());
  launch<T, float, 1, Fold, true>(g, bias, gelu, norm, choice, partials);
  masked_top1_merge(segments, int32_t(g.n), choice, partials);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool gemv(const GemmArgs& g, ParamRef bias, bool gelu, const char* op, const GemvNorm* norm,
          const GemvChoice* choice) {
  const bool half = g.ab_type == DType::f16 || g.ab_type == DType::bf16;
  if (!half || g.batch != 1 || !g.trans_b || g.m < 1 || g.m > kMaxRows || g.k <= 0 ||
      g.k % kVec != 0 || g.k / kVec > INT32_MAX || !aligned16(g.a) || !aligned16(g.b) ||
      (g.c_type != DType::f32 && g.c_type != g.ab_type) || (gelu && g.beta != 0.0f))
    return false;
  if (norm && (g.m >= kMmaMinRows || !aligned16(norm->gamma))) return false;
  if (choice && (g.m != 1 || g.c_type != DType::f32 || g.n > INT32_MAX)) return false;
  const int64_t blocks = (g.n + kCols - 1) / kCols;  // at most: one column group a block
  if (g.n <= 0 || blocks > INT32_MAX) return false;
  dispatch_device_float(g.ab_type, op, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (sizeof(T) == 2) {
      if (choice) {
        if (norm)
          launch_choice<T, true>(g, bias, gelu, *norm, *choice);
        else
          launch_choice<T, false>(g, bias, gelu, GemvNorm{}, *choice);
        return;
      }
      const auto to = [&](auto c_tag) {
        using TC = decltype(c_tag);
        if (norm)
          launch_rows<T, TC, true>(g, bias, gelu, *norm);
        else
          launch_rows<T, TC, false>(g, bias, gelu, GemvNorm{});
      };
      if (g.c_type == DType::f32)
        to(float{});
      else
        to(T{});
    }
  });
  return true;
}

}  // namespace parley::cuda
