// The fused chat-model ops on CUDA (ops/llm_fused.h), each one launch:
//   add_rms_norm    one block per row: the sum rounded to the row's dtype and stored, its
//                   squares summed (block_reduce), then the normalized row from the stored
//                   values (as add then rms_norm compute it);
//   qkv_rope_write  one block per (token, head of q | k | v) with D / 2 threads (at least a
//                   warp): thread i holds the pair (i, i + D / 2), the head's RMSNorm (q and k,
//                   when given), the rotation, and the store into q_out or the cache slot;
//   glu_halves      a grid-stride loop over [T, I].
#include <cstdint>

#include "engine/cuda/common.cuh"
#include "engine/ops/llm_fused.h"

namespace parley::cuda {

namespace {

template <typename E>
__global__ void add_rms_norm_kernel(E* h, const E* __restrict__ y, E* out, ParamRef gamma,
                                    int64_t d, float eps) {
  E* row = h + int64_t(blockIdx.x) * d;
  const E* yr = y + int64_t(blockIdx.x) * d;
  E* o = out + int64_t(blockIdx.x) * d;
  float sq = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const E s = dev_from_f32<E>(dev_to_f32(row[i]) + dev_to_f32(yr[i]));
    row[i] = s;
    const float v = dev_to_f32(s);
    sq += v * v;
  }
  const float inv = 1.0f / sqrtf(block_reduce(sq, SumOp{}) / float(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
    o[i] = dev_from_f32<E>(dev_to_f32(row[i]) * inv * load_param(gamma, i));
}

struct QkvParams {
  int hq, hkv, half;
  float eps;
};

template <typename E>
__global__ void qkv_rope_kernel(const E* __restrict__ qkv, E* __restrict__ q_out, E* kc, E* vc,
                                const int32_t* __restrict__ pos, const float* __restrict__ inv_freq,
                                const int32_t* __restrict__ slots, ParamRef q_norm, ParamRef k_norm,
                                QkvParams p) {
  const int64_t t = blockIdx.x;
  const int hh = int(blockIdx.y), i = int(threadIdx.x), d = 2 * p.half;
  const int heads = p.hq + 2 * p.hkv;
  const E* src = qkv + (t * heads + hh) * d;
  const bool active = i < p.half;
  float x0 = active ? dev_to_f32(src[i]) : 0.0f;
  float x1 = active ? dev_to_f32(src[i + p.half]) : 0.0f;
  const int64_t slot = slots[t];
  if (hh >= p.hq + p.hkv) {  // v: straight into the cache
    if (active) {
      E* dst = vc + (slot * p.hkv + (hh - p.hq - p.hkv)) * d;
      dst[i] = src[i];
      dst[i + p.half] = src[i + p.half];
    }
    return;
  }
  const bool is_q = hh < p.hq;
  const ParamRef norm = is_q ? q_norm : k_norm;
  if (norm.ptr) {  // uniform across the block: every thread reaches the reduction
    const float inv = 1.0f / sqrtf(block_reduce(x0 * x0 + x1 * x1, SumOp{}) / float(d) + p.eps);
    if (active) {
      x0 = dev_to_f32(dev_from_f32<E>(x0 * inv * load_param(norm, i)));
      x1 = dev_to_f32(dev_from_f32<E>(x1 * inv * load_param(norm, i + p.half)));
    }
  }
  if (!active) return;
  float s, c;
  sincosf(float(pos[t]) * inv_freq[i], &s, &c);
  E* dst = is_q ? q_out + (t * p.hq + hh) * d : kc + (slot * p.hkv + (hh - p.hq)) * d;
  dst[i] = dev_from_f32<E>(x0 * c - x1 * s);
  dst[i + p.half] = dev_from_f32<E>(x1 * c + x0 * s);
}

template <typename E, bool kSilu>
__global__ void glu_halves_kernel(const E* __restrict__ gu, E* __restrict__ out, int64_t n,
                                  int64_t inter) {
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = idx / inter, c = idx % inter;
    out[idx] = dev_from_f32<E>(glu_gate(dev_to_f32(gu[r * 2 * inter + c]), kSilu) *
                               dev_to_f32(gu[r * 2 * inter + inter + c]));
  }
}

}  // namespace

void add_rms_norm(Tensor& h, const Tensor& y, const Tensor& gamma, float eps, Tensor& out) {
  const int64_t rows = h.dim(0), d = h.dim(1);
  if (rows == 0) return;
  check_rows(rows, "add_rms_norm");
  dispatch_device_float(h.dtype(), "add_rms_norm", [&](auto tag) {
    using E = decltype(tag);
    add_rms_norm_kernel<E><<<unsigned(rows), threads_for_row(d), 0, stream()>>>(
        static_cast<E*>(h.raw()), static_cast<const E*>(y.raw()), static_cast<E*>(out.raw()),
        param_ref(&gamma), d, eps);
  });
  check_launch("add_rms_norm");
}

void qkv_rope_write(const Tensor& qkv, const QkvRope& a, Tensor& q_out, Tensor& k_cache,
                    Tensor& v_cache) {
  const int64_t t = qkv.dim(0), d = q_out.dim(2);
  if (t == 0) return;
  check_rows(t, "qkv_rope_write");
  QkvParams p{int(a.n_q_heads), int(a.n_kv_heads), int(d / 2), a.eps};
  const int threads = int(std::max<int64_t>(32, (d / 2 + 31) / 32 * 32));
  const dim3 grid(unsigned(t), unsigned(a.n_q_heads + 2 * a.n_kv_heads));
  dispatch_device_float(qkv.dtype(), "qkv_rope_write", [&](auto tag) {
    using E = decltype(tag);
    qkv_rope_kernel<E><<<grid, threads, 0, stream()>>>(
        static_cast<const E*>(qkv.raw()), static_cast<E*>(q_out.raw()),
        static_cast<E*>(k_cache.raw()), static_cast<E*>(v_cache.raw()),
        a.positions->data<int32_t>(), a.inv_freq->data<float>(), a.slots->data<int32_t>(),
        param_ref(a.q_norm), param_ref(a.k_norm), p);
  });
  check_launch("qkv_rope_write");
}

void glu_halves(const Tensor& gate_up, GluActivation act, Tensor& out) {
  const int64_t inter = gate_up.dim(1) / 2, n = gate_up.dim(0) * inter;
  if (n == 0) return;
  dispatch_device_float(gate_up.dtype(), "glu_halves", [&](auto tag) {
    using E = decltype(tag);
    const E* gu = static_cast<const E*>(gate_up.raw());
    E* o = static_cast<E*>(out.raw());
    if (act == GluActivation::silu)
      glu_halves_kernel<E, true><<<grid_for(n), kThreads, 0, stream()>>>(gu, o, n, inter);
    else
      glu_halves_kernel<E, false><<<grid_for(n), kThreads, 0, stream()>>>(gu, o, n, inter);
  });
  check_launch("glu_halves");
}

}  // namespace parley::cuda
