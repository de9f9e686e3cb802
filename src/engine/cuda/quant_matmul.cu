// CUDA matmul_quant (ops/quant_matmul.h): a simple few-row GEMV over block-quantized weights.
// One warp per output column (a row of w); lane l takes the values l, l + 32, ... of the row,
// decodes each from its block (quant_value, the one decoder shared with the host), and
// accumulates up to kRows activation rows in f32; a butterfly reduction, then the epilogue
// (bias, beta * c) by lane 0. Correct first: it re-reads a block's scales per value and
// streams w once per kRows rows, far from the bandwidth a tuned kernel would reach.
#include "engine/cuda/common.cuh"
#include "engine/ops/quant_matmul.h"

namespace parley::cuda {

namespace {

constexpr int kRows = 8;   // activation rows per launch row (grid.y covers the rest)
constexpr int kWarps = 4;  // columns per block

__global__ void quant_gemv_kernel(QuantType type, const uint8_t* __restrict__ w, int64_t row_bytes,
                                  int block_size, int block_bytes, const float* __restrict__ a,
                                  float* c, const float* __restrict__ bias, float beta, int64_t m,
                                  int64_t n, int64_t k) {
  const int lane = threadIdx.x % 32;
  const int64_t col = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int64_t row0 = int64_t(blockIdx.y) * kRows;
  if (col >= n) return;
  const int rows = m - row0 < kRows ? int(m - row0) : kRows;
  const uint8_t* wrow = w + col * row_bytes;
  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = 0.0f;
  for (int64_t e = lane; e < k; e += 32) {
    const float v = quant_value(type, wrow + (e / block_size) * block_bytes, int(e % block_size));
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      if (r < rows) acc[r] += v * a[(row0 + r) * k + e];
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    for (int off = 16; off > 0; off /= 2) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], off);
  if (lane != 0) return;
  for (int r = 0; r < rows; ++r) {
    const int64_t idx = (row0 + r) * n + col;
    float v = acc[r] + (bias ? bias[col] : 0.0f);
    c[idx] = beta != 0.0f ? v + beta * c[idx] : v;
  }
}

}  // namespace

void matmul_quant(const Tensor& a, const QuantMatrix& w, Tensor& c, const MatmulQuantOptions& opt) {
  const int64_t m = a.dim(0), n = w.rows, k = w.cols;
  const QuantFormat& f = quant_format(w.type);
  const dim3 grid(unsigned((n + kWarps - 1) / kWarps), unsigned((m + kRows - 1) / kRows));
  quant_gemv_kernel<<<grid, kWarps * 32, 0, stream()>>>(
      w.type, w.data, w.row_bytes(), f.block_size, f.block_bytes, a.data<float>(), c.data<float>(),
      opt.bias ? opt.bias->data<float>() : nullptr, opt.beta, m, n, k);
  check_launch("matmul_quant");
}

}  // namespace parley::cuda
