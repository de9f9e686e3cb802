// paged_attention on CUDA (ops/paged_attention.h): attention over a paged KV cache, reading
// each key and value from its block in place, for prefill chunks and decode steps alike.
// Two kernels, both in one call:
//   - rows of more than kPagedSplitRowTokens tokens (prefill chunks) in f16/bf16 with head
//     size 64 or 128 go to paged_flash_kernel, on tensor cores (below);
//   - every other token to paged_attention_kernel, on CUDA cores (decode steps).
//
// paged_flash_kernel: one block of 4 warps per (64 query tokens of a row, query head); each
// warp owns 16 query rows and keeps its Q fragments, the scores of one key tile and the output
// accumulator in registers (FlashAttention-2's scheme, as the encoder's flash_attention.cu).
// Key tiles of 64 keys (four 16-key blocks of the cache, each row's address from the block
// table) are copied into shared memory with cp.async, double-buffered, as [key][d] rows
// whose 16-byte chunks are XOR-swizzled by key % 8 (conflict-free ldmatrix). Per tile:
// S = Q K^T (mma.sync m16n8k16, f32 accumulation), the soft cap, the causal and sliding-window
// masks, the online softmax in log2 units, O += P V. The tiles run from the row's first
// visible key to its last query's position.
//
// paged_attention_kernel: one block of kWarps warps per (token, KV head, key chunk); the G query
// heads of the KV head (GQA) are computed together, so each key and value is read once for all of
// them. The token's q rows, scaled, sit in shared memory. A warp takes tiles of 32 keys:
//   scores   lane l takes key tile + l: its K row in 16-byte loads, G dot products against
//            the q rows (shared-memory broadcasts), then the soft cap;
//   softmax  per head the tile's max and sum by warp shuffles; the warp's running max m,
//            sum l and accumulator (online softmax, FlashAttention's rescaling);
//   P V      lane l owns the values [l D / 32, (l + 1) D / 32) of every head; the tile's
//            weights and cache offsets go through shared memory, key by key.
// The warps' states merge in warp order at the end. A token of a short row (at most
// kPagedSplitRowTokens: decode steps) with more than kPagedSplitKeys visible keys has its
// keys split over several blocks (flash-decoding: a batch-1 decode step would otherwise run
// on Hkv blocks); each writes (m, l, acc) to a partial, and the last block to finish
// (last_to_finish) merges the partials in chunk order. Every reduction order depends only
// on the token's position, never on the batch: a row's output is batch invariant.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>

#include <cstdlib>
#include <type_traits>

#include "engine/cuda/common.cuh"
#include "engine/cuda/mma.cuh"
#include "engine/ops/paged_attention.h"

namespace parley::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kMaxGroupHeadDim = 1024;  // G * D, bounds the shared memory

struct PagedParams {
  int hq, hkv, group, block_size, window, max_splits, split_keys;
  float scale, softcap;
  int skip_long;  // the CUDA-core kernel leaves the tokens of long rows to the flash kernel
};

// n consecutive elements at p (aligned to n * sizeof(E)) as floats.
template <typename E, int kN>
__device__ __forceinline__ void load_floats(const E* p, float* out) {
  struct alignas(sizeof(E) * kN) Pack {
    E e[kN];
  };
  const Pack v = *reinterpret_cast<const Pack*>(p);
#pragma unroll
  for (int i = 0; i < kN; ++i) out[i] = dev_to_f32(v.e[i]);
}

