// Op harness, GEMM-shaped ops: matmul, conv1d and attention on every built device and
// float dtype, against plain double-precision loops written here.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "engine/ops/attention.h"
#include "engine/ops/conv.h"
#include "engine/ops/matmul.h"
#include "engine/ops/transpose.h"
#include "op_test_util.h"

namespace parley::test {
namespace {

// ---------------------------------------------------------------------------- matmul

struct MatmulCase {
  int64_t batch = 0;  // 0: 2-D a
  bool batched_b = false;
  int64_t m, n, k;
  bool trans_b = false;
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false;
  bool c_f32 = false;  // c in f32 whatever the input dtype
  bool bias_f32 = false;
  bool gelu = false;  // MatmulOptions::gelu (beta 0)
};

std::string describe(const MatmulCase& c) {
  return "batch " + std::to_string(c.batch) + (c.batched_b ? " (3-D b)" : "") + " m " +
         std::to_string(c.m) + " n " + std::to_string(c.n) + " k " + std::to_string(c.k) +
         (c.trans_b ? " trans_b" : "") + " alpha " + std::to_string(c.alpha) + " beta " +
         std::to_string(c.beta) + (c.bias ? (c.bias_f32 ? " bias f32" : " bias") : "") +
         (c.c_f32 ? " c f32" : "") + (c.gelu ? " gelu" : "");
}

// c0: c's values before the call (read when beta != 0). a may be double (the normalized
// rows of MatmulNorm's reference).
template <typename A>
std::vector<double> ref_matmul(const MatmulCase& c, const std::vector<A>& a,
                               const std::vector<float>& b, const std::vector<float>& bias,
                               const std::vector<float>& c0) {
  const int64_t batches = std::max<int64_t>(c.batch, 1);
  std::vector<double> out(size_t(batches * c.m * c.n));
  for (int64_t bi = 0; bi < batches; ++bi) {
    const int64_t b_off = c.batched_b ? bi * c.k * c.n : 0;
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double s = 0.0;
        for (int64_t p = 0; p < c.k; ++p) {
          const double bv =
              c.trans_b ? b[size_t(b_off + j * c.k + p)] : b[size_t(b_off + p * c.n + j)];
          s += double(a[size_t((bi * c.m + i) * c.k + p)]) * bv;
        }
        const size_t o = size_t((bi * c.m + i) * c.n + j);
        double r = double(c.alpha) * s;
        if (c.bias) r += bias[size_t(j)];
        if (c.beta != 0.0f) r += double(c.beta) * c0[o];
        if (c.gelu) r = 0.5 * r * (1.0 + std::erf(r / std::sqrt(2.0)));
        out[o] = r;
      }
    }
  }
  return out;
}

class Matmul : public OpTest {
 protected:
  void run(const MatmulCase& mc) {
    SCOPED_TRACE(describe(mc));
    const Shape a_shape = mc.batch ? Shape{mc.batch, mc.m, mc.k} : Shape{mc.m, mc.k};
    Shape b_shape = mc.trans_b ? Shape{mc.n, mc.k} : Shape{mc.k, mc.n};
    if (mc.batched_b)
      b_shape = mc.trans_b ? Shape{mc.batch, mc.n, mc.k} : Shape{mc.batch, mc.k, mc.n};
    const Shape c_shape = mc.batch ? Shape{mc.batch, mc.m, mc.n} : Shape{mc.m, mc.n};
    const DType c_dt = mc.c_f32 ? DType::f32 : dtype();
    const HostTensor a = random(a_shape), b = random(b_shape);
    const HostTensor bias = random({mc.n}, mc.bias_f32 ? DType::f32 : dtype());
    const HostTensor c0 = random(c_shape, c_dt);
    Tensor da = dev(a.t), db = dev(b.t), dbias = dev(bias.t);
    Tensor c = mc.beta != 0.0f ? dev(c0.t) : out(c_shape, c_dt);
    MatmulOptions opt;
    opt.trans_b = mc.trans_b;
    opt.alpha = mc.alpha;
    opt.beta = mc.beta;
    opt.bias = mc.bias ? &dbias : nullptr;
    opt.gelu = mc.gelu;
    matmul(da, db, c, opt);
    // A 16-bit product written to an f32 c is held to the f32 tolerance: nothing may round
    // it to 16 bits on the way.
    Tolerance tol = sum_tolerance(c_dt, mc.k);
    tol.abs *= std::max(1.0f, std::abs(mc.alpha));
    expect_close(read_floats(c), ref_matmul(mc, a.v, b.v, bias.v, c0.v), tol, "matmul");
  }
};

TEST_P(Matmul, Plain2D) {
  run({.m = 4, .n = 5, .k = 3});
  run({.m = 37, .n = 53, .k = 29});
  run({.m = 64, .n = 96, .k = 200});
}

TEST_P(Matmul, TransB) {
  run({.m = 37, .n = 53, .k = 29, .trans_b = true});
  run({.m = 1, .n = 384, .k = 64, .trans_b = true});  // one decode row
  // Beam and batched decode rows: CUDA's tensor-core few-row kernel (M >= 4), with a partial
  // last column group (N % 8) and a K slice that is not whole warp steps (K / 8 = 9).
  run({.m = 4, .n = 1280, .k = 1280, .trans_b = true, .beta = 1.0f, .bias = true});
  run({.m = 8, .n = 1003, .k = 384, .trans_b = true, .c_f32 = true});
  run({.m = 6, .n = 77, .k = 72, .trans_b = true, .alpha = 0.5f, .bias = true});
}

TEST_P(Matmul, Bias) {
  run({.m = 37, .n = 53, .k = 29, .trans_b = true, .bias = true});
  run({.m = 37, .n = 53, .k = 29, .bias = true, .bias_f32 = true});
  run({.m = 3, .n = 1536, .k = 384, .trans_b = true, .bias = true});
  // Aligned 16-bit shapes with a bias take CUDA's cuBLASLt epilogue path, with and without
  // beta (the residual add of linear_residual) and with b not transposed.
  run({.m = 40, .n = 256, .k = 128, .trans_b = true, .beta = 1.0f, .bias = true});
  run({.m = 1, .n = 64, .k = 192, .trans_b = true, .alpha = 0.5f, .beta = 0.75f, .bias = true});
  run({.m = 24, .n = 128, .k = 64, .bias = true});
}

TEST_P(Matmul, AlphaBeta) {
  run({.m = 37, .n = 53, .k = 29, .alpha = 0.5f});
  run({.m = 37, .n = 53, .k = 29, .trans_b = true, .beta = 0.75f});
  run({.m = 37, .n = 53, .k = 29, .trans_b = true, .alpha = -1.5f, .beta = 0.75f, .bias = true});
  run({.m = 37, .n = 53, .k = 29, .alpha = 0.5f, .beta = 1.0f, .bias = true, .bias_f32 = true});
}

TEST_P(Matmul, F32Output) {
  run({.m = 37, .n = 53, .k = 29, .trans_b = true, .bias = true, .c_f32 = true, .bias_f32 = true});
  run({.m = 37, .n = 53, .k = 29, .alpha = 2.0f, .beta = 0.5f, .bias = true, .c_f32 = true});
}

