// attention on CUDA (ops/attention.h): a reference-style kernel, correct before fast.
// One block per (query i, head h, batch b):
//   1. q row (times scale) into shared memory as f32;
//   2. one warp per key: score[j] = q . k[j] (lanes stride over D, warp sum), or -inf
//      when the key is masked; keys after the causal limit are never looked at;
//   3. block max; no visible key -> the output row is zeros;
//   4. p[j] = exp(score[j] - max), block sum;
//   5. out[d] = sum_j p[j] v[j][d] / sum: thread groups split the keys, each thread owns
//      one d (coalesced reads of v rows), and the groups' partial sums are added.
// Limits: all Lk scores of a row live in shared memory, (D + Lk + kThreadsAttn) floats per
// block, up to the device's opt-in limit (227 KiB on H100/H200: Lk up to about 57,000 at
// D = 128); beyond that the call is an unsupported error. B and H up to 65535 (grid y, z).
// Every block re-reads its head's K and V, so this is far from FlashAttention speed.
//
// Few query rows (a decoder step: B * H * Lq <= kSplitMaxRows) take the split-key path
// instead (flash-decoding): the keys of each (row, head) are cut into chunks of kChunk (64;
// 128 when there are several rows), one block per chunk computes the chunk's max m, sum
// l = sum exp(s - m) and unnormalized o = sum exp(s - m) v into a scratch buffer, and the
// last of a (row, head)'s blocks to finish merges the chunks (a counter per (row, head); no
// second launch):
//   M = max m_c, out = sum_c exp(m_c - M) o_c / sum_c exp(m_c - M) l_c.
// That spreads a row's 1500 cross-attention keys over 24 blocks instead of one. When T is
// 16-bit, D == Dv is 4 or 8 vectors of 16 bytes (Whisper's 64) and the tensors are 16-byte
// aligned, a vectorized chunk kernel that requests all its K and V up front replaces the
// generic one. The split kernels let the next kernel launch early (allow_dependents,
// common.cuh): the output projection after them loads its weights meanwhile. With
// AttentionOptions::kv_static (cross-attention over the audio K/V) they also request their
// chunk's K and V before wait_for_inputs() (the vectorized kernel into registers, the
// generic one as L2 prefetches), so that traffic overlaps the q projection's tail; q, the
// key mask and every write stay after the wait.
//
// AttentionOptions::key_len ends a batch item's keys early: every kernel's loop stops there,
// and split chunks past it read nothing (short audio windows in caches of 1500 positions).
//
// Every kernel addresses q, k, v and out through per-operand strides (batch, head, row;
// AttnShape), so attention_tokens runs the same kernels on token-major operands in place:
// heads side by side in rows of any width, e.g. q|k|v of a fused projection.
#include <cmath>
#include <optional>
#include <string>

#include "engine/cuda/common.cuh"
#include "engine/ops/attention.h"