// q, out [T, Hq, kD]; kc, vc [n_blocks, block_size, Hkv, kD]; tok i32 [T, 3], blocks
// (PagedTables); partials f32 [split_tokens, Hq, max_splits, kD + 2] (m, l, acc);
// counters [split_tokens, Hkv]. kG >= group, a power of two.
template <typename E, int kD, int kG>
__global__ void __launch_bounds__(kWarps * 32)
    paged_attention_kernel(const E* __restrict__ q, const E* __restrict__ kc,
                           const E* __restrict__ vc, E* __restrict__ out,
                           const int32_t* __restrict__ tok, const int32_t* __restrict__ blocks,
                           float* partials, int* counters, PagedParams p) {
  static_assert(kD % 32 == 0 && kG * kD <= kMaxGroupHeadDim);
  constexpr int kPer = kD / 32;              // values per lane in P V
  constexpr int kVec = 16 / int(sizeof(E));  // elements per 16-byte K load
  __shared__ float qs[kG][kD];
  __shared__ float ps[kWarps][32][kG];
  __shared__ int64_t offs[kWarps][32];
  __shared__ float wm[kWarps][kG], wl[kWarps][kG];
  __shared__ float wacc[kWarps][kG][kD];

  const int t = int(blockIdx.x), g = int(blockIdx.y), split = int(blockIdx.z);
  const int pos = tok[3 * t], table = tok[3 * t + 1], slot = tok[3 * t + 2];
  const int first = p.window > 0 ? max(0, pos - p.window + 1) : 0;
  int nsplit = 1, kb = first, ke = pos + 1;
  if (slot >= 0) {
    nsplit = (ke - first + p.split_keys - 1) / p.split_keys;
    if (split >= nsplit) return;
    kb = first + split * p.split_keys;
    ke = min(kb + p.split_keys, pos + 1);
  } else if (split > 0 || p.skip_long) {
    return;
  }
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int64_t head0 = int64_t(t) * p.hq + int64_t(g) * p.group;  // first q head's row
  for (int i = int(threadIdx.x); i < kG * kD; i += kWarps * 32) {
    const int j = i / kD, d = i % kD;
    qs[j][d] = j < p.group ? dev_to_f32(q[(head0 + j) * kD + d]) * p.scale : 0.0f;
  }
  __syncthreads();

  float m[kG], l[kG], acc[kG][kPer];
#pragma unroll
  for (int j = 0; j < kG; ++j) {
    m[j] = -INFINITY;
    l[j] = 0.0f;
#pragma unroll
    for (int e = 0; e < kPer; ++e) acc[j][e] = 0.0f;
  }
  const int64_t slot_stride = int64_t(p.hkv) * kD;
  for (int tile = kb + warp * 32; tile < ke; tile += kWarps * 32) {
    const int key = tile + lane;
    const bool valid = key < ke;
    float s[kG];
    int64_t off = 0;
    if (valid) {
      const int64_t blk = blocks[table + key / p.block_size];
      off = (blk * p.block_size + key % p.block_size) * slot_stride + int64_t(g) * kD;
#pragma unroll
      for (int j = 0; j < kG; ++j) s[j] = 0.0f;
      const E* kr = kc + off;
#pragma unroll 4
      for (int d0 = 0; d0 < kD; d0 += kVec) {
        float kv[kVec];
        load_floats<E, kVec>(kr + d0, kv);
#pragma unroll
        for (int u = 0; u < kVec; ++u)
#pragma unroll
          for (int j = 0; j < kG; ++j) s[j] = fmaf(qs[j][d0 + u], kv[u], s[j]);
      }
      if (p.softcap > 0.0f)
#pragma unroll
        for (int j = 0; j < kG; ++j) s[j] = p.softcap * tanhf(s[j] / p.softcap);
    } else {
#pragma unroll
      for (int j = 0; j < kG; ++j) s[j] = -INFINITY;
    }
    offs[warp][lane] = off;
#pragma unroll
    for (int j = 0; j < kG; ++j) {
      const float mn = fmaxf(m[j], warp_reduce(s[j], MaxOp{}));  // lane 0's key is valid
      const float corr = expf(m[j] - mn);                        // 0 while m is -inf
      const float pj = valid ? expf(s[j] - mn) : 0.0f;
      l[j] = l[j] * corr + warp_reduce(pj, SumOp{});
#pragma unroll
      for (int e = 0; e < kPer; ++e) acc[j][e] *= corr;
      m[j] = mn;
      ps[warp][lane][j] = pj;
    }
    __syncwarp();
    const int n_valid = min(32, ke - tile);
    for (int i = 0; i < n_valid; ++i) {
      float vv[kPer];
      load_floats<E, kPer>(vc + offs[warp][i] + lane * kPer, vv);
#pragma unroll
      for (int j = 0; j < kG; ++j) {
        const float w = ps[warp][i][j];
#pragma unroll
        for (int e = 0; e < kPer; ++e) acc[j][e] = fmaf(w, vv[e], acc[j][e]);
      }
    }
    __syncwarp();
  }

  // Merge the warps (warp order), then write the output or this chunk's partial.
#pragma unroll
  for (int j = 0; j < kG; ++j) {
    if (lane == 0) {
      wm[warp][j] = m[j];
      wl[warp][j] = l[j];
    }
#pragma unroll
    for (int e = 0; e < kPer; ++e) wacc[warp][j][lane * kPer + e] = acc[j][e];
  }
  __syncthreads();
  for (int i = int(threadIdx.x); i < p.group * kD; i += kWarps * 32) {
    const int j = i / kD, d = i % kD;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, wm[w][j]);
    float sum = 0.0f, a = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float c = wm[w][j] == -INFINITY ? 0.0f : expf(wm[w][j] - mx);
      sum += wl[w][j] * c;
      a += wacc[w][j][d] * c;
    }
    const int64_t h = head0 + j;
    if (nsplit == 1) {
      out[h * kD + d] = dev_from_f32<E>(a / sum);
    } else {
      float* part =
          partials +
          ((int64_t(slot) * p.hq + (h - int64_t(t) * p.hq)) * p.max_splits + split) * (kD + 2);
      part[2 + d] = a;
      if (d == 0) {
        part[0] = mx;
        part[1] = sum;
      }
    }
  }
  if (nsplit == 1) return;
  if (!last_to_finish(counters + int64_t(slot) * p.hkv + g, nsplit)) return;
  for (int i = int(threadIdx.x); i < p.group * kD; i += kWarps * 32) {
    const int j = i / kD, d = i % kD;
    const int64_t hl = int64_t(g) * p.group + j;  // head within the token
    const float* part = partials + (int64_t(slot) * p.hq + hl) * p.max_splits * (kD + 2);
    float mx = -INFINITY;
    for (int c = 0; c < nsplit; ++c) mx = fmaxf(mx, __ldcg(part + c * (kD + 2)));
    float sum = 0.0f, a = 0.0f;
    for (int c = 0; c < nsplit; ++c) {
      const float* pc = part + c * (kD + 2);
      const float w = expf(__ldcg(pc) - mx);
      sum += __ldcg(pc + 1) * w;
      a += __ldcg(pc + 2 + d) * w;
    }
    out[(head0 + j) * kD + d] = dev_from_f32<E>(a / sum);
  }
}