// GELU after the bias: fused into CUDA's few-row kernel (fc1 of a decoder step), the gelu op
// after the GEMM elsewhere (many rows, f32, the CPU).
TEST_P(Matmul, Gelu) {
  run({.m = 1, .n = 5120, .k = 1280, .trans_b = true, .bias = true, .gelu = true});
  run({.m = 5, .n = 387, .k = 64, .trans_b = true, .alpha = 0.5f, .bias = true, .gelu = true});
  run({.m = 3, .n = 64, .k = 1280, .trans_b = true, .c_f32 = true, .gelu = true});
  run({.m = 40, .n = 256, .k = 128, .trans_b = true, .bias = true, .gelu = true});
  run({.m = 37, .n = 53, .k = 29, .bias = true, .bias_f32 = true, .gelu = true});
}

// Each path's GELU against both forms, on c = gelu(x) for x over [-5, 5] (a has x in column
// 0, b picks it: the product is x exactly): 1024 rows take cuBLASLt on CUDA (its GELU_BIAS
// epilogue in 16 bits, the tanh form 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), which
// is within 4.7e-4 of the erf form at every x), 3 rows the few-row kernel's exact erf. Either
// way c stays within that bound plus half a unit in the last place of c's dtype of the erf
// form, which a missing bias, a ReLU or a sigmoid form (1.702) would exceed.
TEST_P(Matmul, GeluWithinTheTanhFormOfErf) {
  for (const int64_t m : {int64_t(1024), int64_t(3)}) {
    SCOPED_TRACE("m " + std::to_string(m));
    constexpr int64_t k = 8, n = 8;
    std::vector<float> xa(size_t(m * k), 0.0f), xb(size_t(n * k), 0.0f), zero(size_t(n), 0.0f);
    for (int64_t i = 0; i < m; ++i) xa[size_t(i * k)] = -5.0f + 10.0f * float(i) / float(m);
    for (int64_t j = 0; j < n; ++j) xb[size_t(j * k)] = 1.0f;
    const HostTensor a = host_tensor(xa, {m, k}, dtype()), b = host_tensor(xb, {n, k}, dtype());
    const HostTensor bias = host_tensor(zero, {n}, dtype());
    Tensor da = dev(a.t), db = dev(b.t), dbias = dev(bias.t), c = out({m, n});
    MatmulOptions opt;
    opt.trans_b = true;
    opt.bias = &dbias;
    opt.gelu = true;
    matmul(da, db, c, opt);
    const std::vector<float> got = read_floats(c);
    double err_erf = 0.0, err_tanh = 0.0, excess = 0.0;  // excess: over the bound
    const double half_ulp =
        dtype() == DType::f32 ? 0x1p-24 : (dtype() == DType::f16 ? 0x1p-11 : 0x1p-8);
    for (int64_t i = 0; i < m; ++i) {
      const double x = a.v[size_t(i * k)];
      const double erf_form = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
      const double tanh_form =
          0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
      for (int64_t j = 0; j < n; ++j) {
        const double g = got[size_t(i * n + j)];
        err_erf = std::max(err_erf, std::abs(g - erf_form));
        err_tanh = std::max(err_tanh, std::abs(g - tanh_form));
        excess =
            std::max(excess, std::abs(g - erf_form) - (4.8e-4 + half_ulp * std::abs(erf_form)));
      }
    }
    std::printf("[gelu form] %s m %lld: max |c - erf form| %.3g, max |c - tanh form| %.3g\n",
                ::testing::PrintToString(GetParam()).c_str(), (long long)m, err_erf, err_tanh);
    EXPECT_LE(excess, 0.0) << "max |c - erf form| " << err_erf;
  }
}

TEST_P(Matmul, GeluNeedsBetaZero) {
  const Tensor a = dev(random({2, 8}).t), b = dev(random({4, 8}).t);
  Tensor c = out({2, 4}, dtype());
  MatmulOptions opt;
  opt.trans_b = true;
  opt.beta = 1.0f;
  opt.gelu = true;
  expect_error([&] { matmul(a, b, c, opt); }, {"gelu needs beta == 0"});
}

TEST_P(Matmul, KEqualsOne) {
  run({.m = 7, .n = 9, .k = 1});
  run({.m = 7, .n = 9, .k = 1, .trans_b = true, .beta = 0.5f, .bias = true});
}

TEST_P(Matmul, Batched3DWithShared2DB) {
  run({.batch = 3, .m = 7, .n = 9, .k = 16});
  run({.batch = 3, .m = 7, .n = 9, .k = 16, .trans_b = true, .bias = true});
  run({.batch = 2,
       .m = 5,
       .n = 11,
       .k = 13,
       .trans_b = true,
       .alpha = 0.5f,
       .beta = 0.5f,
       .bias = true,
       .bias_f32 = true});
}

TEST_P(Matmul, Batched3DWith3DB) {
  run({.batch = 3, .batched_b = true, .m = 7, .n = 9, .k = 16});
  run({.batch = 3, .batched_b = true, .m = 7, .n = 9, .k = 16, .trans_b = true});
  run({.batch = 4,
       .batched_b = true,
       .m = 5,
       .n = 11,
       .k = 13,
       .trans_b = true,
       .alpha = 0.125f,
       .beta = 0.5f,
       .bias = true});
  run({.batch = 2,
       .batched_b = true,
       .m = 37,
       .n = 29,
       .k = 53,
       .bias = true,
       .c_f32 = true,
       .bias_f32 = true});
}

// Decoder-step shapes: at most 8 rows against a [N, K] weight, which CUDA runs in f16/bf16
// through its skinny-GEMM kernel (gemv.cu) when K is a multiple of 8. N below and not a
// multiple of a block's columns, K of one to twenty vectors per lane, a 3-D a folded into
// 8 rows, every epilogue (bias f32 or 16-bit, beta 1 as in a residual add, alpha, c f32).
TEST_P(Matmul, DecodeRows) {
  run({.m = 1, .n = 3, .k = 64, .trans_b = true, .bias = true});
  run({.m = 2, .n = 384, .k = 1280, .trans_b = true, .bias = true});
  run({.m = 5, .n = 3840, .k = 1280, .trans_b = true, .beta = 1.0f, .bias = true});
  run({.m = 8,
       .n = 384,
       .k = 5120,
       .trans_b = true,
       .bias = true,
       .c_f32 = true,
       .bias_f32 = true});
  run({.m = 5, .n = 385, .k = 5120, .trans_b = true, .beta = 1.0f, .c_f32 = true});
  run({.m = 2, .n = 3840, .k = 1280, .trans_b = true, .bias = true, .bias_f32 = true});
  run({.m = 3, .n = 3, .k = 1280, .trans_b = true, .alpha = 0.5f, .beta = 0.75f, .bias = true});
  run({.m = 8,
       .n = 387,
       .k = 64,
       .trans_b = true,
       .alpha = -1.5f,
       .beta = 1.0f,
       .bias = true,
       .bias_f32 = true});
  run({.batch = 2, .m = 4, .n = 384, .k = 1280, .trans_b = true, .beta = 1.0f, .bias = true});
  // The vocabulary projection (Whisper small's K), logits in f32.
  run({.m = 1, .n = 51866, .k = 768, .trans_b = true, .c_f32 = true});
  // Turbo's shapes, which CUDA cuts into 1 (fc1), 2 (the attention projections) and 4
  // (fc2) K slices per block; and a long K that takes a lane two passes.
  run({.m = 1, .n = 5120, .k = 1280, .trans_b = true, .bias = true});
  run({.m = 1, .n = 1280, .k = 1280, .trans_b = true, .beta = 1.0f, .bias = true});
  run({.m = 1, .n = 1280, .k = 5120, .trans_b = true, .beta = 1.0f, .bias = true});
  run({.m = 1, .n = 64, .k = 20480, .trans_b = true});
  // Just outside the kernel's shapes: cuBLAS again.
  run({.m = 9, .n = 384, .k = 64, .trans_b = true, .beta = 1.0f, .bias = true});
  run({.m = 2, .n = 384, .k = 60, .trans_b = true, .bias = true});
}