namespace parley::cuda {

namespace {

constexpr int kThreadsAttn = 256;
constexpr size_t kDefaultSharedBytes = 48 * 1024;
constexpr size_t kStaticSharedBytes = 256;  // block_reduce's partials

// Where row i of head h in batch b starts, in elements: b * batch + h * head + i * row.
// [B, H, L, D] has {H * L * D, L * D, D}; token-major [B, L, W] (attention_tokens) has
// {L * W, D, W}.
struct Strides {
  int64_t batch, head, row;
  __device__ int64_t at(int64_t b, int64_t h, int64_t i) const {
    return b * batch + h * head + i * row;
  }
};

struct AttnShape {
  int64_t heads, lq, lk, d, dv;
  float scale;
  bool causal;
  bool kv_static;          // AttentionOptions::kv_static: K/V (and k/v_index) before the wait
  int64_t static_keys;     // AttentionOptions::static_keys: keys below it before the wait
  const int8_t* key_mask;  // [B, Lk] or null
  const int32_t* key_len;  // [B] or null: batch b's keys [0, key_len[b]) (AttentionOptions)
  Strides q, k, v, o;
  const int32_t* k_index;  // [B] or null: batch b reads k's batch k_index[b]
  const int32_t* v_index;
  __device__ int64_t k_batch(int64_t b) const { return k_index ? k_index[b] : b; }
  __device__ int64_t v_batch(int64_t b) const { return v_index ? v_index[b] : b; }
};

// Keys [0, end) that query row i of batch b may see: causal aligns the last query with the
// last key; key_len (read with the K/V, as static as they are) cuts b's keys short.
__device__ __forceinline__ int64_t visible_keys(const AttnShape& s, int64_t b, int64_t i) {
  int64_t end = s.lk;
  if (s.causal) {
    const int64_t last = i + (s.lk - s.lq);
    end = last < 0 ? 0 : (last + 1 < s.lk ? last + 1 : s.lk);
  }
  if (s.key_len) {
    const int64_t len = s.key_len[b];
    end = len < 0 ? 0 : (len < end ? len : end);
  }
  return end;
}

template <typename T>
__global__ void __launch_bounds__(kThreadsAttn)
    attention_kernel(const T* q, const T* k, const T* v, T* out, AttnShape s) {
  extern __shared__ float smem[];
  float* qs = smem;                // [D]
  float* scores = qs + s.d;        // [Lk]
  float* partial = scores + s.lk;  // [kThreadsAttn]
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const T* q_row = q + s.q.at(b, h, i);
  const T* k_head = k + s.k.at(s.k_batch(b), h, 0);
  const T* v_head = v + s.v.at(s.v_batch(b), h, 0);
  T* out_row = out + s.o.at(b, h, i);
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  constexpr int kWarps = kThreadsAttn / 32;

  for (int64_t d = tid; d < s.d; d += kThreadsAttn) qs[d] = dev_to_f32(q_row[d]) * s.scale;
  const int64_t end = visible_keys(s, b, i);  // keys [0, end) before the padding mask
  __syncthreads();

  for (int64_t j = warp; j < end; j += kWarps) {
    const bool masked = s.key_mask && s.key_mask[b * s.lk + j] == 0;
    float dot = 0.0f;
    if (!masked) {
      const T* k_row = k_head + j * s.k.row;
      for (int64_t d = lane; d < s.d; d += 32) dot += qs[d] * dev_to_f32(k_row[d]);
      dot = warp_reduce(dot, SumOp{});
    }
    if (lane == 0) scores[j] = masked ? -INFINITY : dot;
  }
  __syncthreads();

  float m = -INFINITY;
  for (int64_t j = tid; j < end; j += kThreadsAttn) m = MaxOp{}(m, scores[j]);
  m = block_reduce(m, MaxOp{});
  if (m == -INFINITY) {  // no visible key (also end == 0)
    for (int64_t d = tid; d < s.dv; d += kThreadsAttn) out_row[d] = dev_from_f32<T>(0.0f);
    return;
  }
  float sum = 0.0f;
  for (int64_t j = tid; j < end; j += kThreadsAttn) {
    const float p = expf(scores[j] - m);
    scores[j] = p;
    sum += p;
  }
  const float inv = 1.0f / block_reduce(sum, SumOp{});  // block_reduce syncs: scores are ready

  const int64_t groups = s.dv < kThreadsAttn ? kThreadsAttn / s.dv : 1;
  if (groups == 1) {
    for (int64_t d = tid; d < s.dv; d += kThreadsAttn) {
      float acc = 0.0f;
      for (int64_t j = 0; j < end; ++j) acc += scores[j] * dev_to_f32(v_head[j * s.v.row + d]);
      out_row[d] = dev_from_f32<T>(acc * inv);
    }
    return;
  }
  const int64_t g = tid / s.dv, d = tid % s.dv;
  if (g < groups) {
    float acc = 0.0f;
    for (int64_t j = g; j < end; j += groups)
      acc += scores[j] * dev_to_f32(v_head[j * s.v.row + d]);
    partial[tid] = acc;
  }
  __syncthreads();
  if (tid < s.dv) {
    float acc = 0.0f;
    for (int64_t gi = 0; gi < groups; ++gi) acc += partial[gi * s.dv + tid];
    out_row[tid] = dev_from_f32<T>(acc * inv);
  }
}

// Keys per block on the split path: kChunk for one query row, kChunkShort for several (and
// for a single chunk, which needs no merge). Several rows fill the GPU with blocks already:
// on the H200 a beam step's 5-row cross-attention (1500 keys) took 20 us a layer in 2400
// blocks of 64 keys against 15-16 in 1200 of 128, while one row's 24 x 20 blocks of 64
// were 3 us a step faster than 12 x 20 of 128 (bench/RESULTS.md).
constexpr int kChunk = 64;
constexpr int kChunkShort = 128;
constexpr int kThreadsSplit = 128;  // 4 warps
constexpr int64_t kSplitMaxRows = 4096;

// Where the split kernels put a chunk's results. With several chunks: part_m/part_l
// [(r*H+h)*chunks+c] and part_o [((r*H+h)*chunks+c)*Dv + d], merged by a second kernel;
// with one chunk the kernel normalizes and writes out (the operand of dtype T) itself.
struct SplitOut {
  float* part_m;
  float* part_l;
  float* part_o;
  void* out;
  int* counters;  // [rows * H], zero between launches: chunks finished per (row, head)
  int64_t chunks;
  int chunk;  // keys per chunk: kChunk, or kChunkShort (several rows, or chunks == 1)
};

// Merges the chunks of (row r = b * Lq + i, head h) into out[b, h, i, :] (every thread of
// the block calls it): M = max m_c, out = sum_c exp(m_c - M) o_c / sum_c exp(m_c - M) l_c.
// The partial results come from other blocks: read through L2 (__ldcg), never a stale L1.
template <typename T>
__device__ void merge_chunks(const SplitOut& so, const AttnShape& s, int64_t key, int64_t b,
                             int64_t h, int64_t i) {
  __shared__ float part[kThreadsSplit];
  const int tid = int(threadIdx.x);
  const int64_t base = key * so.chunks;
  T* out_row = static_cast<T*>(so.out) + s.o.at(b, h, i);
  float mx = -INFINITY;
  for (int64_t c = tid; c < so.chunks; c += kThreadsSplit)
    mx = MaxOp{}(mx, __ldcg(so.part_m + base + c));
  mx = block_reduce(mx, MaxOp{});
  if (mx == -INFINITY) {  // no visible key in any chunk
    for (int64_t d = tid; d < s.dv; d += kThreadsSplit) out_row[d] = dev_from_f32<T>(0.0f);
    return;
  }
  float l = 0.0f;
  for (int64_t c = tid; c < so.chunks; c += kThreadsSplit)
    l += expf(__ldcg(so.part_m + base + c) - mx) * __ldcg(so.part_l + base + c);
  const float inv = 1.0f / block_reduce(l, SumOp{});
  const auto chunk_sum = [&](int64_t d, int64_t first, int64_t step) {
    float acc = 0.0f;
    for (int64_t c = first; c < so.chunks; c += step)
      acc += expf(__ldcg(so.part_m + base + c) - mx) * __ldcg(so.part_o + (base + c) * s.dv + d);
    return acc;
  };
  if (s.dv > kThreadsSplit / 2) {  // one thread per output, every chunk
    for (int64_t d = tid; d < s.dv; d += kThreadsSplit)
      out_row[d] = dev_from_f32<T>(chunk_sum(d, 0, 1) * inv);
    return;
  }
  // Groups of Dv threads split the chunks; their sums meet in shared memory.
  const int64_t groups = kThreadsSplit / s.dv, g = tid / s.dv, d = tid % s.dv;
  part[tid] = g < groups ? chunk_sum(d, g, groups) : 0.0f;
  __syncthreads();
  if (tid < s.dv) {
    float acc = 0.0f;
    for (int64_t gi = 0; gi < groups; ++gi) acc += part[gi * s.dv + tid];
    out_row[tid] = dev_from_f32<T>(acc * inv);
  }
}

// merge_chunks for the 16-byte kernel's heads (Dv == kDim, a multiple of 4) and at most
// kMergeChunks chunks: every chunk's m and l in one read into shared memory, then every
// partial o requested at once as float4s (Whisper's cross-attention: 24 chunks of 64
// values), where merge_chunks walks the chunks one dependent read after another.
constexpr int kMergeChunks = 256;
template <typename T, int kDim>
__device__ void merge_chunks_vec(const SplitOut& so, const AttnShape& s, int64_t key, int64_t b,
                                 int64_t h, int64_t i) {
  constexpr int kQuads = kDim / 4;                      // float4s per row
  constexpr int kGroups = kThreadsSplit / kQuads;       // chunk groups summed apart
  __shared__ float w[kMergeChunks], l_c[kMergeChunks];  // m_c, then exp(m_c - M); l_c
  __shared__ float4 part[kGroups][kQuads];
  const int tid = int(threadIdx.x), chunks = int(so.chunks);
  const int64_t base = key * so.chunks;
  T* out_row = static_cast<T*>(so.out) + s.o.at(b, h, i);
  float mx = -INFINITY;
  for (int c = tid; c < chunks; c += kThreadsSplit) {
    w[c] = __ldcg(so.part_m + base + c);
    l_c[c] = __ldcg(so.part_l + base + c);
    mx = MaxOp{}(mx, w[c]);
  }
  mx = block_reduce(mx, MaxOp{});  // also orders the writes to w and l_c before the reads
  if (mx == -INFINITY) {           // no visible key in any chunk
    for (int d = tid; d < kDim; d += kThreadsSplit) out_row[d] = dev_from_f32<T>(0.0f);
    return;
  }
  float l = 0.0f;
  for (int c = tid; c < chunks; c += kThreadsSplit) {
    w[c] = expf(w[c] - mx);
    l += w[c] * l_c[c];
  }
  const float inv = 1.0f / block_reduce(l, SumOp{});
  const int q = tid % kQuads, g = tid / kQuads;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const float4* o = reinterpret_cast<const float4*>(so.part_o + base * kDim) + q;
#pragma unroll 4
  for (int c = g; c < chunks; c += kGroups) {
    const float4 v = __ldcg(o + int64_t(c) * kQuads);
    const float wc = w[c];
    acc.x += wc * v.x;
    acc.y += wc * v.y;
    acc.z += wc * v.z;
    acc.w += wc * v.w;
  }
  part[g][q] = acc;
  __syncthreads();
  if (tid < kQuads) {
    float4 sum = part[0][tid];
    for (int gi = 1; gi < kGroups; ++gi) {
      sum.x += part[gi][tid].x;
      sum.y += part[gi][tid].y;
      sum.z += part[gi][tid].z;
      sum.w += part[gi][tid].w;
    }
    out_row[4 * tid] = dev_from_f32<T>(sum.x * inv);
    out_row[4 * tid + 1] = dev_from_f32<T>(sum.y * inv);
    out_row[4 * tid + 2] = dev_from_f32<T>(sum.z * inv);
    out_row[4 * tid + 3] = dev_from_f32<T>(sum.w * inv);
  }
}

// Ends a chunk's block (every thread of the block calls it, with the same m and l; o[d] for
// d < Dv comes from o_at(d); m == -inf means no visible key). With one chunk it writes the
// output; with several it writes the chunk's m, l and o, and the last block of the (row,
// head) to finish merges them: a counter per (row, head) instead of a second launch
// (last_to_finish, common.cuh), reset to zero by that block. kDim > 0:
// the 16-byte kernel's merge (merge_chunks_vec).
template <typename T, int kDim = 0, typename OAt>
__device__ __forceinline__ void finish_chunk(const SplitOut& so, const AttnShape& s, int64_t slot,
                                             int64_t b, int64_t h, int64_t i, float m, float l,
                                             OAt o_at) {
  const int tid = int(threadIdx.x);
  if (so.chunks == 1) {
    T* out_row = static_cast<T*>(so.out) + s.o.at(b, h, i);
    const float inv = m == -INFINITY ? 0.0f : 1.0f / l;
    for (int64_t d = tid; d < s.dv; d += kThreadsSplit)
      out_row[d] = dev_from_f32<T>(m == -INFINITY ? 0.0f : o_at(d) * inv);
    return;
  }
  if (tid == 0) {
    so.part_m[slot] = m;
    so.part_l[slot] = l;
  }
  float* o_out = so.part_o + slot * s.dv;
  for (int64_t d = tid; d < s.dv; d += kThreadsSplit) o_out[d] = m == -INFINITY ? 0.0f : o_at(d);
  const int64_t key = slot / so.chunks;  // r * H + h
  if (!last_to_finish(so.counters + key, int(so.chunks))) return;
  if constexpr (kDim > 0)
    merge_chunks_vec<T, kDim>(so, s, key, b, h, i);
  else
    merge_chunks<T>(so, s, key, b, h, i);
}

// P V for one chunk: sum_j p[j] v[j][d] for j < n, d < dv, handed to finish_chunk. Each v
// row is read by dv / kVec threads (kVec elements of one `Pack` each, dv % kVec == 0) and
// 128 / (dv / kVec) key groups stride over the keys; the groups' partial rows (partial:
// [kThreadsSplit * kVec] floats) are added through shared memory. Rows wider than 128
// packs (kVec == 1 only) take one thread per output instead. Every thread calls it.
template <typename T, int kVec, typename Store>
__device__ __forceinline__ void chunk_pv(const float* p, int n, const T* v_head, int64_t v_row,
                                         int dv, float* partial, Store store) {
  struct alignas(sizeof(T) * kVec) Pack {
    T e[kVec];
  };
  const int tid = int(threadIdx.x), lanes = dv / kVec;
  if (lanes > kThreadsSplit) {
    store([&](int64_t d) {
      float acc = 0.0f;
      for (int j = 0; j < n; ++j) acc += p[j] * dev_to_f32(v_head[j * v_row + d]);
      return acc;
    });
    return;
  }
  const int groups = kThreadsSplit / lanes, g = tid / lanes, sub = tid % lanes;
  if (g < groups) {
    float acc[kVec];
#pragma unroll
    for (int x = 0; x < kVec; ++x) acc[x] = 0.0f;
    const T* v_sub = v_head + sub * kVec;
    for (int j = g; j < n; j += groups) {
      const Pack raw = *reinterpret_cast<const Pack*>(v_sub + int64_t(j) * v_row);
      const float pj = p[j];
#pragma unroll
      for (int x = 0; x < kVec; ++x) acc[x] += pj * dev_to_f32(raw.e[x]);
    }
#pragma unroll
    for (int x = 0; x < kVec; ++x) partial[g * dv + sub * kVec + x] = acc[x];
  }
  __syncthreads();
  store([&](int64_t d) {
    float sum = 0.0f;
#pragma unroll 4
    for (int gi = 0; gi < groups; ++gi) sum += partial[gi * dv + d];
    return sum;
  });
}

// The keys [j0, j0 + n) of chunk c for query i (n <= 0: none).
__device__ __forceinline__ int chunk_keys(const AttnShape& s, const SplitOut& so, int64_t c,
                                          int64_t b, int64_t i, int64_t* j0) {
  const int64_t end = visible_keys(s, b, i);
  *j0 = c * so.chunk;
  const int64_t n = end - *j0;
  return int(n < so.chunk ? (n < 0 ? 0 : n) : so.chunk);
}

// Asks L2 for n rows of len elements at head (stride `row` elements), one request per
// 128-byte line, without waiting for them (every thread calls it).
template <typename T>
__device__ __forceinline__ void prefetch_rows_l2(const T* head, int64_t row, int n, int64_t len) {
  constexpr int kLine = 128 / sizeof(T);  // elements per line
  const int lines = int((len + kLine - 1) / kLine);
  for (int x = int(threadIdx.x); x < n * lines; x += kThreadsSplit) {
    const T* at = head + (x / lines) * row + (x % lines) * kLine;
    asm volatile("prefetch.global.L2 [%0];" ::"l"(at));
  }
}

// One block per (chunk c, head h, row r = b * Lq + i). With s.kv_static it prefetches the
// chunk's K/V rows into L2 before waiting for q.
template <typename T>
__global__ void __launch_bounds__(kThreadsSplit)
    attention_split_kernel(const T* q, const T* k, const T* v, AttnShape s, SplitOut so) {
  extern __shared__ float smem[];
  if (!s.kv_static) wait_for_inputs();
  float* qs = smem;                  // [D]
  float* p = qs + s.d;               // [kChunkShort]
  float* partial = p + kChunkShort;  // [kThreadsSplit]
  const int64_t c = blockIdx.x, h = blockIdx.y, r = blockIdx.z;
  const int64_t b = r / s.lq, i = r - b * s.lq;
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  constexpr int kWarps = kThreadsSplit / 32;
  const int64_t slot = (r * s.heads + h) * so.chunks + c;
  const auto zeros = [](int64_t) { return 0.0f; };

  int64_t j0 = 0;
  const int n = chunk_keys(s, so, c, b, i, &j0);
  if (n == 0) {
    if (s.kv_static) wait_for_inputs();
    allow_dependents();
    finish_chunk<T>(so, s, slot, b, h, i, -INFINITY, 0.0f, zeros);
    return;
  }
  const T* k_head = k + s.k.at(s.k_batch(b), h, j0);
  const T* v_head = v + s.v.at(s.v_batch(b), h, j0);
  if (s.kv_static) {  // the chunk's K/V on their way to L2 while the q projection finishes
    prefetch_rows_l2(k_head, s.k.row, n, s.d);
    prefetch_rows_l2(v_head, s.v.row, n, s.dv);
    wait_for_inputs();
  }
  allow_dependents();
  const T* q_row = q + s.q.at(b, h, i);
  for (int64_t d = tid; d < s.d; d += kThreadsSplit) qs[d] = dev_to_f32(q_row[d]) * s.scale;
  __syncthreads();

  for (int j = warp; j < n; j += kWarps) {
    const bool masked = s.key_mask && s.key_mask[b * s.lk + j0 + j] == 0;
    float dot = 0.0f;
    if (!masked) {
      const T* k_row = k_head + j * s.k.row;
      for (int64_t d = lane; d < s.d; d += 32) dot += qs[d] * dev_to_f32(k_row[d]);
      dot = warp_reduce(dot, SumOp{});
    }
    if (lane == 0) p[j] = masked ? -INFINITY : dot;
  }
  __syncthreads();
  // Every thread computes the chunk's max and sum itself (n values in shared memory).
  float m = -INFINITY;
  for (int j = 0; j < n; ++j) m = MaxOp{}(m, p[j]);
  if (m == -INFINITY) {  // every key of the chunk is masked
    finish_chunk<T>(so, s, slot, b, h, i, -INFINITY, 0.0f, zeros);
    return;
  }
  __syncthreads();  // everyone has read the raw scores
  for (int j = tid; j < n; j += kThreadsSplit) p[j] = expf(p[j] - m);
  __syncthreads();
  float l = 0.0f;
  for (int j = 0; j < n; ++j) l += p[j];
  chunk_pv<T, 1>(p, n, v_head, s.v.row, int(s.dv), partial,
                 [&](auto o_at) { finish_chunk<T>(so, s, slot, b, h, i, m, l, o_at); });
}

// The split path's fast variant for 16-bit T with D == Dv == LANES * 8 (16-byte vectors;
// Whisper's D = 64 is 8 lanes per key): thread (group g, lane sub) reads the vectors sub of
// keys g, g + G, g + 2G, ... (G = 128 / LANES groups) of K and of V, every one of them
// requested up front with q, before any arithmetic: a chunk costs one memory round trip
// instead of one per pass (the cross-attention reads 1500 keys from DRAM every step). A
// key's dot product is a log2(LANES) shuffle reduction; warp 0 takes the chunk's max and
// sum; each thread then adds p[j] v[j] over its own keys, and the groups' rows meet in
// shared memory.
template <typename T, int kLanes>
__global__ void __launch_bounds__(kThreadsSplit)
    attention_split_vec_kernel(const T* q, const T* k, const T* v, AttnShape s, SplitOut so) {
  static_assert(sizeof(T) == 2, "16-byte vectors of 8 elements");
  constexpr int kVec = 8;
  constexpr int kDim = kLanes * kVec;
  constexpr int kGroups = kThreadsSplit / kLanes;  // keys in flight per pass
  constexpr int kPasses = kChunkShort / kGroups;   // keys per thread at most
  __shared__ float p[kChunkShort];
  __shared__ float o_part[kGroups][kDim];
  __shared__ float chunk_m, chunk_l;
  // K/V that no kernel of this step writes are requested before the wait: every key with
  // kv_static, the cached positions below static_keys otherwise.
  const bool early = s.kv_static || s.static_keys > 0;
  if (!early) wait_for_inputs();
  const int64_t c = blockIdx.x, h = blockIdx.y, r = blockIdx.z;
  const int64_t b = r / s.lq, i = r - b * s.lq;
  const int tid = int(threadIdx.x), lane = tid & 31, sub = tid % kLanes, grp = tid / kLanes;
  const int64_t slot = (r * s.heads + h) * so.chunks + c;
  const auto zeros = [](int64_t) { return 0.0f; };

  int64_t j0 = 0;
  const int n = chunk_keys(s, so, c, b, i, &j0);
  if (n == 0) {
    if (early) wait_for_inputs();
    allow_dependents();
    finish_chunk<T, kDim>(so, s, slot, b, h, i, -INFINITY, 0.0f, zeros);
    return;
  }
  const T* k_head = k + s.k.at(s.k_batch(b), h, j0) + sub * kVec;
  const T* v_head = v + s.v.at(s.v_batch(b), h, j0) + sub * kVec;
  // Keys [0, static_n) of the chunk before the wait, [static_n, n) after it.
  const int64_t below = s.static_keys - j0;
  const int static_n = s.kv_static ? n : int(below < 0 ? 0 : (below < n ? below : n));
  uint4 k_raw[kPasses], v_raw[kPasses];
  const auto load_kv = [&](int from, int to) {
#pragma unroll
    for (int x = 0; x < kPasses; ++x) {
      const int j = grp + x * kGroups;
      if (j < from || j >= to) continue;
      k_raw[x] = *reinterpret_cast<const uint4*>(k_head + int64_t(j) * s.k.row);
      v_raw[x] = *reinterpret_cast<const uint4*>(v_head + int64_t(j) * s.v.row);
    }
  };
#pragma unroll
  for (int x = 0; x < kPasses; ++x) k_raw[x] = v_raw[x] = make_uint4(0, 0, 0, 0);
  load_kv(0, static_n);
  if (early) wait_for_inputs();  // K/V requested: now q, which the last kernel wrote
  load_kv(static_n, n);
  allow_dependents();
  const uint4 q_raw = *reinterpret_cast<const uint4*>(q + s.q.at(b, h, i) + sub * kVec);
  float qf[kVec];
  {
    const T* e = reinterpret_cast<const T*>(&q_raw);
#pragma unroll
    for (int x = 0; x < kVec; ++x) qf[x] = dev_to_f32(e[x]) * s.scale;
  }
  // Every lane of a warp runs every pass (the shuffles need all 32).
#pragma unroll
  for (int x = 0; x < kPasses; ++x) {
    const int j = grp + x * kGroups;
    const T* e = reinterpret_cast<const T*>(&k_raw[x]);
    float dot = 0.0f;
#pragma unroll
    for (int y = 0; y < kVec; ++y) dot += qf[y] * dev_to_f32(e[y]);
#pragma unroll
    for (int off = kLanes / 2; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
    if (j < n && sub == 0) {
      const bool masked = s.key_mask && s.key_mask[b * s.lk + j0 + j] == 0;
      p[j] = masked ? -INFINITY : dot;
    }
  }
  __syncthreads();
  if (tid < 32) {
    float m = -INFINITY;
    for (int j = lane; j < n; j += 32) m = MaxOp{}(m, p[j]);
    m = warp_reduce(m, MaxOp{});
    float l = 0.0f;
    if (m != -INFINITY) {
      for (int j = lane; j < n; j += 32) {
        const float e = expf(p[j] - m);
        p[j] = e;
        l += e;
      }
      l = warp_reduce(l, SumOp{});
    }
    if (lane == 0) {
      chunk_m = m;
      chunk_l = l;
    }
  }
  __syncthreads();
  const float m = chunk_m, l = chunk_l;
  if (m == -INFINITY) {  // every key of the chunk is masked
    finish_chunk<T, kDim>(so, s, slot, b, h, i, -INFINITY, 0.0f, zeros);
    return;
  }
  float acc[kVec] = {};
#pragma unroll
  for (int x = 0; x < kPasses; ++x) {
    const int j = grp + x * kGroups;
    if (j >= n) break;
    const float pj = p[j];
    const T* e = reinterpret_cast<const T*>(&v_raw[x]);
#pragma unroll
    for (int y = 0; y < kVec; ++y) acc[y] += pj * dev_to_f32(e[y]);
  }
#pragma unroll
  for (int y = 0; y < kVec; ++y) o_part[grp][sub * kVec + y] = acc[y];
  __syncthreads();
  finish_chunk<T, kDim>(so, s, slot, b, h, i, m, l, [&](int64_t d) {
    float sum = 0.0f;
#pragma unroll 4
    for (int g = 0; g < kGroups; ++g) sum += o_part[g][d];
    return sum;
  });
}

// The split path's per-(row, head) chunk counters (LastBlockCounters, common.cuh).
int* split_counters(int64_t n) {
  static LastBlockCounters counters("attention", kSplitMaxRows);
  return counters.get(n);
}

// q, k, v: element pointers at the first head's column, laid out as s says; out is
// contiguous (zeroed when there are no keys).
void launch_attention(const void* q, const void* k, const void* v, Tensor& out, int64_t batch,
                      const AttnShape& s) {
  constexpr const char* kOp = "attention";
  const int64_t heads = s.heads, lq = s.lq, lk = s.lk, d = s.d, dv = s.dv;
  const int64_t rows = batch * lq;
  if (rows * heads <= kSplitMaxRows && heads <= 65535) {
    SplitOut so{};
    so.chunk = lk <= kChunkShort || rows > 1 ? kChunkShort : kChunk;
    so.chunks = (lk + so.chunk - 1) / so.chunk;
    so.out = out.raw();
    if (so.chunks == 0) {  // no keys at all: every row is zeros
      check_cuda(cudaMemsetAsync(out.raw(), 0, out.nbytes(), stream()),
                 "cudaMemsetAsync (attention)");
      return;
    }
    const size_t smem = size_t(d + kChunkShort + kThreadsSplit) * sizeof(float);
    if (!(smem + kStaticSharedBytes <= shared_memory_optin()))
      throw Error(ErrorKind::unsupported,
                  "[attention] D = " + std::to_string(d) + " is too large for shared memory");
    std::optional<Scratch> scratch;  // the chunks' partial results, when there are several
    if (so.chunks > 1) {
      const int64_t slots = rows * heads * so.chunks;
      const int64_t o_at = (2 * slots + 3) / 4 * 4;  // part_o 16-byte aligned (float4 reads)
      scratch.emplace(size_t(o_at + slots * dv) * sizeof(float));
      so.part_m = static_cast<float*>(scratch->data());
      so.part_l = so.part_m + slots;
      so.part_o = so.part_m + o_at;
      so.counters = split_counters(rows * heads);
    }
    dispatch_device_float(out.dtype(), kOp, [&](auto tag) {
      using T = decltype(tag);
      const T* tq = static_cast<const T*>(q);
      const T* tk = static_cast<const T*>(k);
      const T* tv = static_cast<const T*>(v);
      if (smem > kDefaultSharedBytes)
        check_cuda(cudaFuncSetAttribute(attention_split_kernel<T>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
                   "cudaFuncSetAttribute (attention shared memory)");
      const dim3 grid{unsigned(so.chunks), unsigned(heads), unsigned(rows)};
      // 16-byte loads need every row start aligned: the pointers and each stride.
      uint64_t bits = reinterpret_cast<uintptr_t>(q) | reinterpret_cast<uintptr_t>(k) |
                      reinterpret_cast<uintptr_t>(v);
      for (const Strides& st : {s.q, s.k, s.v})
        bits |= uint64_t(st.batch | st.head | st.row) * sizeof(T);
      const bool aligned = (bits & 15u) == 0;
      // 8 lanes is Whisper's D = 64; wider heads would keep too many vectors in registers.
      const int64_t lanes =
          sizeof(T) == 2 && d == dv && d % 8 == 0 && aligned && so.chunks <= kMergeChunks ? d / 8
                                                                                          : 0;
      if constexpr (sizeof(T) == 2) {
        if (lanes == 4 || lanes == 8) {
          launch_dependent(
              lanes == 4 ? attention_split_vec_kernel<T, 4> : attention_split_vec_kernel<T, 8>,
              grid, dim3(kThreadsSplit), 0, tq, tk, tv, s, so);
          return;
        }
      }
      launch_dependent(attention_split_kernel<T>, grid, dim3(kThreadsSplit), smem, tq, tk, tv, s,
                       so);
    });
    check_launch(kOp);
    return;
  }

  if (!(batch <= 65535 && heads <= 65535 && lq <= int64_t(0x7fffffff)))
    throw Error(ErrorKind::unsupported,
                "[attention] B = " + std::to_string(batch) + ", H = " + std::to_string(heads) +
                    ", Lq = " + std::to_string(lq) + " exceed the CUDA grid (B, H <= 65535)");
  const size_t smem = size_t(d + lk + kThreadsAttn) * sizeof(float);
  if (!(smem + kStaticSharedBytes <= shared_memory_optin()))
    throw Error(ErrorKind::unsupported,
                "[attention] Lk = " + std::to_string(lk) + ", D = " + std::to_string(d) + " need " +
                    std::to_string(smem) + " bytes of shared memory; this device allows " +
                    std::to_string(shared_memory_optin()) +
                    " (the reference kernel keeps a row of scores)");

  dispatch_device_float(out.dtype(), kOp, [&](auto tag) {
    using T = decltype(tag);
    if (smem > kDefaultSharedBytes)
      check_cuda(cudaFuncSetAttribute(attention_kernel<T>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
                 "cudaFuncSetAttribute (attention shared memory)");
    const dim3 grid{unsigned(lq), unsigned(heads), unsigned(batch)};
    attention_kernel<T>
        <<<grid, kThreadsAttn, smem, stream()>>>(static_cast<const T*>(q), static_cast<const T*>(k),
                                                 static_cast<const T*>(v), out.data<T>(), s);
  });
  check_launch(kOp);
}

AttnShape base_shape(int64_t heads, int64_t lq, int64_t lk, int64_t d, int64_t dv,
                     const AttentionOptions& opt) {
  AttnShape s{};
  s.heads = heads;
  s.lq = lq;
  s.lk = lk;
  s.d = d;
  s.dv = dv;
  s.scale = opt.scale != 0.0f ? opt.scale : 1.0f / std::sqrt(float(d));
  s.causal = opt.causal;
  s.kv_static = opt.kv_static;
  s.static_keys = opt.static_keys;
  s.key_mask = opt.key_mask ? opt.key_mask->data<int8_t>() : nullptr;
  s.key_len = opt.key_len ? opt.key_len->data<int32_t>() : nullptr;
  return s;
}

}  // namespace

void attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
               const AttentionOptions& opt) {
  const int64_t batch = q.dim(0), heads = q.dim(1), lq = q.dim(2), d = q.dim(3);
  const int64_t lk = k.dim(2), dv = v.dim(3);
  if (out.numel() == 0) return;
  AttnShape s = base_shape(heads, lq, lk, d, dv, opt);
  s.q = {heads * lq * d, lq * d, d};
  s.k = {heads * lk * d, lk * d, d};
  s.v = {heads * lk * dv, lk * dv, dv};
  s.o = {heads * lq * dv, lq * dv, dv};
  s.k_index = s.v_index = opt.batch_index ? opt.batch_index->data<int32_t>() : nullptr;
  launch_attention(q.raw(), k.raw(), v.raw(), out, batch, s);
}

void attention_tokens(const TokenHeads& q, const TokenHeads& k, const TokenHeads& v, int64_t n_keys,
                      int n_head, Tensor& out, const AttentionOptions& opt) {
  const int64_t batch = out.dim(0), lq = out.dim(1), d = out.dim(2) / n_head;
  AttnShape s = base_shape(n_head, lq, n_keys, d, d, opt);
  s.q = {q.t.dim(1) * q.t.dim(2), d, q.t.dim(2)};
  s.k = {k.t.dim(1) * k.t.dim(2), d, k.t.dim(2)};
  s.v = {v.t.dim(1) * v.t.dim(2), d, v.t.dim(2)};
  s.o = {out.dim(1) * out.dim(2), d, out.dim(2)};
  s.k_index = k.batch_index ? k.batch_index->data<int32_t>() : nullptr;
  s.v_index = v.batch_index ? v.batch_index->data<int32_t>() : nullptr;
  const size_t bytes = dtype_size(out.dtype());
  const auto at_col = [&](const TokenHeads& x) {
    return static_cast<const char*>(x.t.raw()) + size_t(x.col) * bytes;
  };
  launch_attention(at_col(q), at_col(k), at_col(v), out, batch, s);
}

}  // namespace parley::cuda