// --- Tensor-core prefill -------------------------------------------------------------------

constexpr int kFlashWarps = 4;
constexpr int kFlashRows = 16 * kFlashWarps;  // query tokens per block (kPagedFlashTile)
constexpr int kFlashKeys = 64;                // keys per tile
static_assert(kFlashRows == kPagedFlashTile);

// Element offset of (key row, 16-byte chunk c) in a swizzled [kFlashKeys][kD] tile.
template <int kD>
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * kD + ((chunk ^ (row & 7)) << 3);
}

// q, out [T, Hq, kD]; caches [n_blocks, block_size, Hkv, kD]; tok / blocks as above;
// tiles i32 [n_tiles, 2]: (first token, token count <= kFlashRows) of one row each.
// Dynamic shared memory: 2 stages x (K, V) x kFlashKeys x kD elements.
template <typename E, int kD>
__global__ void __launch_bounds__(kFlashWarps * 32)
    paged_flash_kernel(const E* __restrict__ q, const E* __restrict__ kc, const E* __restrict__ vc,
                       E* __restrict__ out, const int32_t* __restrict__ tok,
                       const int32_t* __restrict__ blocks, const int32_t* __restrict__ tiles,
                       PagedParams p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  E* k_s = reinterpret_cast<E*>(smem_raw);  // [2][kFlashKeys * kD]
  E* v_s = k_s + 2 * kFlashKeys * kD;       // [2][kFlashKeys * kD]
  constexpr int kTile = kFlashKeys * kD;
  constexpr int kChunks = kD / 8;  // 16-byte chunks per row
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const int first_tok = tiles[2 * blockIdx.x], n_q = tiles[2 * blockIdx.x + 1];
  const int h = int(blockIdx.y), kvh = h / p.group;
  const int pos0 = tok[3 * first_tok], table = tok[3 * first_tok + 1];
  const int last_pos = pos0 + n_q - 1;
  const int first_key = p.window > 0 ? max(0, pos0 - p.window + 1) : 0;
  const int64_t slot_stride = int64_t(p.hkv) * kD;
  constexpr float kLog2e = 1.4426950408889634f;

  // This warp's 16 query rows (tile rows warp * 16 + g, + 8) as A fragments.
  const int r0 = warp * 16 + g, r1 = r0 + 8;
  const bool ok0 = r0 < n_q, ok1 = r1 < n_q;
  const int qp0 = pos0 + r0, qp1 = pos0 + r1;  // their positions
  uint32_t qa[kD / 16][4];
  {
    const E* q0 = q + (int64_t(first_tok + r0) * p.hq + h) * kD;
    const E* q1 = q + (int64_t(first_tok + r1) * p.hq + h) * kD;
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const int c = kk * 16 + 2 * t;
      qa[kk][0] = ok0 ? *reinterpret_cast<const uint32_t*>(q0 + c) : 0u;
      qa[kk][1] = ok1 ? *reinterpret_cast<const uint32_t*>(q1 + c) : 0u;
      qa[kk][2] = ok0 ? *reinterpret_cast<const uint32_t*>(q0 + c + 8) : 0u;
      qa[kk][3] = ok1 ? *reinterpret_cast<const uint32_t*>(q1 + c + 8) : 0u;
    }
  }
  float o[kD / 8][4];