INSTANTIATE_TEST_SUITE_P(Ops, Matmul, ::testing::ValuesIn(op_params()), op_param_name);

// ----------------------------------------------------------- matmul with a LayerNorm first

// MatmulOptions::norm: c = alpha layer_norm(a) @ w^T + bias + beta c (then GELU), against
// the norm and the product in double. CUDA folds the norm into its few-row kernel for 1-3
// rows of f16/bf16 with K a multiple of 8; every other case (the CPU, f32, 4 or more rows,
// K = 60) normalizes into the scratch first. The folded vectors come from fold_layer_norm.
struct NormCase {
  int64_t m, n, k;
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false;
  bool c_f32 = false;
  bool gelu = false;
  float offset = 0.0f;  // added to a: rows whose mean is far from 0
};

class MatmulNorm : public OpTest {
 protected:
  void run(const NormCase& nc) {
    SCOPED_TRACE("m " + std::to_string(nc.m) + " n " + std::to_string(nc.n) + " k " +
                 std::to_string(nc.k) + " offset " + std::to_string(nc.offset));
    constexpr float kEps = 1e-5f;
    const DType c_dt = nc.c_f32 ? DType::f32 : dtype();
    const HostTensor a = random({nc.m, nc.k}, nc.offset - 2.0f, nc.offset + 2.0f);
    const HostTensor w = random({nc.n, nc.k}), bias = random({nc.n});
    const HostTensor gamma = random({nc.k}, 0.5f, 1.5f), shift = random({nc.k}, -0.5f, 0.5f);
    const HostTensor c0 = random({nc.m, nc.n}, c_dt);
    Tensor da = dev(a.t), dw = dev(w.t), dbias = dev(bias.t), dgamma = dev(gamma.t),
           dshift = dev(shift.t);
    Tensor w_gamma = out({nc.n}, DType::f32), w_shift = out({nc.n}, DType::f32);
    fold_layer_norm(dw, dgamma, dshift, w_gamma, w_shift);
    Tensor scratch = out({nc.m, nc.k});
    const NormInput norm{&dgamma, &dshift, kEps, &w_gamma, &w_shift, &scratch};
    Tensor c = nc.beta != 0.0f ? dev(c0.t) : out({nc.m, nc.n}, c_dt);
    MatmulOptions opt;
    opt.trans_b = true;
    opt.alpha = nc.alpha;
    opt.beta = nc.beta;
    opt.bias = nc.bias ? &dbias : nullptr;
    opt.gelu = nc.gelu;
    opt.norm = &norm;
    matmul(da, dw, c, opt);

    std::vector<double> xn(size_t(nc.m * nc.k));  // layer_norm(a) in double
    for (int64_t i = 0; i < nc.m; ++i) {
      const float* row = a.v.data() + i * nc.k;
      double mean = 0.0, var = 0.0;
      for (int64_t p = 0; p < nc.k; ++p) mean += row[p];
      mean /= double(nc.k);
      for (int64_t p = 0; p < nc.k; ++p) var += (row[p] - mean) * (row[p] - mean);
      var /= double(nc.k);
      for (int64_t p = 0; p < nc.k; ++p)
        xn[size_t(i * nc.k + p)] =
            (row[p] - mean) / std::sqrt(var + kEps) * gamma.v[size_t(p)] + shift.v[size_t(p)];
    }
    const MatmulCase mc{.m = nc.m,
                        .n = nc.n,
                        .k = nc.k,
                        .trans_b = true,
                        .alpha = nc.alpha,
                        .beta = nc.beta,
                        .bias = nc.bias,
                        .gelu = nc.gelu};
    const std::vector<double> want = ref_matmul(mc, xn, w.v, bias.v, c0.v);
    // The normalized rows reach about 2.5 (gamma up to 1.5); where they are rounded to the
    // dtype (not folded) each term carries that rounding. In f32 the norm's own rounding
    // shows too: a - mean loses |mean| / spread of a's relative precision (offset 12 against
    // a spread of 2: the CPU's f32 norm was 1.2e-3 off on the H200 run of this case).
    Tolerance tol = sum_tolerance(c_dt == DType::f32 ? dtype() : c_dt, nc.k);
    tol.abs *= 3.0;
    if (dtype() == DType::f32) tol.abs *= 1.0 + std::abs(nc.offset) / 2.0;
    expect_close(read_floats(c), want, tol, "matmul with norm");
  }
};

TEST_P(MatmulNorm, MatchesTheNormThenTheProduct) {
  // Folded on CUDA (f16/bf16): a greedy step's QKV (the residual read in place), cross q,
  // fc1 with GELU, and the logits in f32.
  run({.m = 1, .n = 3840, .k = 1280, .bias = true});
  run({.m = 2, .n = 1280, .k = 1280, .beta = 1.0f, .bias = true});
  run({.m = 3, .n = 5120, .k = 1280, .bias = true, .gelu = true});
  run({.m = 1, .n = 4099, .k = 1280, .c_f32 = true});
  run({.m = 1, .n = 384, .k = 5120, .alpha = -0.5f, .bias = true});
  // Rows whose mean is far from their spread (E[a^2] - mean^2 cancels 2-3 digits).
  run({.m = 2, .n = 384, .k = 1280, .bias = true, .offset = 12.0f});
  // Normalized into the scratch on every device.
  run({.m = 5, .n = 3840, .k = 1280, .beta = 1.0f, .bias = true});
  run({.m = 9, .n = 384, .k = 64, .bias = true});
  run({.m = 1, .n = 384, .k = 60, .bias = true});
}

