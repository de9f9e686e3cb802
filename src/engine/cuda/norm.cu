// layer_norm and rms_norm on CUDA (ops/norm.h): one block per row of D elements.
// Statistics are two-pass in f32 (mean, then the mean of squared deviations), each a
// per-thread partial sum and a tree reduction, which keeps the relative error near 1e-7.
//
// Two kernels:
//   - norm_reg_kernel, for rows of up to kMaxRegRow elements (Whisper's 1280; a decoder
//     step is a few rows and latency bound): the row is read once into registers, in
//     16-byte vectors when D and the pointers allow (else one element at a time, up to
//     kMaxRegThreads * kRegPerThread elements), and each statistic takes one barrier
//     (warp shuffles, then every thread adds the warps' partials from shared memory); for a
//     few rows (a decoder step) gamma and beta are requested before the wait for the
//     kernel before (kParamsFirst);
//   - norm_kernel, any D: three strided passes over the row (the second and third reads
//     come from L1/L2) with block_reduce.
#include <cstdint>

#include "engine/cuda/common.cuh"
#include "engine/ops/norm.h"

namespace parley::cuda {

namespace {

constexpr int kMaxRegThreads = 512;
constexpr int kRegPerThread = 4;         // packs per thread, in registers
constexpr int64_t kMaxRegRow = 8192;     // elements, for the 16-byte path
constexpr int64_t kParamsFirstRows = 8;  // rows up to which gamma and beta come first

// x, out [rows, D]; gamma (and beta for layer_norm) [D].
template <typename T, bool kRms>
__global__ void norm_kernel(const T* x, T* out, ParamRef gamma, ParamRef beta, int64_t d,
                            float eps) {
  wait_for_inputs();
  allow_dependents();
  const T* row = x + int64_t(blockIdx.x) * d;
  T* out_row = out + int64_t(blockIdx.x) * d;
  float mean = 0.0f;
  if (!kRms) {
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) sum += dev_to_f32(row[i]);
    mean = block_reduce(sum, SumOp{}) / float(d);
  }
  float sq = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float v = dev_to_f32(row[i]) - mean;
    sq += v * v;
  }
  const float inv = 1.0f / sqrtf(block_reduce(sq, SumOp{}) / float(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float v = (dev_to_f32(row[i]) - mean) * inv * load_param(gamma, i);
    if (!kRms) v += load_param(beta, i);
    out_row[i] = dev_from_f32<T>(v);
  }
}

// kVec elements loaded and stored as one access (16 bytes, or one element).
template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) Pack {
  T e[kVec];
};

// The block's sum of v, returned to every thread, with one barrier: `partial` [32] must
// not be reused by a later call without another barrier in between.
__device__ __forceinline__ float block_sum_once(float v, float* partial) {
  v = warp_reduce(v, SumOp{});
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = partial[0];
  const int warps = int(blockDim.x >> 5);
  for (int w = 1; w < warps; ++w) r += partial[w];
  return r;
}