#pragma unroll
  for (int j = 0; j < kD / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // log2 units; lane's sums

  auto load_tile = [&](int stage, int k0) {
    for (int i = tid; i < kFlashKeys * kChunks; i += kFlashWarps * 32) {
      const int r = i / kChunks, c = i % kChunks, key = k0 + r;
      const bool valid = key <= last_pos;
      int64_t off = 0;
      if (valid) {
        const int64_t blk = blocks[table + key / p.block_size];
        off = (blk * p.block_size + key % p.block_size) * slot_stride + int64_t(kvh) * kD;
      }
      cp_async16(k_s + stage * kTile + swz<kD>(r, c), kc + off + c * 8, valid);
      cp_async16(v_s + stage * kTile + swz<kD>(r, c), vc + off + c * 8, valid);
    }
  };
  const int mi = lane >> 3, r8 = lane & 7;
  int stage = 0;
  load_tile(0, first_key);
  cp_async_commit();
  for (int k0 = first_key; k0 <= last_pos; k0 += kFlashKeys) {
    cp_async_wait<0>();
    __syncthreads();  // tile k0 landed for all; every warp is done with the other stage
    if (k0 + kFlashKeys <= last_pos) load_tile(stage ^ 1, k0 + kFlashKeys);
    cp_async_commit();
    const E* k_tile = k_s + stage * kTile;
    const E* v_tile = v_s + stage * kTile;

    float s[kFlashKeys / 8][4];
#pragma unroll
    for (int j = 0; j < kFlashKeys / 8; ++j) {
      s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kD / 16; kk += 2) {
        uint32_t kb[4];  // b0 b1 of k-steps kk and kk + 1
        ldmatrix_x4(kb, k_tile + swz<kD>(j * 8 + r8, kk * 2 + mi));
        mma16816(s[j], qa[kk], kb[0], kb[1], E{});
        mma16816(s[j], qa[kk + 1], kb[2], kb[3], E{});
      }
    }
    // Scale (and soft cap) into log2 units; mask keys outside each row's window.
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < kFlashKeys / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + j * 8 + 2 * t + (e & 1);
        const int qp = e < 2 ? qp0 : qp1;
        float v = s[j][e] * p.scale;
        if (p.softcap > 0.0f) v = p.softcap * tanhf(v / p.softcap);
        const bool visible = key <= qp && (p.window <= 0 || key > qp - p.window);
        v = visible ? v * kLog2e : -INFINITY;
        s[j][e] = v;
      }
      mx0 = fmaxf(mx0, fmaxf(s[j][0], s[j][1]));
      mx1 = fmaxf(mx1, fmaxf(s[j][2], s[j][3]));
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    // A row with no visible key yet keeps m = -inf: subtract 0 instead (its P is 0).
    const float b0 = mn0 == -INFINITY ? 0.0f : mn0, b1 = mn1 == -INFINITY ? 0.0f : mn1;
    const float a0 = exp2f(m0 - b0), a1 = exp2f(m1 - b1);
    m0 = mn0;
    m1 = mn1;
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int j = 0; j < kFlashKeys / 8; ++j) {
      s[j][0] = exp2f(s[j][0] - b0);
      s[j][1] = exp2f(s[j][1] - b0);
      s[j][2] = exp2f(s[j][2] - b1);
      s[j][3] = exp2f(s[j][3] - b1);
      sum0 += s[j][0] + s[j][1];
      sum1 += s[j][2] + s[j][3];
    }
    l0 = fmaf(l0, a0, sum0);
    l1 = fmaf(l1, a1, sum1);
