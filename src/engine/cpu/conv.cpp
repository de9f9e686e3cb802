// CPU conv1d as im2col + GEMM, one batch item at a time:
//   col [C_in * K, L_out] (zero where the window hangs over the padding)
//   out[b] [C_out, L_out] = w [C_out, C_in * K] @ col (+ bias per output channel)
// The GEMM writes f32: into out directly for f32, else into a scratch converted after.
// Token-major inputs and outputs (Conv1dOptions) are permuted around that, and the GELU is
// a pass over the channel-major result.
#include "engine/ops/conv.h"

#include <cstring>

#include "engine/cpu/cpu_common.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/matmul.h"
#include "engine/ops/transpose.h"

namespace parley::cpu {

namespace {

template <typename T>
void im2col(const T* x, int64_t c_in, int64_t len, int64_t kernel, int64_t l_out,
            const Conv1dOptions& opt, T* col) {
  const T zero = from_f32<T>(0.0f);
  cpu_threads().parallel_for(c_in * kernel, row_grain(l_out), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t c = row / kernel, t = row % kernel;
      const T* src = x + c * len;
      T* dst = col + row * l_out;
      for (int64_t o = 0; o < l_out; ++o) {
        const int64_t pos = o * opt.stride + t - opt.padding;
        dst[o] = pos >= 0 && pos < len ? src[pos] : zero;
      }
    }
  });
}

// Each row of acc [C_out, L_out] (f32) starts as its channel's bias.
void fill_bias_rows(const Tensor& bias, Tensor& acc) {
  const int64_t l_out = acc.dim(1);
  float* pa = acc.data<float>();
  dispatch_float(bias.dtype(), "conv1d", [&](auto tag) {
    const auto* pb = bias.data<decltype(tag)>();
    for (int64_t c = 0; c < acc.dim(0); ++c) std::fill_n(pa + c * l_out, l_out, to_f32(pb[c]));
  });
}

// The convolution of channel-major x into channel-major out (opt's stride, padding and bias;
// its layout and GELU are conv1d's below).
void conv1d_channels(const Tensor& x, const Tensor& w, Tensor& out, const Conv1dOptions& opt) {
  const int64_t batch = x.dim(0), c_in = x.dim(1), len = x.dim(2);
  const int64_t c_out = w.dim(0), kernel = w.dim(2), l_out = out.dim(2);
  const DType dt = x.dtype();
  const bool direct = kernel == 1 && opt.stride == 1 && opt.padding == 0;  // col is x[b]
  Tensor col = direct ? Tensor() : Tensor::empty({c_in * kernel, l_out}, dt);
  Tensor acc = dt == DType::f32 ? Tensor() : Tensor::empty({c_out, l_out}, DType::f32);
  const Tensor w2 = w.reshape({c_out, c_in * kernel});
  MatmulOptions mo;
  mo.beta = opt.bias ? 1.0f : 0.0f;
  for (int64_t b = 0; b < batch; ++b) {
    const Tensor xb = x.slice0(b, b + 1).reshape({c_in, len});
    Tensor ob = out.slice0(b, b + 1).reshape({c_out, l_out});
    if (!direct) {
      dispatch_float(dt, "conv1d", [&](auto tag) {
        using T = decltype(tag);
        im2col(xb.data<T>(), c_in, len, kernel, l_out, opt, col.data<T>());
      });
    }
    Tensor& target = dt == DType::f32 ? ob : acc;
    if (opt.bias) fill_bias_rows(*opt.bias, target);
    cpu::matmul(w2, direct ? xb : col, target, mo);
    if (dt != DType::f32) cpu::convert(acc, ob);
  }
}

}  // namespace

void conv1d(const Tensor& x, const Tensor& w, Tensor& out, const Conv1dOptions& opt) {
  Tensor xc = x;
  if (opt.tokens_in) {
    xc = Tensor::empty({x.dim(0), x.dim(2), x.dim(1)}, x.dtype());
    cpu::permute(x, {0, 2, 1}, xc);
  }
  Tensor oc = out;
  if (opt.tokens_out) oc = Tensor::empty({out.dim(0), out.dim(2), out.dim(1)}, out.dtype());
  conv1d_channels(xc, w, oc, opt);
  if (opt.gelu) cpu::unary(UnaryOp::gelu, oc, oc);
  if (opt.tokens_out) cpu::permute(oc, {0, 2, 1}, out);
}

}  // namespace parley::cpu
