// softmax / log_softmax on CUDA (ops/softmax.h): one block per row, f32 throughout.
// Three passes over the row (max, sum of exp, write). -inf entries give exp(-inf) = 0;
// a row of all -inf has max -inf, so x - max is NaN everywhere, as PyTorch; NaN propagates
// through the max (MaxOp keeps it).
#include "engine/cuda/common.cuh"
#include "engine/ops/softmax.h"

namespace parley::cuda {

namespace {

template <typename T, bool kLog>
__global__ void softmax_kernel(const T* x, T* out, int64_t n) {
  const T* row = x + int64_t(blockIdx.x) * n;
  T* out_row = out + int64_t(blockIdx.x) * n;
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = MaxOp{}(m, dev_to_f32(row[i]));
  m = block_reduce(m, MaxOp{});
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += expf(dev_to_f32(row[i]) - m);
  s = block_reduce(s, SumOp{});
  if (kLog) {
    const float log_s = logf(s);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      out_row[i] = dev_from_f32<T>(dev_to_f32(row[i]) - m - log_s);
  } else {
    const float inv = 1.0f / s;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      out_row[i] = dev_from_f32<T>(expf(dev_to_f32(row[i]) - m) * inv);
  }
}

}  // namespace

void softmax(const Tensor& x, Tensor& out, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  const int64_t n = x.ndim() ? x.dim(-1) : 1;
  if (x.numel() == 0 || n == 0) return;
  const int64_t rows = x.numel() / n;
  check_rows(rows, op);
  const int threads = threads_for_row(n);
  dispatch_device_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    if (log)
      softmax_kernel<T, true>
          <<<unsigned(rows), threads, 0, stream()>>>(x.data<T>(), out.data<T>(), n);
    else
      softmax_kernel<T, false>
          <<<unsigned(rows), threads, 0, stream()>>>(x.data<T>(), out.data<T>(), n);
  });
  check_launch(op);
}

}  // namespace parley::cuda