// The norm's arguments are checked before anything runs.
TEST_P(MatmulNorm, RejectsBadArguments) {
  Tensor a = dev(random({1, 64}).t), w = dev(random({64, 64}).t), c = out({1, 64});
  Tensor gamma = dev(random({64}).t), shift = dev(random({64}).t);
  Tensor wg = out({64}, DType::f32), ws = out({64}, DType::f32), scratch = out({1, 64});
  Tensor short_gamma = dev(random({63}).t), wg_short = out({63}, DType::f32),
         scratch_big = out({2, 64});
  MatmulOptions opt;
  opt.trans_b = true;
  const auto call = [&](NormInput nm, bool trans_b = true) {
    MatmulOptions o = opt;
    o.trans_b = trans_b;
    o.norm = &nm;
    matmul(a, w, c, o);
  };
  expect_error([&] { call({&gamma, &shift, 1e-5f, &wg, &ws, nullptr}); }, {"scratch"});
  expect_error([&] { call({&short_gamma, &shift, 1e-5f, &wg, &ws, &scratch}); }, {"gamma"});
  expect_error([&] { call({&gamma, &shift, 1e-5f, &wg_short, &ws, &scratch}); }, {"w_gamma"});
  expect_error([&] { call({&gamma, &shift, 1e-5f, &wg, &ws, &scratch_big}); }, {"scratch"});
  expect_error([&] { call({&gamma, &shift, 1e-5f, &wg, &ws, &scratch}, false); }, {"trans_b"});
}

INSTANTIATE_TEST_SUITE_P(Ops, MatmulNorm, ::testing::ValuesIn(op_params()), op_param_name);

