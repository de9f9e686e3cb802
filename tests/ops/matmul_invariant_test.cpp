// matmul with MatmulOptions::batch_invariant on the CPU (ops/matmul.h): a row's result in an
// 11-row call (4-, 3- and 1-row tiles) is the same bits as the row alone, and it is the
// product (float64 within f32 rounding) with bias, alpha and beta applied.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "engine/ops/matmul.h"
#include "engine/tensor.h"

namespace parley {
namespace {

Tensor random(std::vector<int64_t> shape, std::mt19937_64& rng) {
  Tensor t = Tensor::empty(Shape(shape.begin(), shape.end()), DType::f32);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = g(rng);
  return t;
}

TEST(MatmulInvariant, RowsEqualTheirProductAloneAndFloat64) {
  std::mt19937_64 rng(7);
  for (const int64_t k : {8, 13, 64, 300}) {  // K % 8 = 0 and tails
    const int64_t m = 11, n = 23;             // both past a tile, with tails
    const Tensor a = random({m, k}, rng), b = random({n, k}, rng), bias = random({n}, rng);
    MatmulOptions o;
    o.trans_b = true;
    o.batch_invariant = true;
    o.bias = &bias;
    o.alpha = 0.5f;
    Tensor all = random({m, n}, rng);
    const Tensor before = random({m, n}, rng);
    std::memcpy(all.data<float>(), before.data<float>(), size_t(m * n) * sizeof(float));
    o.beta = 0.25f;
    matmul(a, b, all, o);
    for (int64_t r = 0; r < m; ++r) {
      Tensor one = Tensor::empty({1, n}, DType::f32);
      std::memcpy(one.data<float>(), before.data<float>() + r * n, size_t(n) * sizeof(float));
      Tensor row = Tensor::empty({1, k}, DType::f32);
      std::memcpy(row.data<float>(), a.data<float>() + r * k, size_t(k) * sizeof(float));
      matmul(row, b, one, o);
      for (int64_t j = 0; j < n; ++j) {
        const float got = all.data<float>()[r * n + j];
        EXPECT_EQ(std::memcmp(&got, one.data<float>() + j, sizeof(float)), 0)
            << "k " << k << " row " << r << " col " << j;  // bit for bit
        double want = 0, scale = 0;
        for (int64_t i = 0; i < k; ++i) {
          const double p = double(a.data<float>()[r * k + i]) * b.data<float>()[j * k + i];
          want += p;
          scale += std::fabs(p);
        }
        want = 0.5 * want + bias.data<float>()[j] + 0.25 * before.data<float>()[r * n + j];
        EXPECT_NEAR(got, want, 1e-6 * (scale + 2.0)) << "k " << k;
      }
    }
  }
}

// By hand: ./test_ops --gtest_also_run_disabled_tests --gtest_filter='*InvariantThroughput*'
// GFLOP/s of the batch-invariant GEMM against the library's GEMM (oneDNN) on qwen3-0.6b's
// projection shapes at prefill (M = 256) and decode (M = 1): the price of invariance.
TEST(MatmulInvariant, DISABLED_InvariantThroughput) {
  std::mt19937_64 rng(3);
  struct Shape {
    int64_t n, k;
  };
  for (const int64_t m : {256, 1}) {
    for (const bool invariant : {false, true}) {
      double flops = 0, secs = 0;
      for (const Shape s : {Shape{2048, 1024}, Shape{3072, 1024}, Shape{1024, 3072}}) {
        const Tensor a = random({m, s.k}, rng), b = random({s.n, s.k}, rng);
        Tensor c = Tensor::empty({m, s.n}, DType::f32);
        MatmulOptions o;
        o.trans_b = true;
        o.batch_invariant = invariant;
        matmul(a, b, c, o);
        double best = INFINITY;  // the fastest of several calls: other work shares the cores
        for (int r = 0; r < (m == 1 ? 50 : 8); ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          matmul(a, b, c, o);
          best = std::min(
              best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        secs += best;
        flops += 2.0 * double(m) * double(s.n) * double(s.k);
      }
      std::printf("  M=%lld %s: %.1f GFLOP/s\n", (long long)m,
                  invariant ? "batch-invariant" : "library", flops / secs / 1e9);
    }
  }
}

}  // namespace
}  // namespace parley