#pragma unroll
    for (int j = 0; j < kD / 8; ++j) {
      o[j][0] *= a0;
      o[j][1] *= a0;
      o[j][2] *= a1;
      o[j][3] *= a1;
    }
#pragma unroll
    for (int kk = 0; kk < kFlashKeys / 16; ++kk) {
      uint32_t pa[4];
      pa[0] = pack2(s[2 * kk][0], s[2 * kk][1], E{});
      pa[1] = pack2(s[2 * kk][2], s[2 * kk][3], E{});
      pa[2] = pack2(s[2 * kk + 1][0], s[2 * kk + 1][1], E{});
      pa[3] = pack2(s[2 * kk + 1][2], s[2 * kk + 1][3], E{});
#pragma unroll
      for (int j = 0; j < kD / 8; j += 2) {
        uint32_t bv[4];  // b0 b1 of d tiles j and j + 1
        ldmatrix_x4_trans(bv, v_tile + swz<kD>(kk * 16 + (mi & 1) * 8 + r8, j + (mi >> 1)));
        mma16816(o[j], pa, bv[0], bv[1], E{});
        mma16816(o[j + 1], pa, bv[2], bv[3], E{});
      }
    }
    stage ^= 1;
  }
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
  E* out0 = out + (int64_t(first_tok + r0) * p.hq + h) * kD + 2 * t;
  E* out1 = out + (int64_t(first_tok + r1) * p.hq + h) * kD + 2 * t;
#pragma unroll
  for (int j = 0; j < kD / 8; ++j) {
    if (ok0)
      *reinterpret_cast<uint32_t*>(out0 + j * 8) = pack2(o[j][0] * inv0, o[j][1] * inv0, E{});
    if (ok1)
      *reinterpret_cast<uint32_t*>(out1 + j * 8) = pack2(o[j][2] * inv1, o[j][3] * inv1, E{});
  }
}

template <typename E, int kD>
void launch_flash(const Tensor& q, const Tensor& kc, const Tensor& vc, Tensor& out,
                  const PagedTables& tb, const PagedParams& p) {
  const size_t smem = size_t(4) * kFlashKeys * kD * sizeof(E);
  static const bool configured = [&] {
    check_cuda(cudaFuncSetAttribute(paged_flash_kernel<E, kD>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
               "cudaFuncSetAttribute (paged flash attention)");
    return true;
  }();
  (void)configured;
  const dim3 grid(unsigned(tb.n_tiles), unsigned(p.hq));
  paged_flash_kernel<E, kD><<<grid, kFlashWarps * 32, smem, stream()>>>(
      static_cast<const E*>(q.raw()), static_cast<const E*>(kc.raw()),
      static_cast<const E*>(vc.raw()), static_cast<E*>(out.raw()), tb.tokens.data<int32_t>(),
      tb.blocks.data<int32_t>(), tb.tiles.data<int32_t>(), p);
  check_launch("paged_attention (flash)");
}

// PARLEY_PAGED_FLASH=0: every token on the CUDA-core kernel (a comparison, a fallback).
bool flash_disabled() {
  static const bool off = [] {
    const char* v = std::getenv("PARLEY_PAGED_FLASH");
    return v && std::string(v) == "0";
  }();
  return off;
}

LastBlockCounters& counters() {
  static LastBlockCounters* c = new LastBlockCounters("paged_attention", 4096);
  return *c;
}

template <typename E, int kD, int kG>
void launch(const Tensor& q, const Tensor& kc, const Tensor& vc, Tensor& out, const PagedTables& tb,
            const PagedParams& p) {
  const int64_t n_tok = q.dim(0);
  const int64_t part_floats =
      tb.max_splits > 1 ? tb.split_tokens * p.hq * tb.max_splits * (kD + 2) : 1;
  Scratch scratch(size_t(part_floats) * sizeof(float));
  int* cnt = counters().get(std::max<int64_t>(tb.split_tokens * p.hkv, 1));
  const dim3 grid(unsigned(n_tok), unsigned(p.hkv), unsigned(tb.max_splits));
  paged_attention_kernel<E, kD, kG><<<grid, kWarps * 32, 0, stream()>>>(
      static_cast<const E*>(q.raw()), static_cast<const E*>(kc.raw()),
      static_cast<const E*>(vc.raw()), static_cast<E*>(out.raw()), tb.tokens.data<int32_t>(),
      tb.blocks.data<int32_t>(), static_cast<float*>(scratch.data()), cnt, p);
  check_launch("paged_attention");
}

template <typename E, int kD>
void launch_group(const Tensor& q, const Tensor& kc, const Tensor& vc, Tensor& out,
                  const PagedTables& tb, const PagedParams& p) {
  if (p.group <= 1)
    launch<E, kD, 1>(q, kc, vc, out, tb, p);
  else if (p.group <= 2)
    launch<E, kD, 2>(q, kc, vc, out, tb, p);
  else if (p.group <= 4)
    launch<E, kD, 4>(q, kc, vc, out, tb, p);
  else if constexpr (8 * kD <= kMaxGroupHeadDim)
    launch<E, kD, 8>(q, kc, vc, out, tb, p);
}

}  // namespace