// Threads running the same GEMM shapes at once (the server's workers decode side by side on
// the CPU) each get their own product, bit for bit what the call gives alone: the GEMM
// library's cached kernels must not share scratch memory between threads. Decoder-step and
// encoder-like shapes, with and without a bias.
TEST(MatmulThreads, ConcurrentCallsMatchOneAtATime) {
  struct Case {
    int64_t m, n, k;
    bool bias;
  };
  const std::vector<Case> shapes = {
      {1, 384, 1536, true}, {3, 1152, 384, false}, {64, 1536, 384, true}};
  constexpr int kThreads = 4, kRounds = 40;
  const auto random_tensor = [](const Shape& shape, uint64_t seed) {
    Tensor t = Tensor::empty(shape, DType::f32);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
    return t;
  };
  for (const Case& sh : shapes) {
    SCOPED_TRACE("m " + std::to_string(sh.m) + " n " + std::to_string(sh.n) + " k " +
                 std::to_string(sh.k));
    const Tensor b = random_tensor({sh.n, sh.k}, 11);
    const Tensor bias = random_tensor({sh.n}, 12);
    MatmulOptions opt;
    opt.trans_b = true;
    if (sh.bias) opt.bias = &bias;
    std::vector<Tensor> a, want;
    for (int t = 0; t < kThreads; ++t) {
      a.push_back(random_tensor({sh.m, sh.k}, uint64_t(100 + t)));
      want.push_back(Tensor::empty({sh.m, sh.n}, DType::f32));
      matmul(a.back(), b, want.back(), opt);
    }
    std::atomic<int> mismatched{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        Tensor out = Tensor::empty({sh.m, sh.n}, DType::f32);
        for (int r = 0; r < kRounds; ++r) {
          matmul(a[size_t(t)], b, out, opt);
          if (std::memcmp(out.raw(), want[size_t(t)].raw(), size_t(out.nbytes())) != 0)
            mismatched.fetch_add(1);
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(mismatched.load(), 0) << "of " << kThreads * kRounds << " calls";
  }
}

// ---------------------------------------------------------------------------- conv1d

struct ConvCase {
  int64_t batch, c_in, len, c_out, kernel;
  int stride, padding;
  bool bias;
  bool bias_f32 = true;  // else the input dtype
  bool tokens_in = false, tokens_out = false, gelu = false;
};

class Conv1d : public OpTest {
 protected:
  void run(const ConvCase& cc) {
    SCOPED_TRACE("conv1d x [" + std::to_string(cc.batch) + ", " + std::to_string(cc.c_in) + ", " +
                 std::to_string(cc.len) + "] w [" + std::to_string(cc.c_out) + ", " +
                 std::to_string(cc.c_in) + ", " + std::to_string(cc.kernel) + "] stride " +
                 std::to_string(cc.stride) + " padding " + std::to_string(cc.padding) +
                 (cc.bias ? (cc.bias_f32 ? " bias f32" : " bias") : "") +
                 (cc.tokens_in ? " tokens_in" : "") + (cc.tokens_out ? " tokens_out" : "") +
                 (cc.gelu ? " gelu" : ""));
    Conv1dOptions opt;
    opt.stride = cc.stride;
    opt.padding = cc.padding;
    opt.tokens_in = cc.tokens_in;
    opt.tokens_out = cc.tokens_out;
    opt.gelu = cc.gelu;
    const int64_t l_out = conv1d_out_length(cc.len, cc.kernel, opt);
    ASSERT_EQ(l_out, (cc.len + 2 * cc.padding - cc.kernel) / cc.stride + 1);
    const HostTensor x = random({cc.batch, cc.c_in, cc.len});  // x.v channel-major
    const HostTensor w = random({cc.c_out, cc.c_in, cc.kernel});
    const HostTensor bias = random({cc.c_out}, cc.bias_f32 ? DType::f32 : dtype());
    Tensor x_in = x.t;
    if (cc.tokens_in) {  // the same values, each position's channels contiguous
      x_in = Tensor::empty({cc.batch, cc.len, cc.c_in}, dtype());
      permute(x.t, {0, 2, 1}, x_in);
    }
    const Tensor dx = dev(x_in), dw = dev(w.t), dbias = dev(bias.t);
    opt.bias = cc.bias ? &dbias : nullptr;
    Tensor o = cc.tokens_out ? out({cc.batch, l_out, cc.c_out}) : out({cc.batch, cc.c_out, l_out});
    conv1d(dx, dw, o, opt);

    std::vector<double> want(size_t(cc.batch * cc.c_out * l_out));
    for (int64_t b = 0; b < cc.batch; ++b)
      for (int64_t oc = 0; oc < cc.c_out; ++oc)
        for (int64_t t = 0; t < l_out; ++t) {
          double s = cc.bias ? bias.v[size_t(oc)] : 0.0;
          for (int64_t ic = 0; ic < cc.c_in; ++ic)
            for (int64_t kk = 0; kk < cc.kernel; ++kk) {
              const int64_t pos = t * cc.stride + kk - cc.padding;
              if (pos < 0 || pos >= cc.len) continue;
              s += double(x.v[size_t((b * cc.c_in + ic) * cc.len + pos)]) *
                   w.v[size_t((oc * cc.c_in + ic) * cc.kernel + kk)];
            }
          if (cc.gelu) s = 0.5 * s * (1.0 + std::erf(s / std::sqrt(2.0)));
          const int64_t at =
              cc.tokens_out ? (b * l_out + t) * cc.c_out + oc : (b * cc.c_out + oc) * l_out + t;
          want[size_t(at)] = s;
        }
    // A 16-bit GELU in cuBLASLt's epilogue is the tanh form: within 4.7e-4 of the erf form.
    Tolerance tol = sum_tolerance(dtype(), cc.c_in * cc.kernel);
    if (cc.gelu && dtype() != DType::f32) tol.abs += 5e-4;
    expect_close(read_floats(o), want, tol, "conv1d");
  }
};

TEST_P(Conv1d, Stride1Padding1) {
  run({1, 80, 300, 16, 3, 1, 1, true});  // the Whisper encoder's first conv, shortened
  run({2, 5, 37, 7, 3, 1, 1, false});
}

TEST_P(Conv1d, Stride2) {
  run({1, 16, 301, 16, 3, 2, 1, true});      // the second conv, shortened
  run({2, 5, 37, 7, 3, 2, 0, true, false});  // bias in the input dtype
  run({2, 3, 9, 4, 5, 3, 2, false});
}

// Token-major inputs and outputs (a transformer's rows), with GELU: the Whisper encoder's
// convolutions, shortened, and odd shapes.
TEST_P(Conv1d, TokenMajorWithGelu) {
  const auto with = [](ConvCase c, bool tokens_in, bool tokens_out, bool gelu) {
    c.tokens_in = tokens_in;
    c.tokens_out = tokens_out;
    c.gelu = gelu;
    return c;
  };
  run(with({1, 80, 300, 64, 3, 1, 1, true, false}, false, true, true));
  run(with({2, 64, 301, 48, 3, 2, 1, true, false}, true, true, true));
  run(with({2, 5, 37, 7, 3, 2, 0, true}, true, false, false));
  run(with({3, 3, 9, 4, 5, 3, 2, false}, false, true, false));
  run(with({2, 6, 11, 5, 1, 1, 0, true}, true, true, true));  // 1x1: x is the rows
  run(with({1, 4, 10, 3, 3, 1, 1, true}, false, false, true));
}

TEST_P(Conv1d, NoPadding) {
  run({2, 5, 37, 7, 3, 1, 0, true});
  run({1, 4, 10, 3, 1, 1, 0, true});  // 1x1 kernel: no im2col
  run({1, 2, 3, 2, 3, 1, 0, false});  // output length 1
}

INSTANTIATE_TEST_SUITE_P(Ops, Conv1d, ::testing::ValuesIn(op_params()), op_param_name);

// ---------------------------------------------------------------------------- attention

struct AttentionCase {
  int64_t batch, heads, lq, lk, d, dv;
  bool causal, mask;
  float scale;        // 0: 1/sqrt(d)
  bool lens = false;  // key_len: batch b sees keys [0, len_b), the last one none when B > 1
  // batch_index: k and v hold this many items, q's item b reads item (3 b + 2) % kv_items
  // (repeats, any order); 0: k and v are q's batch.
  int64_t kv_items = 0;
};

class Attention : public OpTest {
 protected:
  void run(const AttentionCase& ac) {
    SCOPED_TRACE("attention B " + std::to_string(ac.batch) + " H " + std::to_string(ac.heads) +
                 " Lq " + std::to_string(ac.lq) + " Lk " + std::to_string(ac.lk) + " D " +
                 std::to_string(ac.d) + " Dv " + std::to_string(ac.dv) +
                 (ac.causal ? " causal" : "") + (ac.mask ? " key_mask" : "") +
                 (ac.lens ? " key_len" : "") + " scale " + std::to_string(ac.scale) +
                 (ac.kv_items ? " batch_index over " + std::to_string(ac.kv_items) : ""));
    const int64_t kv_items = ac.kv_items ? ac.kv_items : ac.batch;
    const HostTensor q = random({ac.batch, ac.heads, ac.lq, ac.d}, -2.0f, 2.0f);
    const HostTensor k = random({kv_items, ac.heads, ac.lk, ac.d}, -2.0f, 2.0f);
    const HostTensor v = random({kv_items, ac.heads, ac.lk, ac.dv});
    Tensor index_host = Tensor::empty({ac.batch}, DType::i32);
    for (int64_t b = 0; b < ac.batch; ++b)
      index_host.data<int32_t>()[b] = ac.kv_items ? int32_t((3 * b + 2) % ac.kv_items) : int32_t(b);
    const int32_t* kv_of = index_host.data<int32_t>();
    // About a quarter of keys padded; the last batch item fully padded when B > 1.
    Tensor mask_host = Tensor::empty({ac.batch, ac.lk}, DType::i8);
    int8_t* m = mask_host.data<int8_t>();
    for (int64_t b = 0; b < ac.batch; ++b)
      for (int64_t j = 0; j < ac.lk; ++j)
        m[b * ac.lk + j] = (ac.batch > 1 && b == ac.batch - 1) ? 0 : int8_t(uniform_int(0, 3) != 0);
    // Lengths: the first item all of Lk, then about half, then one key, the last none (and
    // one past Lk, clamped, when B == 1: all keys).
    Tensor len_host = Tensor::empty({ac.batch}, DType::i32);
    int32_t* lens = len_host.data<int32_t>();
    for (int64_t b = 0; b < ac.batch; ++b)
      lens[b] = b == 0              ? int32_t(ac.lk + (ac.batch == 1))
                : b == ac.batch - 1 ? 0
                : b == 1            ? int32_t(ac.lk / 2 + 1)
                                    : 1;
    const Tensor dq = dev(q.t), dk = dev(k.t), dv = dev(v.t), dmask = dev(mask_host),
                 dlen = dev(len_host), dindex = dev(index_host);
    AttentionOptions opt;
    opt.scale = ac.scale;
    opt.causal = ac.causal;
    opt.key_mask = ac.mask ? &dmask : nullptr;
    opt.key_len = ac.lens ? &dlen : nullptr;
    opt.batch_index = ac.kv_items ? &dindex : nullptr;
    Tensor o = out({ac.batch, ac.heads, ac.lq, ac.dv});
    attention(dq, dk, dv, o, opt);

    const double scale = ac.scale != 0.0f ? ac.scale : 1.0 / std::sqrt(double(ac.d));
    std::vector<double> want(size_t(o.numel()), 0.0);
    std::vector<double> s(static_cast<size_t>(ac.lk));
    for (int64_t b = 0; b < ac.batch; ++b)
      for (int64_t h = 0; h < ac.heads; ++h)
        for (int64_t i = 0; i < ac.lq; ++i) {
          const int64_t bh = b * ac.heads + h, kvh = kv_of[b] * ac.heads + h;
          double mx = -INFINITY;
          std::vector<bool> seen(static_cast<size_t>(ac.lk));
          for (int64_t j = 0; j < ac.lk; ++j) {
            seen[size_t(j)] = (!ac.causal || j <= i + ac.lk - ac.lq) &&
                              (!ac.mask || m[b * ac.lk + j]) && (!ac.lens || j < lens[b]);
            if (!seen[size_t(j)]) continue;
            double dot = 0.0;
            for (int64_t c = 0; c < ac.d; ++c)
              dot += double(q.v[size_t((bh * ac.lq + i) * ac.d + c)]) *
                     k.v[size_t((kvh * ac.lk + j) * ac.d + c)];
            s[size_t(j)] = dot * scale;
            mx = std::max(mx, s[size_t(j)]);
          }
          if (mx == -INFINITY) continue;  // nothing visible: zeros
          double sum = 0.0;
          for (int64_t j = 0; j < ac.lk; ++j)
            if (seen[size_t(j)]) sum += std::exp(s[size_t(j)] - mx);
          for (int64_t j = 0; j < ac.lk; ++j) {
            if (!seen[size_t(j)]) continue;
            const double p = std::exp(s[size_t(j)] - mx) / sum;
            for (int64_t c = 0; c < ac.dv; ++c)
              want[size_t((bh * ac.lq + i) * ac.dv + c)] +=
                  p * v.v[size_t((kvh * ac.lk + j) * ac.dv + c)];
          }
        }
    expect_close(read_floats(o), want, tol(), "attention");
  }
};

TEST_P(Attention, Full) {
  run({2, 3, 5, 9, 16, 16, false, false, 0.0f});
  run({1, 2, 33, 33, 64, 64, false, false, 0.0f});
}

TEST_P(Attention, CausalShorterQuery) {
  run({2, 3, 5, 9, 16, 16, true, false, 0.0f});
  run({1, 2, 7, 7, 8, 8, true, false, 0.0f});
  run({1, 2, 6, 3, 8, 8, true, false, 0.0f});  // Lq > Lk: the first rows see nothing
}

TEST_P(Attention, KeyMask) {
  run({3, 2, 5, 11, 16, 16, false, true, 0.0f});
  run({3, 2, 5, 11, 16, 8, true, true, 0.0f});
}

TEST_P(Attention, Scale) { run({2, 2, 7, 7, 32, 24, false, true, 0.3f}); }

// From 32 query rows on, the CPU runs attention as GEMMs around a softmax: the same
// cases again on that path, and one long enough in Lk to split the queries into blocks.
TEST_P(Attention, LongQueries) {
  run({2, 2, 40, 57, 16, 24, true, true, 0.3f});
  run({1, 2, 40, 20, 8, 8, true, false, 0.0f});  // Lq > Lk: the first rows see nothing
  run({3, 1, 33, 33, 32, 32, false, true, 0.0f});
  run({1, 1, 40, 30000, 4, 4, true, true, 0.0f});
}

TEST_P(Attention, DecodeStep) {
  run({2, 4, 1, 17, 8, 12, true, false, 0.0f});
  run({3, 2, 1, 40, 64, 64, true, true, 0.0f});
}

// Whisper decoder shapes on CUDA's split-key path (keys cut into chunks of 64, merged by
// the last block of each (row, head) to finish): cross-attention over 1500 frames (24
// chunks, the last one partial), beams over a causal self-attention cache, a chunk
// boundary exactly at Lk, and padded keys (the last batch item fully padded: every chunk
// empty); the 16-byte kernel at D = 32 (4 lanes a key) and D = 128 (the generic kernel for
// 16-bit types). Every call must leave the per-(row, head) counters at zero for the next.
TEST_P(Attention, DecodeSplitKeys) {
  run({1, 6, 1, 1500, 64, 64, false, false, 0.0f});
  run({5, 3, 1, 200, 64, 64, true, false, 0.0f});
  run({2, 2, 3, 128, 64, 64, true, true, 0.0f});
  run({3, 2, 2, 150, 32, 48, false, true, 0.0f});
  run({3, 3, 1, 300, 32, 32, false, true, 0.0f});
  run({1, 4, 1, 700, 128, 128, false, false, 0.0f});
  run({1, 6, 1, 1500, 64, 64, false, false, 0.0f});  // again, on the counters left behind
}

// Several rows of a batch item over the same keys, as a beam's rows over one window's
// cross-attention K/V (no causal limit, D 64 or 32): padded keys with the last batch item
// fully padded, 1500 keys, 128 keys, D 32 over 129 keys, and 9000 keys.
TEST_P(Attention, RowsShareKeys) {
  run({3, 4, 5, 300, 64, 64, false, true, 0.0f});
  run({2, 3, 8, 1500, 64, 64, false, true, 0.0f});
  run({2, 20, 7, 128, 64, 64, false, true, 0.0f});
  run({1, 2, 2, 129, 32, 32, false, false, 0.0f});
  run({1, 2, 3, 9000, 64, 64, false, false, 0.0f});
}

// More than 4096 (row, head) pairs: CUDA leaves the split path for the per-row kernel.
TEST_P(Attention, ManyRows) { run({1, 8, 600, 70, 16, 16, true, true, 0.0f}); }

// Whisper large-v3-turbo's decoder: 20 heads of 64, 1..5 rows (beams), self-attention
// over a growing cache and cross-attention over 1500 frames. On CUDA's split path (keys in
// chunks of 64; up to 128 keys are one chunk written out without a merge) 1, 7, 64 and 65
// keys are one chunk, 448 and 1500 several (the last one partial).
TEST_P(Attention, DecoderStepShapes) {
  for (int64_t rows = 1; rows <= 5; ++rows)
    for (int64_t lk : {1, 7, 64, 65, 448, 1500}) run({rows, 20, 1, lk, 64, 64, false, false, 0.0f});
}

// One chunk with causal limits, padded keys (the last batch item fully padded: its rows
// are zeros), the chunk size's edges, and D that takes the generic (not 16-byte) kernel.
TEST_P(Attention, SingleChunkEdges) {
  run({3, 4, 1, 100, 64, 64, true, true, 0.0f});
  run({2, 3, 4, 50, 64, 64, true, false, 0.0f});     // Lq 4: causal limits inside the chunk
  run({2, 2, 6, 3, 64, 64, true, false, 0.0f});      // Lq > Lk: the first rows see nothing
  run({2, 5, 1, 128, 64, 64, false, true, 0.0f});    // the longest single chunk
  run({2, 5, 1, 129, 64, 64, false, true, 0.0f});    // two chunks: 64 and 65
  run({3, 2, 1, 90, 48, 40, false, true, 0.0f});     // generic kernel, Dv != D
  run({1, 2, 1, 70, 200, 200, false, false, 0.0f});  // generic kernel, Dv over 128
  run({1, 2, 1, 200, 200, 200, true, false, 0.0f});  // ... and several chunks
}

// AttentionOptions::key_len: each batch item's keys end at its own length (short audio
// windows in caches of 1500): on the split path (a decoder step over 1500 keys, rows of one
// item sharing them), with a key mask and causal limits too, and on the long-query paths.
TEST_P(Attention, KeyLengths) {
  run({4, 20, 1, 1500, 64, 64, false, false, 0.0f, true});
  run({3, 4, 5, 300, 64, 64, false, true, 0.0f, true});
  run({3, 2, 2, 150, 32, 48, true, false, 0.0f, true});
  run({1, 6, 1, 1500, 64, 64, false, false, 0.0f, true});  // one item, a length past Lk
  run({3, 2, 40, 57, 16, 24, true, true, 0.3f, true});     // the CPU's GEMM path
}

// AttentionOptions::batch_index: rows over slots of a cache (a Whisper batch step over the
// slots it lists, in one call): more slots than rows, fewer (repeats), with key lengths,
// a key mask and causal limits, on the split path (1500 and 448 keys), the single-chunk
// kernels and the CPU's GEMM path.
TEST_P(Attention, BatchIndex) {
  run({5, 20, 1, 1500, 64, 64, false, false, 0.0f, true, 8});
  run({6, 4, 1, 448, 64, 64, false, false, 0.0f, true, 4});
  run({3, 4, 1, 100, 64, 64, true, true, 0.0f, false, 7});
  run({4, 2, 2, 150, 32, 48, true, false, 0.0f, true, 3});
  run({3, 2, 40, 57, 16, 24, true, true, 0.3f, true, 5});  // the CPU's GEMM path
}

INSTANTIATE_TEST_SUITE_P(Ops, Attention, ::testing::ValuesIn(op_params()), op_param_name);

// ------------------------------------------------------------------------ attention_qkv

struct AttentionQkvCase {
  int64_t batch, len, heads, d;
  bool causal;
};

class AttentionQkv : public OpTest {
 protected:
  void run(const AttentionQkvCase& ac) {
    SCOPED_TRACE("attention_qkv B " + std::to_string(ac.batch) + " L " + std::to_string(ac.len) +
                 " H " + std::to_string(ac.heads) + " D " + std::to_string(ac.d) +
                 (ac.causal ? " causal" : ""));
    const int64_t hd = ac.heads * ac.d;
    const HostTensor qkv = random({ac.batch, ac.len, 3 * hd}, -2.0f, 2.0f);
    AttentionOptions opt;
    opt.causal = ac.causal;
    Tensor o = out({ac.batch, ac.len, hd});
    attention_qkv(dev(qkv.t), int(ac.heads), o, opt);

    const double scale = 1.0 / std::sqrt(double(ac.d));
    auto at = [&](int64_t b, int64_t pos, int64_t which, int64_t h, int64_t c) {
      return double(qkv.v[size_t(((b * ac.len + pos) * 3 + which) * hd + h * ac.d + c)]);
    };
    std::vector<double> want(size_t(o.numel()), 0.0), s(size_t(ac.len));
    for (int64_t b = 0; b < ac.batch; ++b)
      for (int64_t h = 0; h < ac.heads; ++h)
        for (int64_t i = 0; i < ac.len; ++i) {
          const int64_t end = ac.causal ? i + 1 : ac.len;
          double mx = -INFINITY, sum = 0.0;
          for (int64_t j = 0; j < end; ++j) {
            double dot = 0.0;
            for (int64_t c = 0; c < ac.d; ++c) dot += at(b, i, 0, h, c) * at(b, j, 1, h, c);
            s[size_t(j)] = dot * scale;
            mx = std::max(mx, s[size_t(j)]);
          }
          for (int64_t j = 0; j < end; ++j) sum += std::exp(s[size_t(j)] - mx);
          for (int64_t j = 0; j < end; ++j) {
            const double p = std::exp(s[size_t(j)] - mx) / sum;
            for (int64_t c = 0; c < ac.d; ++c)
              want[size_t((b * ac.len + i) * hd + h * ac.d + c)] += p * at(b, j, 2, h, c);
          }
        }
    expect_close(read_floats(o), want, tol(), "attention_qkv");
  }
};

// D = 64 without a mask is CUDA's flash kernel in f16/bf16 (blocks of 128 query rows, key
// tiles of 64): several key tiles with a partial last one (700 = 10 * 64 + 60), a batch of
// two with a partial query block, a length under one tile, a batch of three whose second
// query block has one row and last key tile one key (129), and the Whisper encoder's
// length (1500 = 11 * 128 + 92 rows, 23 * 64 + 28 keys). D = 32 and causal take the
// split-heads path.
TEST_P(AttentionQkv, Flash) {
  run({1, 700, 2, 64, false});
  run({2, 77, 3, 64, false});
  run({1, 5, 1, 64, false});
  run({3, 129, 2, 64, false});
  run({1, 1500, 1, 64, false});
}

TEST_P(AttentionQkv, SplitHeadsPath) {
  run({1, 130, 2, 32, false});
  run({2, 40, 2, 64, true});
}

INSTANTIATE_TEST_SUITE_P(Ops, AttentionQkv, ::testing::ValuesIn(op_params()), op_param_name);

// --------------------------------------------------------------------- attention_tokens

// q [B, Lq, Wq] heads at column qc; k [B, Lc, Wk] at kc, v [B, Lc, Wv] at vc; n_keys <= Lc.
struct AttentionTokensCase {
  int64_t batch, heads, d, lq, n_keys, cap;
  int64_t wq, qc, wk, kc, wv, vc;
  bool causal;
  std::vector<int32_t> slots = {};  // k and v batch_index; k and v get max + 2 batches
  bool kv_static = false;           // AttentionOptions::kv_static
  int64_t static_keys = 0;          // AttentionOptions::static_keys
};

class AttentionTokens : public OpTest {
 protected:
  void run(const AttentionTokensCase& ac) {
    SCOPED_TRACE("attention_tokens B " + std::to_string(ac.batch) + " H " +
                 std::to_string(ac.heads) + " D " + std::to_string(ac.d) + " Lq " +
                 std::to_string(ac.lq) + " keys " + std::to_string(ac.n_keys) + " of " +
                 std::to_string(ac.cap) + " W " + std::to_string(ac.wq) + "/" +
                 std::to_string(ac.wk) + "/" + std::to_string(ac.wv) + " at " +
                 std::to_string(ac.qc) + "/" + std::to_string(ac.kc) + "/" + std::to_string(ac.vc) +
                 (ac.causal ? " causal" : "") + (ac.kv_static ? " kv_static" : "") +
                 " static_keys " + std::to_string(ac.static_keys));
    const int64_t hd = ac.heads * ac.d;
    const HostTensor q = random({ac.batch, ac.lq, ac.wq}, -2.0f, 2.0f);
    const bool indexed = !ac.slots.empty();
    const int64_t kv_batch =
        indexed ? *std::max_element(ac.slots.begin(), ac.slots.end()) + 2 : ac.batch;
    const HostTensor k = random({kv_batch, ac.cap, ac.wk}, -2.0f, 2.0f);
    const HostTensor v = random({kv_batch, ac.cap, ac.wv});
    Tensor slots_host = Tensor::empty({ac.batch}, DType::i32);
    for (int64_t b = 0; b < ac.batch; ++b)
      slots_host.data<int32_t>()[b] = indexed ? ac.slots[size_t(b)] : int32_t(b);
    const Tensor dq = dev(q.t), dk = dev(k.t), dv = dev(v.t), dslots = dev(slots_host);
    AttentionOptions opt;
    opt.causal = ac.causal;
    opt.kv_static = ac.kv_static;
    opt.static_keys = ac.static_keys;
    Tensor o = out({ac.batch, ac.lq, hd});
    const Tensor* index = indexed ? &dslots : nullptr;
    attention_tokens({dq, ac.qc}, {dk, ac.kc, index}, {dv, ac.vc, index}, ac.n_keys, int(ac.heads),
                     o, opt);

    const double scale = 1.0 / std::sqrt(double(ac.d));
    std::vector<double> want(size_t(o.numel()), 0.0), s(size_t(ac.n_keys));
    for (int64_t b = 0; b < ac.batch; ++b)
      for (int64_t h = 0; h < ac.heads; ++h)
        for (int64_t i = 0; i < ac.lq; ++i) {
          const int64_t kb = slots_host.data<int32_t>()[b];
          const int64_t end =
              ac.causal ? std::clamp<int64_t>(i + ac.n_keys - ac.lq + 1, 0, ac.n_keys) : ac.n_keys;
          if (end == 0) continue;  // nothing visible: zeros
          double mx = -INFINITY, sum = 0.0;
          for (int64_t j = 0; j < end; ++j) {
            double dot = 0.0;
            for (int64_t c = 0; c < ac.d; ++c)
              dot += double(q.v[size_t((b * ac.lq + i) * ac.wq + ac.qc + h * ac.d + c)]) *
                     k.v[size_t((kb * ac.cap + j) * ac.wk + ac.kc + h * ac.d + c)];
            s[size_t(j)] = dot * scale;
            mx = std::max(mx, s[size_t(j)]);
          }
          for (int64_t j = 0; j < end; ++j) sum += std::exp(s[size_t(j)] - mx);
          for (int64_t j = 0; j < end; ++j) {
            const double p = std::exp(s[size_t(j)] - mx) / sum;
            for (int64_t c = 0; c < ac.d; ++c)
              want[size_t((b * ac.lq + i) * hd + h * ac.d + c)] +=
                  p * v.v[size_t((kb * ac.cap + j) * ac.wv + ac.vc + h * ac.d + c)];
          }
        }
    expect_close(read_floats(o), want, tol(), "attention_tokens");
  }
};

// A decoder step as WhisperSession::decode runs it: q is the first third of a fused q|k|v
// row, k and v are two column ranges of one cache of that width, of which only the first
// n_keys positions count (the rest hold garbage that must not be read).
TEST_P(AttentionTokens, SelfAttentionStep) {
  run({1, 6, 64, 1, 37, 64, 3 * 384, 0, 3 * 384, 384, 3 * 384, 768, true});
  run({1, 2, 8, 1, 1, 5, 48, 0, 48, 16, 48, 32, true});           // the first position
  run({3, 4, 16, 1, 130, 150, 192, 0, 192, 64, 192, 128, true});  // split chunks, batch
}

// Prefill: several queries, the causal limit moving with them, Lq > n_keys (the first rows
// see nothing), and more (row, head) pairs than CUDA's split path takes (its per-row kernel).
TEST_P(AttentionTokens, CausalPrefill) {
  run({1, 3, 16, 9, 20, 24, 144, 0, 144, 48, 144, 96, true});
  run({1, 2, 8, 6, 3, 3, 16, 0, 48, 16, 48, 32, true});
  // From 32 queries on, the CPU gathers the heads for its GEMM path.
  run({2, 2, 8, 40, 20, 24, 48, 0, 48, 16, 48, 32, true});
  run({1, 8, 16, 600, 600, 600, 3 * 128, 0, 3 * 128, 128, 3 * 128, 256, true});
}

// Cross-attention: k and v one layer's columns in a buffer of every layer's k|v (here the
// third of four layers), 1500 keys; and unaligned columns and odd widths (CUDA's generic
// kernel instead of the 16-byte one).
TEST_P(AttentionTokens, CrossAttention) {
  run({1, 6, 64, 1, 1500, 1500, 384, 0, 8 * 384, 4 * 384, 8 * 384, 5 * 384, false});
  run({1, 6, 64, 5, 1500, 1500, 384, 0, 8 * 384, 4 * 384, 8 * 384, 5 * 384, false});
  run({2, 3, 12, 4, 70, 71, 37, 1, 41, 3, 40, 2, false});
}

// Several rows that see the same keys (no causal mask; CUDA cuts their keys into chunks of
// 128): 11 rows over 1500 keys, one chunk (no merge) with a batch of 2, a batch_index shared
// by the rows of a batch, D 32, and K/V requested before the wait.
TEST_P(AttentionTokens, RowsShareKeys) {
  run({1, 6, 64, 11, 1500, 1500, 384, 0, 8 * 384, 4 * 384, 8 * 384, 5 * 384, false});
  run({2, 4, 64, 5, 100, 120, 256, 0, 512, 0, 512, 256, false});
  run({2, 2, 64, 9, 300, 300, 128, 0, 128, 0, 128, 0, false, {1, 1}});
  run({1, 3, 32, 5, 700, 700, 96, 0, 192, 96, 192, 0, false, {}, true});
  run({3, 6, 64, 2, 1500, 1500, 384, 0, 768, 0, 768, 384, false, {}, true});
}

// Beam rows in slots of a cache (batch_index): a row reads another batch of k and v, two
// rows the same slot; decode steps (split path) and a prefill past 32 queries (CPU GEMM path).
TEST_P(AttentionTokens, BatchIndex) {
  run({3, 2, 64, 1, 90, 100, 384, 0, 384, 128, 384, 256, true, {2, 0, 2}});
  run({2, 2, 8, 40, 50, 50, 48, 0, 48, 16, 48, 32, true, {1, 0}});
}

// kv_static: CUDA's split kernels request K/V before waiting for q (nothing to wait for in
// an eager call, but the reordered kernels must give the same results): the 16-byte kernel
// over cross-attention's 1500 keys, the generic one, a batch_index, and causal chunks that
// are empty for the first queries (Lq 100 over 4 chunks).
TEST_P(AttentionTokens, KvStatic) {
  run({1, 6, 64, 1, 1500, 1500, 384, 0, 8 * 384, 4 * 384, 8 * 384, 5 * 384, false, {}, true});
  run({2, 3, 12, 4, 70, 71, 37, 1, 41, 3, 40, 2, false, {}, true});
  run({2, 2, 8, 3, 200, 210, 37, 1, 41, 3, 40, 2, true, {}, true});
  run({3, 2, 64, 1, 90, 100, 384, 0, 384, 128, 384, 256, true, {2, 0, 2}, true});
  run({1, 1, 64, 100, 200, 200, 64, 0, 192, 64, 192, 128, true, {}, true});
}

// static_keys: CUDA's 16-byte split kernel requests the cached keys below it before waiting
// for q and the rest after (a decoder step: every key but its own). One chunk; several, the
// boundary inside the last; beam rows through a batch_index; a bound past the keys and one at
// zero; and the generic kernel, which ignores it.
TEST_P(AttentionTokens, StaticKeys) {
  run({1, 6, 64, 1, 37, 64, 3 * 384, 0, 3 * 384, 384, 3 * 384, 768, true, {}, false, 36});
  run({1, 4, 64, 1, 300, 320, 768, 0, 768, 256, 768, 512, true, {}, false, 299});
  run({3, 2, 64, 1, 90, 100, 384, 0, 384, 128, 384, 256, true, {2, 0, 2}, false, 89});
  run({2, 2, 64, 1, 150, 150, 384, 0, 384, 128, 384, 256, true, {}, false, 1000});
  run({2, 2, 64, 1, 150, 150, 384, 0, 384, 128, 384, 256, true, {}, false, 64});
  run({2, 3, 12, 1, 70, 71, 37, 1, 41, 3, 40, 2, true, {}, false, 69});
}

INSTANTIATE_TEST_SUITE_P(Ops, AttentionTokens, ::testing::ValuesIn(op_params()), op_param_name);

}  // namespace
}  // namespace parley::test
