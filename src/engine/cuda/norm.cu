// layer_norm and rms_norm on CUDA (ops/norm.h): one block per row of D elements.
// Statistics are two-pass in f32 (mean, then the mean of squared deviations), each a
// per-thread partial sum and a tree reduction, which keeps the relative error near 1e-7;
// the row's second and third reads come from L1/L2.
#include "engine/cuda/common.cuh"
#include "engine/ops/norm.h"

namespace parley::cuda {

namespace {

// x, out [rows, D]; gamma (and beta for layer_norm) [D].
template <typename T, bool kRms>
__global__ void norm_kernel(const T* x, T* out, ParamRef gamma, ParamRef beta, int64_t d,
                            float eps) {
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

template <bool kRms>
void launch_norm(const Tensor& x, ParamRef gamma, ParamRef beta, float eps, Tensor& out,
                 const char* op) {
  const int64_t d = x.ndim() ? x.dim(-1) : 1;
  if (x.numel() == 0 || d == 0) return;
  const int64_t rows = x.numel() / d;
  check_rows(rows, op);
  const int threads = threads_for_row(d);
  dispatch_device_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    norm_kernel<T, kRms>
        <<<unsigned(rows), threads, 0, stream()>>>(x.data<T>(), out.data<T>(), gamma, beta, d, eps);
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