// x, out [rows, D] with D % kVec == 0 and D / kVec <= blockDim.x * kRegPerThread; pack
// p of the row is thread p % blockDim.x's (p / blockDim.x)-th.
// kParamsFirst: gamma and beta (weights, which no kernel writes) are requested before the
// wait, into registers, so they are not one more memory round trip after the statistics: a
// decoder step's norms are one block each and latency bound (on the H200 this and the same
// for the few-row GEMM's bias took a greedy step from 0.278 to 0.246 ms). Many rows (the
// encoder) keep the registers and load them at the end.
template <typename T, int kVec, bool kRms, bool kParamsFirst>
__global__ void __launch_bounds__(kMaxRegThreads)
    norm_reg_kernel(const T* x, T* out, ParamRef gamma, ParamRef beta, int d, float eps) {
  __shared__ float partial_sum[32];
  __shared__ float partial_sq[32];
  using P = Pack<T, kVec>;
  const int packs = d / kVec;
  constexpr int kHeld = kParamsFirst ? kRegPerThread : 1;
  float g[kHeld][kVec], bt[kHeld][kVec];
  if constexpr (kParamsFirst) {
#pragma unroll
    for (int k = 0; k < kRegPerThread; ++k) {
      const int p = int(threadIdx.x) + k * int(blockDim.x);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const int64_t i = int64_t(p) * kVec + e;
        g[k][e] = p < packs ? load_param(gamma, i) : 0.0f;
        bt[k][e] = !kRms && p < packs ? load_param(beta, i) : 0.0f;
      }
    }
  }
  wait_for_inputs();
  allow_dependents();  // a GEMM after the norm may load its weights meanwhile
  const P* row = reinterpret_cast<const P*>(x + int64_t(blockIdx.x) * d);
  P* out_row = reinterpret_cast<P*>(out + int64_t(blockIdx.x) * d);
  float v[kRegPerThread][kVec];
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kRegPerThread; ++k) {
    const int p = int(threadIdx.x) + k * int(blockDim.x);
    if (p < packs) {
      const P raw = row[p];
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        v[k][e] = dev_to_f32(raw.e[e]);
        sum += v[k][e];
      }
    }
  }
  float mean = 0.0f;
  if (!kRms) mean = block_sum_once(sum, partial_sum) / float(d);
  float sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kRegPerThread; ++k) {
    const int p = int(threadIdx.x) + k * int(blockDim.x);
    if (p < packs) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const float c = v[k][e] - mean;
        sq += c * c;
      }
    }
  }
  const float inv = 1.0f / sqrtf(block_sum_once(sq, partial_sq) / float(d) + eps);
#pragma unroll
  for (int k = 0; k < kRegPerThread; ++k) {
    const int p = int(threadIdx.x) + k * int(blockDim.x);
    if (p < packs) {
      P res;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const int64_t i = int64_t(p) * kVec + e;
        float gi, bi = 0.0f;
        if constexpr (kParamsFirst) {
          gi = g[k][e];
          bi = bt[k][e];
        } else {
          gi = load_param(gamma, i);
          if (!kRms) bi = load_param(beta, i);
        }
        float y = (v[k][e] - mean) * inv * gi;
        if (!kRms) y += bi;
        res.e[e] = dev_from_f32<T>(y);
      }
      out_row[p] = res;
    }
  }
}

// Threads for `packs` packs a row: one pack each up to kMaxRegThreads, whole warps.
int reg_threads(int64_t packs) {
  const int64_t t = (packs + 31) / 32 * 32;
  return int(t < kMaxRegThreads ? t : kMaxRegThreads);
}

template <bool kRms>
void launch_norm(const Tensor& x, ParamRef gamma, ParamRef beta, float eps, Tensor& out,
                 const char* op) {
  const int64_t d = x.ndim() ? x.dim(-1) : 1;
  if (x.numel() == 0 || d == 0) return;
  const int64_t rows = x.numel() / d;
  check_rows(rows, op);
  dispatch_device_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = 16 / int(sizeof(T));
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const bool aligned =
        ((reinterpret_cast<uintptr_t>(px) | reinterpret_cast<uintptr_t>(po)) & 15u) == 0;
    if (aligned && d % kVec == 0 && d <= kMaxRegRow) {  // rows of whole 16-byte packs
      launch_dependent(rows <= kParamsFirstRows ? norm_reg_kernel<T, kVec, kRms, true>
                                                : norm_reg_kernel<T, kVec, kRms, false>,
                       dim3(unsigned(rows)), dim3(reg_threads(d / kVec)), 0, px, po, gamma, beta,
                       int(d), eps);
    } else if (d <= int64_t(kMaxRegThreads) * kRegPerThread) {
      norm_reg_kernel<T, 1, kRms, false>
          <<<unsigned(rows), reg_threads(d), 0, stream()>>>(px, po, gamma, beta, int(d), eps);
    } else {
      norm_kernel<T, kRms>
          <<<unsigned(rows), threads_for_row(d), 0, stream()>>>(px, po, gamma, beta, d, eps);
    }
  });
  check_launch(op);
}

}  // namespace

void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& out) {
  launch_norm<false>(x, param_ref(&gamma), param_ref(&beta), eps, out, "layer_norm");
}

void rms_norm(const Tensor& x, const Tensor& gamma, float eps, Tensor& out) {
  launch_norm<true>(x, param_ref(&gamma), ParamRef{}, eps, out, "rms_norm");
}

}  // namespace parley::cuda
