// matmul_i8 (ops/int8_matmul.h): the weight quantization's ranges, oneDNN's integer sums
// against the plain loops (bit for bit), the error against the f32 product within the
// rounding bound, the operands at their extremes (where 8-bit activations would saturate AVX2's
// vpmaddubsw), the epilogue (bias, GELU, accumulation), batch invariance and bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/ops/elementwise.h"
#include "engine/ops/int8_matmul.h"
#include "ops/op_test_util.h"

namespace parley {
namespace {

using test::expect_error;

Tensor random(Shape shape, std::mt19937_64& rng, float scale = 1.0f) {
  Tensor t = Tensor::empty(shape, DType::f32, Device::cpu);
  std::normal_distribution<float> dist(0.0f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

std::vector<float> values(const Tensor& t) {
  return {t.data<float>(), t.data<float>() + t.numel()};
}

TEST(MatmulI8, WeightsAreEightBitWithOneScaleARow) {
  std::mt19937_64 rng(1);
  Tensor w = random({5, 64}, rng);
  for (int64_t k = 0; k < 64; ++k) w.data<float>()[64 * 4 + k] = 0.0f;  // a row of zeros
  const RowInt8 r = quantize_row_int8(w);
  for (int64_t j = 0; j < 5; ++j) {
    float amax = 0.0f;
    int32_t sum = 0;
    int max_q = 0;
    for (int64_t k = 0; k < 64; ++k) {
      amax = std::max(amax, std::fabs(w.data<float>()[j * 64 + k]));
      const int q = r.q.data<int8_t>()[j * 64 + k];
      sum += q;
      max_q = std::max(max_q, std::abs(q));
      // Each weight within half a step of its integer.
      EXPECT_LE(std::fabs(w.data<float>()[j * 64 + k] - r.scale.data<float>()[j] * float(q)),
                0.5f * r.scale.data<float>()[j] * 1.0001f);
    }
    EXPECT_FLOAT_EQ(r.scale.data<float>()[j], amax / 127.0f);
    EXPECT_EQ(r.colsum.data<int32_t>()[j], sum);
    EXPECT_EQ(max_q, j == 4 ? 0 : 127);  // the row's largest weight takes the whole range
  }
}

// The oneDNN sums equal the plain loops' (both exact integers), so the outputs are equal.
TEST(MatmulI8, LibraryEqualsReferenceBitForBit) {
  std::mt19937_64 rng(2);
  for (const auto [m, n, k] :
       {std::array<int64_t, 3>{1, 7, 32}, {37, 70, 96}, {150, 384, 1536}, {64, 1152, 384}}) {
    const Tensor a = random({m, k}, rng), bias = random({n}, rng);
    const RowInt8 w = quantize_row_int8(random({n, k}, rng, 0.05f));
    Tensor fast = Tensor::empty({m, n}, DType::f32, Device::cpu);
    Tensor ref = Tensor::empty({m, n}, DType::f32, Device::cpu);
    MatmulI8Options opt;
    opt.bias = &bias;
    matmul_i8(a, w, fast, opt);
    opt.reference = true;
    matmul_i8(a, w, ref, opt);
    EXPECT_EQ(values(fast), values(ref)) << m << " x " << n << " x " << k;
  }
}

// Against the f32 product of the unquantized operands: within the rounding bound, per
// element, of the two operands' quantization (t_m / 2 per activation, s_n / 2 per weight).
TEST(MatmulI8, WithinTheRoundingBoundOfTheF32Product) {
  std::mt19937_64 rng(3);
  const int64_t m = 24, n = 48, k = 384;
  const Tensor a = random({m, k}, rng), w = random({n, k}, rng, 0.05f);
  const RowInt8 q = quantize_row_int8(w);
  Tensor c = Tensor::empty({m, n}, DType::f32, Device::cpu);
  matmul_i8(a, q, c);
  double worst = 0.0, typical = 0.0;
  for (int64_t i = 0; i < m; ++i) {
    float amax = 0.0f;
    for (int64_t l = 0; l < k; ++l) amax = std::max(amax, std::fabs(a.data<float>()[i * k + l]));
    const double t = amax / 63.0;
    for (int64_t j = 0; j < n; ++j) {
      const double s = q.scale.data<float>()[j];
      double exact = 0.0, bound = 0.0, mag = 0.0;
      for (int64_t l = 0; l < k; ++l) {
        const double x = a.data<float>()[i * k + l], y = w.data<float>()[j * k + l];
        exact += x * y;
        bound += t / 2 * (std::fabs(y) + s / 2) + s / 2 * std::fabs(x);
        mag += std::fabs(x * y);
      }
      const double err = std::fabs(c.data<float>()[i * n + j] - exact);
      EXPECT_LE(err, bound * 1.001 + 1e-6) << i << ", " << j;
      worst = std::max(worst, err / mag);
      typical += err / mag;
    }
  }
  // Gaussian operands: the errors average out far below the bound.
  EXPECT_LT(typical / double(m * n), 4e-3);
  EXPECT_LT(worst, 2e-2);
}

// Every activation at the row's maximum (u = 127) against weights at +-127: the pairwise
// int16 sums of vpmaddubsw reach 127 * 127 * 2 = 32258, just inside int16. With 8-bit
// activations (u up to 255) the same sums would be 64770, and oneDNN's AVX2 GEMM returned
// 48960 for 6193536 (K = 384).
TEST(MatmulI8, ExtremeOperandsDoNotSaturate) {
  for (const float sign : {1.0f, -1.0f}) {
    const int64_t m = 16, n = 16, k = 384;
    Tensor a = Tensor::empty({m, k}, DType::f32, Device::cpu);
    Tensor w = Tensor::empty({n, k}, DType::f32, Device::cpu);
    for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = 2.0f;
    for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = sign * 0.5f;
    Tensor c = Tensor::empty({m, n}, DType::f32, Device::cpu);
    matmul_i8(a, quantize_row_int8(w), c);
    for (int64_t i = 0; i < c.numel(); ++i)
      ASSERT_FLOAT_EQ(c.data<float>()[i], sign * float(k)) << i;  // 2 * 0.5 * 384, exact
  }
}

TEST(MatmulI8, EpilogueAddsBiasThenGeluThenAccumulates) {
  std::mt19937_64 rng(4);
  const int64_t m = 9, n = 40, k = 64;
  const Tensor a = random({m, k}, rng), bias = random({n}, rng), start = random({m, n}, rng);
  const RowInt8 w = quantize_row_int8(random({n, k}, rng, 0.1f));
  Tensor plain = Tensor::empty({m, n}, DType::f32, Device::cpu);
  MatmulI8Options with_bias;
  with_bias.bias = &bias;
  matmul_i8(a, w, plain, with_bias);

  Tensor fused = Tensor::empty({m, n}, DType::f32, Device::cpu);
  MatmulI8Options gelu = with_bias;
  gelu.gelu = true;
  matmul_i8(a, w, fused, gelu);
  Tensor separate = Tensor::empty({m, n}, DType::f32, Device::cpu);
  parley::gelu(plain, separate);
  EXPECT_EQ(values(fused), values(separate));

  Tensor acc = Tensor::empty({m, n}, DType::f32, Device::cpu);
  acc.copy_from(start);
  MatmulI8Options accumulate = with_bias;
  accumulate.beta = 0.5f;
  matmul_i8(a, w, acc, accumulate);
  for (int64_t i = 0; i < m * n; ++i)
    EXPECT_EQ(acc.data<float>()[i], plain.data<float>()[i] + 0.5f * start.data<float>()[i]);

  // A row of zeros gives the bias alone.
  Tensor zero = Tensor::zeros({1, k}, DType::f32, Device::cpu);
  Tensor out = Tensor::empty({1, n}, DType::f32, Device::cpu);
  matmul_i8(zero, w, out, with_bias);
  for (int64_t j = 0; j < n; ++j) EXPECT_EQ(out.data<float>()[j], bias.data<float>()[j]);
}

// A row's result does not depend on the rows beside it (each row has its own scale).
TEST(MatmulI8, RowsAreBatchInvariant) {
  std::mt19937_64 rng(5);
  const int64_t n = 96, k = 128;
  const Tensor a = random({33, k}, rng);
  const RowInt8 w = quantize_row_int8(random({n, k}, rng, 0.05f));
  Tensor all = Tensor::empty({33, n}, DType::f32, Device::cpu);
  matmul_i8(a, w, all);
  for (const int64_t row : {0, 17, 32}) {
    Tensor one = Tensor::empty({1, n}, DType::f32, Device::cpu);
    matmul_i8(a.slice0(row, row + 1), w, one);
    for (int64_t j = 0; j < n; ++j) EXPECT_EQ(one.data<float>()[j], all.data<float>()[row * n + j]);
  }
}

TEST(MatmulI8, BadArgumentsAreClearErrors) {
  std::mt19937_64 rng(6);
  const RowInt8 w = quantize_row_int8(random({8, 32}, rng));
  Tensor c = Tensor::empty({2, 8}, DType::f32, Device::cpu);
  expect_error([&] { matmul_i8(random({2, 31}, rng), w, c); }, {"[matmul_i8]", "[M, 32]"});
  Tensor wrong_c = Tensor::empty({2, 9}, DType::f32, Device::cpu);
  expect_error([&] { matmul_i8(random({2, 32}, rng), w, wrong_c); }, {"[matmul_i8]", "c"});
  const Tensor short_bias = random({7}, rng);
  MatmulI8Options opt;
  opt.bias = &short_bias;
  expect_error([&] { matmul_i8(random({2, 32}, rng), w, c, opt); }, {"[matmul_i8]", "bias"});
  expect_error([&] { matmul_i8(random({2, 32}, rng), RowInt8{}, c); }, {"[matmul_i8]", "empty"});
  expect_error(
      [&] {
        quantize_row_int8(Tensor::empty({2, 32}, DType::f16, Device::cpu));
      },
      {"f32"});
}

}  // namespace
}  // namespace parley
