// conv1d on CUDA (ops/conv.h): im2col into scratch, then one strided-batched GEMM.
//   col[b] [C_in * K, L_out]: col[b][ci * K + k][t] = x[b][ci][t * stride + k - padding]
//   out[b] [C_out, L_out] = w [C_out, C_in * K] @ col[b]   (+ bias[C_out] per row)
// A token-major output (Conv1dOptions::tokens_out) turns the GEMM around: one row per output
// position,
//   rows [B * L_out, C_in * K]: rows[b, t][ci * K + k] = x at (b, ci, t * stride + k - padding)
//   out [B * L_out, C_out] = rows @ w^T + bias   (matmul: cuBLASLt with the bias, and for
//                                                 16-bit types the GELU, in its epilogue)
// so no bias pass, GELU pass or permute follows (the Whisper encoder's convolutions: its
// second conv was an sm80 cuBLAS kernel of 77 us behind an im2col of 25 us on the H200,
// bench/RESULTS.md). x may be token-major too (tokens_in); each row then gathers K runs of
// C_in contiguous values.
// The batch is processed in chunks so that the columns take at most kMaxColumnBytes.
// A K = 1, stride 1, unpadded conv is a plain GEMM on x and skips im2col.
#include <algorithm>

#include "engine/cuda/common.cuh"
#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/matmul.h"