void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     std::span<const PagedRow>, Tensor& out, const PagedAttentionOptions& opt) {
  const int64_t n_tok = q.dim(0), hq = q.dim(1), d = q.dim(2), hkv = k_cache.dim(2);
  if (n_tok == 0) return;
  const PagedTables& tb = *opt.tables;
  PagedParams p{};
  p.hq = int(hq);
  p.hkv = int(hkv);
  p.group = int(hq / hkv);
  p.block_size = int(k_cache.dim(1));
  p.window = int(opt.sliding_window);
  p.max_splits = int(tb.max_splits);
  p.split_keys = int(paged_split_keys());
  p.scale = opt.scale > 0 ? opt.scale : 1.0f / std::sqrt(float(d));
  p.softcap = opt.softcap;
  check(tb.max_splits <= 65535, ErrorKind::unsupported,
        "[paged_attention] a context of " + std::to_string(tb.max_splits * paged_split_keys()) +
            " keys is above CUDA's grid limit");
  const bool fits = (d == 32 || d == 64 || d == 128 || d == 256) && p.group <= 8 &&
                    int64_t(p.group <= 4 ? p.group : 8) * d <= kMaxGroupHeadDim;
  check(fits, ErrorKind::unsupported,
        "[paged_attention] CUDA takes head_dim 32, 64, 128 or 256 with at most " +
            std::to_string(kMaxGroupHeadDim) +
            " / head_dim query heads per KV head; got head_dim " + std::to_string(d) + ", " +
            std::to_string(p.group) + " heads per KV head");
  dispatch_device_float(q.dtype(), "paged_attention", [&](auto tag) {
    using E = decltype(tag);
    if constexpr (!std::is_same_v<E, float>) {
      p.skip_long = tb.n_tiles > 0 && (d == 64 || d == 128) && !flash_disabled();
      if (p.skip_long && d == 64) launch_flash<E, 64>(q, k_cache, v_cache, out, tb, p);
      if (p.skip_long && d == 128) launch_flash<E, 128>(q, k_cache, v_cache, out, tb, p);
      // Nothing left for the CUDA-core kernel: every token is in a long row.
      if (p.skip_long && tb.split_tokens == 0) return;
    }
    if (d == 32)
      launch_group<E, 32>(q, k_cache, v_cache, out, tb, p);
    else if (d == 64)
      launch_group<E, 64>(q, k_cache, v_cache, out, tb, p);
    else if (d == 128)
      launch_group<E, 128>(q, k_cache, v_cache, out, tb, p);
    else
      launch_group<E, 256>(q, k_cache, v_cache, out, tb, p);
  });
}

}  // namespace parley::cuda
