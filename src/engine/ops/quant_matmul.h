// matmul_quant: c = a @ dequant(w)^T (+ bias) + beta * c, with w a block-quantized weight
// (engine/quant.h) that stays in its blocks; a linear layer over GGUF weights.
//   a: [M, K] f32, contiguous;  w: QuantMatrix [N, K];  c: [M, N] f32;  bias: f32 [N].
// CPU, two tiers:
//   reference: each row of w dequantized to f32 (dequantize_blocks) and dotted with a's rows
//     in f32, the oracle (MatmulQuantOptions::reference, and the path on CPUs without AVX2).
//   fast (AVX2 + FMA + F16C, chosen at run time): a's rows quantized once per call to 8 bits
//     (per 32 values with an f32 scale for the 32-value types, per 256 with 16-value sums for
//     the K-quants, as llama.cpp's q8_0 / q8_K), then integer dot products per block scaled
//     by the block scales (every type has a kernel).
//     Threads split N; every output element is reduced in one fixed order whatever M or the
//     thread count, so a row's result does not depend on the rows beside it. Against the
//     reference: max |fast - ref| / sum_k |a_k w_k| about 2e-3 at K = 256 and 5-8e-4 at
//     K = 4096 on Gaussian rows (the 8-bit rounding of a, shrinking as 1 / sqrt(K)).
//     q4_K also has a layout of its own (matmul_quant_layout: eight rows to a group, one row
//     per int32 lane): on the 2-core Zen 2 at M = 1 it streams 25.5 GB/s hot and 19.9 cold
//     (the plain read 19.4) where ggml's layout gave 13.8 / 13.6, bound by its instructions.
//     Weight streamed at M = 1, 4096 x 4096 from DRAM, 2 threads of the H200 machine's Xeon
//     (whose plain 2-thread read is 14.4 GB/s): q4_K 17.9 GB/s, q8_0 17.5, q5_K 12.9,
//     q6_K 12.7, q4_0 11.8; 16 threads 63-93 GB/s (plain read 79). At prefill the kernels
//     are compute bound: register tiles of up to 4 activation rows by 1-4 weight rows, on
//     qwen3-0.6b's projections at M = 256 with 2 threads of a 2-core AMD EPYC (Zen 4),
//     q8_0 71-75 and q4_K 94-101 GMAC/s (bench/RESULTS.md, 2026-12-05).
// CUDA: a few-row GEMV that dequantizes blocks on the fly (quant_value), f32 accumulation;
//   correct (within 3e-7 of the CPU reference relative to sum|a||w|) but slow: 75-180 GB/s
//   on the H200 at M = 1, a few percent of its bandwidth.
#pragma once

#include "engine/quant.h"
#include "engine/tensor.h"

namespace parley {

struct MatmulQuantOptions {
  const Tensor* bias = nullptr;  // f32 [N], added to every row
  float beta = 0.0f;             // beta != 0 accumulates: c = a @ w^T + bias + beta * c
  bool reference = false;        // CPU: the f32 oracle instead of the 8-bit fast path
};

void matmul_quant(const Tensor& a, const QuantMatrix& w, Tensor& c,
                  const MatmulQuantOptions& opt = {});

// Whether the CPU fast path is available for type t on this machine (AVX2, FMA and F16C);
// matmul_quant takes the reference otherwise.
bool quant_fast_path(QuantType t);

// w in the layout matmul_quant reads fastest on w's device, for a loader to keep instead of
// w: on a CPU with the fast path, q4_K whose rows are a multiple of 8 is packed eight rows
// to a group (pack_q4_k_x8; new memory, so w's may be released); anything else is w itself.
// The packed kernel's results equal the unpacked layout's bit for bit.
QuantMatrix matmul_quant_layout(const QuantMatrix& w);

namespace cpu {
void matmul_quant(const Tensor& a, const QuantMatrix& w, Tensor& c, const MatmulQuantOptions& opt);
bool quant_fast_path(QuantType t);
QuantMatrix matmul_quant_layout(const QuantMatrix& w);
}  // namespace cpu
namespace cuda {
void matmul_quant(const Tensor& a, const QuantMatrix& w, Tensor& c, const MatmulQuantOptions& opt);
}  // namespace cuda

}  // namespace parley