namespace parley::cuda {

namespace {

constexpr int64_t kMaxColumnBytes = int64_t(256) << 20;

struct ConvShape {
  int64_t c_in, length, kernel, l_out;
  int stride, padding;
};

// Element (b, ci, pos) of x, channel-major [B, C_in, L] or token-major [B, L, C_in].
template <typename U>
__device__ __forceinline__ U x_at(const U* x, const ConvShape& s, bool tokens_in, int64_t b,
                                  int64_t ci, int64_t pos) {
  return tokens_in ? x[(b * s.length + pos) * s.c_in + ci] : x[(b * s.c_in + ci) * s.length + pos];
}

// Copies elements as raw bits (U is an unsigned integer of the element's size): im2col
// only moves values, and 0 bits are 0.0 in every float format.
template <typename U>
__global__ void im2col_kernel(const U* x, U* col, ConvShape s, int64_t batches, bool tokens_in) {
  const int64_t rows = s.c_in * s.kernel;
  const int64_t n = batches * rows * s.l_out;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i % s.l_out;
    const int64_t r = (i / s.l_out) % rows;
    const int64_t b = i / (s.l_out * rows);
    const int64_t ci = r / s.kernel, k = r % s.kernel;
    const int64_t pos = t * s.stride + k - s.padding;
    col[i] = (pos >= 0 && pos < s.length) ? x_at(x, s, tokens_in, b, ci, pos) : U(0);
  }
}

// The token-major columns: block i is row i (batch b = i / L_out, position t = i % L_out),
// its threads across the row's C_in * K values (coalesced writes).
template <typename U>
__global__ void im2col_rows_kernel(const U* x, U* rows, ConvShape s, bool tokens_in) {
  const int64_t row = blockIdx.x, b = row / s.l_out, t = row % s.l_out;
  const int ck = int(s.c_in * s.kernel), kernel = int(s.kernel);
  U* dst = rows + row * ck;
  for (int c = int(threadIdx.x); c < ck; c += int(blockDim.x)) {
    const int ci = c / kernel, k = c - ci * kernel;
    const int64_t pos = t * s.stride + k - s.padding;
    dst[c] = pos >= 0 && pos < s.length ? x_at(x, s, tokens_in, b, ci, pos) : U(0);
  }
}

// im2col of batches [b0, b0 + batches) into col: channel-major columns, or with `rows` the
// token-major ones.
void im2col(const Tensor& x, int64_t b0, int64_t batches, const ConvShape& s, bool tokens_in,
            bool rows, void* col) {
  const int64_t n = batches * s.c_in * s.kernel * s.l_out;
  const int64_t offset = b0 * s.c_in * s.length;
  const auto run = [&](auto tag) {
    using U = decltype(tag);
    const U* src = x.data<U>() + offset;
    if (rows)
      im2col_rows_kernel<U><<<unsigned(batches * s.l_out), kThreads, 0, stream()>>>(
          src, static_cast<U*>(col), s, tokens_in);
    else
      im2col_kernel<U><<<grid_for(n), kThreads, 0, stream()>>>(src, static_cast<U*>(col), s,
                                                               batches, tokens_in);
  };
  if (dtype_size(x.dtype()) == 4)
    run(uint32_t{});
  else
    run(uint16_t{});
  check_launch("conv1d");
}

// The im2col of x in chunks of batches whose columns take at most kMaxColumnBytes of
// scratch (token-major rows with `rows`): gemm(b0, nb, col) after each chunk's im2col.
template <typename Gemm>
void for_column_chunks(const Tensor& x, const ConvShape& s, bool tokens_in, bool rows, Gemm gemm) {
  const int64_t batch = x.dim(0);
  const int64_t per_batch = s.c_in * s.kernel * s.l_out * int64_t(dtype_size(x.dtype()));
  const int64_t chunk = std::clamp<int64_t>(kMaxColumnBytes / per_batch, 1, batch);
  Scratch col(size_t(chunk * per_batch));
  for (int64_t b0 = 0; b0 < batch; b0 += chunk) {
    const int64_t nb = std::min(chunk, batch - b0);
    im2col(x, b0, nb, s, tokens_in, rows, col.data());
    gemm(b0, nb, col.data());
  }
}

// conv1d with a token-major output: [B * L_out, C_out] rows, one GEMM per chunk of batches.
void conv1d_rows(const Tensor& x, const Tensor& w, Tensor& out, const Conv1dOptions& opt,
                 const ConvShape& s) {
  const int64_t batch = x.dim(0), c_out = w.dim(0), ck = s.c_in * s.kernel;
  const Tensor w2 = w.reshape({c_out, ck});
  MatmulOptions mo;
  mo.trans_b = true;
  mo.bias = opt.bias;
  mo.gelu = opt.gelu;
  if (s.kernel == 1 && s.stride == 1 && s.padding == 0 && opt.tokens_in) {  // x is the rows
    Tensor o2 = out.reshape({batch * s.l_out, c_out});
    cuda::matmul(x.reshape({batch * s.length, s.c_in}), w2, o2, mo);
    return;
  }
  for_column_chunks(x, s, opt.tokens_in, true, [&](int64_t b0, int64_t nb, void* col) {
    const Tensor rows = Tensor::view(col, {nb * s.l_out, ck}, x.dtype(), Device::cuda, nullptr);
    Tensor o2 = out.slice0(b0, b0 + nb).reshape({nb * s.l_out, c_out});
    cuda::matmul(rows, w2, o2, mo);
  });
}

// conv1d with a channel-major output (bias only): strided-batched GEMMs of w against each
// chunk's im2col columns.
void conv1d_columns(const Tensor& x, const Tensor& w, Tensor& out, const Conv1dOptions& opt,
                    const ConvShape& s) {
  constexpr const char* kOp = "conv1d";
  const int64_t batch = x.dim(0), c_out = w.dim(0), ck = s.c_in * s.kernel;
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
  if (s.kernel == 1 && s.stride == 1 && s.padding == 0 && !opt.tokens_in) {
    g.b = x.raw();
    g.c = out.raw();
    g.batch = batch;
    gemm(g, kOp);
    return;
  }
  for_column_chunks(x, s, opt.tokens_in, false, [&](int64_t b0, int64_t nb, void* col) {
    g.b = col;
    g.c = static_cast<char*>(out.raw()) + size_t(b0 * c_out * s.l_out) * dtype_size(out.dtype());
    g.batch = nb;
    gemm(g, kOp);
  });
}

}  // namespace

void conv1d(const Tensor& x, const Tensor& w, Tensor& out, const Conv1dOptions& opt) {
  const int64_t c_in = x.dim(opt.tokens_in ? 2 : 1), len = x.dim(opt.tokens_in ? 1 : 2);
  const ConvShape s{c_in, len, w.dim(2), out.dim(opt.tokens_out ? 1 : 2), opt.stride, opt.padding};
  if (out.numel() == 0) return;
  if (opt.tokens_out && s.c_in * s.kernel > 0) {
    conv1d_rows(x, w, out, opt, s);  // the GELU in the GEMM's epilogue
    return;
  }
  if (opt.tokens_out)  // no input channels: the bias in every row
    scale_add_bias(out.raw(), out.dtype(), x.dim(0) * s.l_out, w.dim(0), 0.0f, param_ref(opt.bias),
                   false, 0, "conv1d");
  else
    conv1d_columns(x, w, out, opt, s);
  if (opt.gelu) cuda::unary(UnaryOp::gelu, out, out);
}

}  // namespace parley::cuda
