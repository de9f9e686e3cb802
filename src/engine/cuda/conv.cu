// conv1d on CUDA (ops/conv.h): im2col into scratch, then one strided-batched GEMM.
//   col[b] [C_in * K, L_out]: col[b][ci * K + k][t] = x[b][ci][t * stride + k - padding]
//   out[b] [C_out, L_out] = w [C_out, C_in * K] @ col[b]   (+ bias[C_out] per row)
// The batch is processed in chunks so that the columns take at most kMaxColumnBytes.
// A K = 1, stride 1, unpadded conv is a plain GEMM on x and skips im2col.
#include <algorithm>

#include "engine/cuda/common.cuh"
#include "engine/ops/conv.h"

namespace parley::cuda {

namespace {

constexpr int64_t kMaxColumnBytes = int64_t(256) << 20;

struct ConvShape {
  int64_t c_in, length, kernel, l_out;
  int stride, padding;
};

// Copies elements as raw bits (U is an unsigned integer of the element's size): im2col
// only moves values, and 0 bits are 0.0 in every float format.
template <typename U>
__global__ void im2col_kernel(const U* x, U* col, ConvShape s, int64_t batches) {
  const int64_t rows = s.c_in * s.kernel;
  const int64_t n = batches * rows * s.l_out;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i % s.l_out;
    const int64_t r = (i / s.l_out) % rows;
    const int64_t b = i / (s.l_out * rows);
    const int64_t ci = r / s.kernel, k = r % s.kernel;
    const int64_t pos = t * s.stride + k - s.padding;
    col[i] = (pos >= 0 && pos < s.length) ? x[(b * s.c_in + ci) * s.length + pos] : U(0);
  }
}

void im2col(const Tensor& x, int64_t b0, int64_t batches, const ConvShape& s, void* col) {
  const int64_t n = batches * s.c_in * s.kernel * s.l_out;
  const int64_t offset = b0 * s.c_in * s.length;
  if (dtype_size(x.dtype()) == 4)
    im2col_kernel<uint32_t><<<grid_for(n), kThreads, 0, stream()>>>(
        x.data<uint32_t>() + offset, static_cast<uint32_t*>(col), s, batches);
  else
    im2col_kernel<uint16_t><<<grid_for(n), kThreads, 0, stream()>>>(
        x.data<uint16_t>() + offset, static_cast<uint16_t*>(col), s, batches);
  check_launch("conv1d");
}

}  // namespace

void conv1d(const Tensor& x, const Tensor& w, Tensor& out, const Conv1dOptions& opt) {
  constexpr const char* kOp = "conv1d";
  const int64_t batch = x.dim(0), c_out = w.dim(0);
  const ConvShape s{x.dim(1), x.dim(2), w.dim(2), out.dim(2), opt.stride, opt.padding};
  const int64_t ck = s.c_in * s.kernel;
  if (out.numel() == 0) return;
  const size_t elem = dtype_size(x.dtype());

  GemmArgs g{};
  g.a = w.raw();
  g.ab_type = x.dtype();
  g.c_type = out.dtype();
  g.m = c_out;
  g.n = s.l_out;
  g.k = ck;
  g.stride_a = 0;
  g.stride_b = ck * s.l_out;
  g.stride_c = c_out * s.l_out;
  g.beta = opt.bias ? 1.0f : 0.0f;
  if (opt.bias || ck == 0)
    scale_add_bias(out.raw(), out.dtype(), batch * c_out, s.l_out, 0.0f, param_ref(opt.bias), true,
                   c_out, kOp);
  if (ck == 0) return;

  if (s.kernel == 1 && s.stride == 1 && s.padding == 0) {
    g.b = x.raw();
    g.c = out.raw();
    g.batch = batch;
    gemm(g, kOp);
    return;
  }
  const int64_t per_batch = ck * s.l_out * int64_t(elem);
  const int64_t chunk = std::clamp<int64_t>(kMaxColumnBytes / per_batch, 1, batch);
  Scratch col(size_t(chunk * per_batch));
  for (int64_t b0 = 0; b0 < batch; b0 += chunk) {
    const int64_t nb = std::min(chunk, batch - b0);
    im2col(x, b0, nb, s, col.data());
    g.b = col.data();
    g.c = static_cast<char*>(out.raw()) + size_t(b0 * c_out * s.l_out) * dtype_size(out.dtype());
    g.batch = nb;
    gemm(g, kOp);
  }
}

}  // namespace parley::cuda
