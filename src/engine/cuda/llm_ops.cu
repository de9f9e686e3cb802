// The chat-model element-wise ops on CUDA: rope (ops/rope.h), paged_kv_write
// (ops/paged_attention.h) and glu (ops/glu.h), for f32, f16 and bf16 tensors; every value
// is computed in f32 and rounded once. Each is a grid-stride loop; they are a few percent of
// a decoder layer's time (the GEMMs and attention are the rest), so they stay simple.
#include <cstdint>

#include "engine/cuda/common.cuh"
#include "engine/ops/glu.h"
#include "engine/ops/paged_attention.h"
#include "engine/ops/rope.h"

namespace parley::cuda {

namespace {

// x [T, H, 2 * half] in place: pair (i, i + half) of token t rotated by pos[t] * inv_freq[i].
// The angle and its sine and cosine in f32 (cosf/sinf, not the fast intrinsics), as the CPU.
template <typename E>
__global__ void rope_kernel(E* x, const int32_t* __restrict__ pos,
                            const float* __restrict__ inv_freq, int64_t n, int n_head, int half) {
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int i = int(idx % half);
    const int64_t th = idx / half;  // t * n_head + h
    const int64_t t = th / n_head;
    const float a = float(pos[t]) * inv_freq[i];
    float s, c;
    sincosf(a, &s, &c);
    E* row = x + th * 2 * half;
    const float x0 = dev_to_f32(row[i]), x1 = dev_to_f32(row[i + half]);
    row[i] = dev_from_f32<E>(x0 * c - x1 * s);
    row[i + half] = dev_from_f32<E>(x1 * c + x0 * s);
  }
}

// Token t's row of `row` elements goes to slot slots[t] of each cache.
template <typename E>
__global__ void kv_write_kernel(const E* __restrict__ k, const E* __restrict__ v,
                                const int32_t* __restrict__ slots, E* kc, E* vc, int64_t n,
                                int64_t row) {
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = idx / row, e = idx % row;
    const int64_t dst = int64_t(slots[t]) * row + e;
    kc[dst] = k[idx];
    vc[dst] = v[idx];
  }
}

template <typename E, bool kSilu>
__global__ void glu_kernel(const E* gate, const E* up, E* out, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = dev_from_f32<E>(glu_gate(dev_to_f32(gate[i]), kSilu) * dev_to_f32(up[i]));
  }
}

}  // namespace

void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq) {
  const int64_t n_head = x.dim(1), half = x.dim(2) / 2, n = x.dim(0) * n_head * half;
  if (n == 0) return;
  dispatch_device_float(x.dtype(), "rope", [&](auto tag) {
    using E = decltype(tag);
    rope_kernel<E><<<grid_for(n), kThreads, 0, stream()>>>(
        static_cast<E*>(x.raw()), positions.data<int32_t>(), inv_freq.data<float>(), n, int(n_head),
        int(half));
  });
  check_launch("rope");
}

void paged_kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_cache,
                    Tensor& v_cache) {
  const int64_t row = k.dim(1) * k.dim(2), n = k.dim(0) * row;
  if (n == 0) return;
  dispatch_device_float(k.dtype(), "paged_kv_write", [&](auto tag) {
    using E = decltype(tag);
    kv_write_kernel<E><<<grid_for(n), kThreads, 0, stream()>>>(
        static_cast<const E*>(k.raw()), static_cast<const E*>(v.raw()), slots.data<int32_t>(),
        static_cast<E*>(k_cache.raw()), static_cast<E*>(v_cache.raw()), n, row);
  });
  check_launch("paged_kv_write");
}

void glu(const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out) {
  const int64_t n = gate.numel();
  if (n == 0) return;
  dispatch_device_float(gate.dtype(), "glu", [&](auto tag) {
    using E = decltype(tag);
    const E* g = static_cast<const E*>(gate.raw());
    const E* u = static_cast<const E*>(up.raw());
    E* o = static_cast<E*>(out.raw());
    if (act == GluActivation::silu)
      glu_kernel<E, true><<<grid_for(n), kThreads, 0, stream()>>>(g, u, o, n);
    else
      glu_kernel<E, false><<<grid_for(n), kThreads, 0, stream()>>>(g, u, o, n);
  });
  check_launch("glu");
}

}  // namespace parley::cuda
