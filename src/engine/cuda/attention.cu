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
#include <cmath>
#include <string>

#include "engine/cuda/common.cuh"
#include "engine/ops/attention.h"

namespace parley::cuda {

namespace {

constexpr int kThreadsAttn = 256;
constexpr size_t kDefaultSharedBytes = 48 * 1024;
constexpr size_t kStaticSharedBytes = 256;  // block_reduce's partials

struct AttnShape {
  int64_t heads, lq, lk, d, dv;
  float scale;
  bool causal;
  const int8_t* key_mask;  // [B, Lk] or null
};

template <typename T>
__global__ void __launch_bounds__(kThreadsAttn)
    attention_kernel(const T* q, const T* k, const T* v, T* out, AttnShape s) {
  extern __shared__ float smem[];
  float* qs = smem;                // [D]
  float* scores = qs + s.d;        // [Lk]
  float* partial = scores + s.lk;  // [kThreadsAttn]
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t bh = b * s.heads + h;
  const T* q_row = q + (bh * s.lq + i) * s.d;
  const T* k_head = k + bh * s.lk * s.d;
  const T* v_head = v + bh * s.lk * s.dv;
  T* out_row = out + (bh * s.lq + i) * s.dv;
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  constexpr int kWarps = kThreadsAttn / 32;

  for (int64_t d = tid; d < s.d; d += kThreadsAttn) qs[d] = dev_to_f32(q_row[d]) * s.scale;
  int64_t end = s.lk;  // keys [0, end) are visible before the padding mask
  if (s.causal) {
    const int64_t last = i + (s.lk - s.lq);
    end = last < 0 ? 0 : (last + 1 < s.lk ? last + 1 : s.lk);
  }
  __syncthreads();

  for (int64_t j = warp; j < end; j += kWarps) {
    const bool masked = s.key_mask && s.key_mask[b * s.lk + j] == 0;
    float dot = 0.0f;
    if (!masked) {
      const T* k_row = k_head + j * s.d;
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
      for (int64_t j = 0; j < end; ++j) acc += scores[j] * dev_to_f32(v_head[j * s.dv + d]);
      out_row[d] = dev_from_f32<T>(acc * inv);
    }
    return;
  }
  const int64_t g = tid / s.dv, d = tid % s.dv;
  if (g < groups) {
    float acc = 0.0f;
    for (int64_t j = g; j < end; j += groups) acc += scores[j] * dev_to_f32(v_head[j * s.dv + d]);
    partial[tid] = acc;
  }
  __syncthreads();
  if (tid < s.dv) {
    float acc = 0.0f;
    for (int64_t gi = 0; gi < groups; ++gi) acc += partial[gi * s.dv + tid];
    out_row[tid] = dev_from_f32<T>(acc * inv);
  }
}

}  // namespace

void attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
               const AttentionOptions& opt) {
  constexpr const char* kOp = "attention";
  const int64_t batch = q.dim(0), heads = q.dim(1), lq = q.dim(2), d = q.dim(3);
  const int64_t lk = k.dim(2), dv = v.dim(3);
  if (out.numel() == 0) return;
  AttnShape s{};
  s.heads = heads;
  s.lq = lq;
  s.lk = lk;
  s.d = d;
  s.dv = dv;
  s.scale = opt.scale != 0.0f ? opt.scale : 1.0f / std::sqrt(float(d));
  s.causal = opt.causal;
  s.key_mask = opt.key_mask ? opt.key_mask->data<int8_t>() : nullptr;

  check(batch <= 65535 && heads <= 65535 && lq <= int64_t(0x7fffffff), ErrorKind::unsupported,
        "[attention] B = " + std::to_string(batch) + ", H = " + std::to_string(heads) +
            ", Lq = " + std::to_string(lq) + " exceed the CUDA grid (B, H <= 65535)");
  const size_t smem = size_t(d + lk + kThreadsAttn) * sizeof(float);
  check(smem + kStaticSharedBytes <= shared_memory_optin(), ErrorKind::unsupported,
        "[attention] Lk = " + std::to_string(lk) + ", D = " + std::to_string(d) + " need " +
            std::to_string(smem) + " bytes of shared memory; this device allows " +
            std::to_string(shared_memory_optin()) +
            " (the reference kernel keeps a row of scores)");

  dispatch_device_float(q.dtype(), kOp, [&](auto tag) {
    using T = decltype(tag);
    if (smem > kDefaultSharedBytes)
      check_cuda(cudaFuncSetAttribute(attention_kernel<T>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
                 "cudaFuncSetAttribute (attention shared memory)");
    const dim3 grid{unsigned(lq), unsigned(heads), unsigned(batch)};
    attention_kernel<T><<<grid, kThreadsAttn, smem, stream()>>>(q.data<T>(), k.data<T>(),
                                                                v.data<T>(), out.data<T>(), s);
  });
  check_launch(kOp);
}

}  // namespace parley::cuda
