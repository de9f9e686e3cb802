// matmul_quant (ops/quant_matmul.h) on random block-quantized weights: the block decoder
// against the element decoder, the f32 reference against f64, the AVX2 8-bit path against
// the reference at decode and prefill shapes, batch invariance, bad arguments, and (disabled,
// run by hand) the weight bandwidth at M = 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "engine/ops/quant_matmul.h"
#include "engine/threadpool.h"
#include "ops/op_test_util.h"

namespace parley {
namespace {

using test::expect_error;

constexpr QuantType kAll[] = {QuantType::q4_0, QuantType::q4_1, QuantType::q5_0, QuantType::q5_1,
                              QuantType::q8_0, QuantType::q2_k, QuantType::q3_k, QuantType::q4_k,
                              QuantType::q5_k, QuantType::q6_k};

// Byte offsets of a block's f16 scales (random bytes there could be NaN or huge).
std::vector<int> f16_fields(QuantType t) {
  switch (t) {
    case QuantType::q4_1:
    case QuantType::q5_1:
    case QuantType::q4_k:
    case QuantType::q5_k: return {0, 2};
    case QuantType::q2_k: return {80, 82};
    case QuantType::q3_k: return {108};
    case QuantType::q6_k: return {208};
    default: return {0};
  }
}

// Random blocks: every quant bit pattern, scales f16 in (-scale, scale).
struct RandomMatrix {
  std::vector<uint8_t> bytes;
  QuantMatrix w;
};
RandomMatrix random_matrix(QuantType t, int64_t rows, int64_t cols, std::mt19937_64& rng,
                           float scale = 0.05f) {
  const QuantFormat& f = quant_format(t);
  RandomMatrix m;
  m.bytes.resize(size_t(rows * cols / f.block_size * f.block_bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> real(-scale, scale);
  for (auto& b : m.bytes) b = uint8_t(byte(rng));
  for (size_t blk = 0; blk < m.bytes.size(); blk += size_t(f.block_bytes)) {
    for (int off : f16_fields(t)) {
      const uint16_t h = f32_to_f16(real(rng));
      std::memcpy(m.bytes.data() + blk + size_t(off), &h, 2);
    }
  }
  m.w = quant_matrix(t, rows, cols, m.bytes.data(), int64_t(m.bytes.size()), nullptr);
  return m;
}

Tensor random_rows(int64_t m, int64_t k, std::mt19937_64& rng) {
  Tensor a = Tensor::empty({m, k}, DType::f32);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = g(rng);
  return a;
}

std::vector<float> dequant_row(const QuantMatrix& w, int64_t j) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  dequantize_blocks(w.type, w.data + j * w.row_bytes(), w.cols / quant_format(w.type).block_size,
                    row.data());
  return row;
}

// sum_k |a_ik| |w_jk| per output: the scale the tolerances are relative to.
std::vector<double> abs_dot(const Tensor& a, const QuantMatrix& w) {
  const int64_t m = a.dim(0), k = a.dim(1);
  std::vector<double> out(size_t(m * w.rows));
  for (int64_t j = 0; j < w.rows; ++j) {
    const std::vector<float> row = dequant_row(w, j);
    for (int64_t i = 0; i < m; ++i) {
      double s = 0;
      for (int64_t t = 0; t < k; ++t)
        s += std::fabs(double(a.data<float>()[i * k + t]) * row[size_t(t)]);
      out[size_t(i * w.rows + j)] = s;
    }
  }
  return out;
}

Tensor run(const Tensor& a, const QuantMatrix& w, bool reference) {
  Tensor c = Tensor::empty({a.dim(0), w.rows}, DType::f32);
  MatmulQuantOptions opt;
  opt.reference = reference;
  matmul_quant(a, w, c, opt);
  return c;
}

// max_i |got_i - want_i| / scale_i.
double max_rel(const Tensor& got, const Tensor& want, const std::vector<double>& scale) {
  double worst = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double e = std::fabs(double(got.data<float>()[i]) - want.data<float>()[i]);
    worst = std::max(worst, std::isfinite(e) ? e / std::max(scale[size_t(i)], 1e-30) : INFINITY);
  }
  return worst;
}

class QuantMatmul : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = test::fresh_seed();
    rng_.seed(seed_);
    trace_ = std::make_unique<::testing::ScopedTrace>(__FILE__, __LINE__,
                                                      "seed " + std::to_string(seed_));
  }
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  std::unique_ptr<::testing::ScopedTrace> trace_;
};

TEST_F(QuantMatmul, BlockDecoderMatchesElementDecoder) {
  for (QuantType t : kAll) {
    SCOPED_TRACE(quant_type_name(t));
    const QuantFormat& f = quant_format(t);
    const RandomMatrix m = random_matrix(t, 3, 4 * 256, rng_);
    const int64_t n_blocks = m.w.nbytes() / f.block_bytes;
    std::vector<float> blocks(size_t(n_blocks * f.block_size));
    dequantize_blocks(t, m.bytes.data(), n_blocks, blocks.data());
    int64_t mismatches = 0;
    for (int64_t b = 0; b < n_blocks; ++b)
      for (int i = 0; i < f.block_size; ++i) {
        const float e = quant_value(t, m.bytes.data() + b * f.block_bytes, i);
        mismatches += std::memcmp(&e, &blocks[size_t(b * f.block_size + i)], 4) != 0;
      }
    EXPECT_EQ(mismatches, 0);
  }
}

TEST_F(QuantMatmul, ReferenceMatchesFloat64) {
  // f64 dots of the element decoder's values: the reference's f32 accumulation over K = 512
  // stays within 1e-5 of sum |a||w| (measured ~1e-7).
  for (QuantType t : kAll) {
    SCOPED_TRACE(quant_type_name(t));
    const RandomMatrix m = random_matrix(t, 7, 512, rng_);
    const Tensor a = random_rows(3, 512, rng_);
    const Tensor c = run(a, m.w, true);
    Tensor want = Tensor::empty(c.shape(), DType::f32);
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 7; ++j) {
        double s = 0;
        for (int64_t k = 0; k < 512; ++k) {
          const int bs = quant_format(t).block_size;
          const uint8_t* blk =
              m.w.data + j * m.w.row_bytes() + (k / bs) * quant_format(t).block_bytes;
          s += double(a.data<float>()[i * 512 + k]) * quant_value(t, blk, int(k % bs));
        }
        want.data<float>()[i * 7 + j] = float(s);
      }
    EXPECT_LE(max_rel(c, want, abs_dot(a, m.w)), 1e-5);
  }
}

// The fast path differs from the reference by the rounding of a to 8 bits (per 32 values,
// or per 256 for the K-quants), an error that shrinks as 1 / sqrt(K) relative to sum|a||w|.
// Measured on Gaussian rows and random blocks, max over the outputs of |fast - ref| /
// sum|a||w|: 32-value types 2.2e-3 (K = 256) and 4.5-5.4e-4 (K = 4096); K-quants 2.8-3.6e-3
// and 7.1-8.2e-4. The bound is 0.1 / sqrt(K): 6.3e-3 and 1.6e-3.
double fast_tol(int64_t k) { return 0.1 / std::sqrt(double(k)); }

TEST_F(QuantMatmul, FastPathMatchesReference) {
  int checked = 0;
  for (QuantType t : kAll) {
    if (!quant_fast_path(t)) continue;
    for (int64_t k : {256, 4096}) {
      const int64_t n = k == 256 ? 37 : 13;
      const RandomMatrix m = random_matrix(t, n, k, rng_);
      double worst = 0;
      for (int64_t rows : {1, 2, 3, 7, 16, 64}) {
        SCOPED_TRACE(std::string(quant_type_name(t)) + " M=" + std::to_string(rows) +
                     " K=" + std::to_string(k));
        const Tensor a = random_rows(rows, k, rng_);
        const double e = max_rel(run(a, m.w, false), run(a, m.w, true), abs_dot(a, m.w));
        EXPECT_LE(e, fast_tol(k));
        worst = std::max(worst, e);
        ++checked;
      }
      std::printf("  %s K=%lld: max |fast - ref| / sum|a||w| = %.2e\n",
                  std::string(quant_type_name(t)).c_str(), (long long)k, worst);
    }
  }
  if (checked == 0) GTEST_SKIP() << "no AVX2 fast path on this CPU";
}

TEST_F(QuantMatmul, BiasAndBeta) {
  for (bool reference : {true, false}) {
    const RandomMatrix m = random_matrix(QuantType::q4_k, 9, 512, rng_);
    const Tensor a = random_rows(5, 512, rng_);
    Tensor bias = random_rows(1, 9, rng_).reshape({9});
    Tensor c0 = random_rows(5, 9, rng_);
    const Tensor plain = run(a, m.w, reference);
    Tensor c = Tensor::empty({5, 9}, DType::f32);
    c.copy_from(c0);
    MatmulQuantOptions opt;
    opt.bias = &bias;
    opt.beta = 0.5f;
    opt.reference = reference;
    matmul_quant(a, m.w, c, opt);
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 9; ++j) {
        const float want = plain.data<float>()[i * 9 + j] + bias.data<float>()[j] +
                           0.5f * c0.data<float>()[i * 9 + j];
        EXPECT_FLOAT_EQ(c.data<float>()[i * 9 + j], want) << i << "," << j;
      }
  }
}

// Row i of an M-row call equals the same row alone, bit for bit, and the thread count
// changes nothing: each output is one fixed reduction whatever tile (activation rows by
// weight rows) the kernel computes it in. M = 7, 11 and 64 cover full and partial row tiles;
// N = 29 full and partial weight-row tiles.
TEST_F(QuantMatmul, BatchInvariant) {
  const int threads = cpu_threads().size();
  for (QuantType t : kAll) {
    SCOPED_TRACE(quant_type_name(t));
    const RandomMatrix m = random_matrix(t, 29, 1024, rng_);
    for (int64_t rows : {7, 11, 64}) {
      SCOPED_TRACE("M=" + std::to_string(rows));
      const Tensor a = random_rows(rows, 1024, rng_);
      for (bool reference : {false, true}) {
        const Tensor all = run(a, m.w, reference);
        for (int64_t i = 0; i < rows; ++i) {
          const Tensor one = run(a.slice0(i, i + 1), m.w, reference);
          EXPECT_EQ(std::memcmp(one.raw(), all.data<float>() + i * 29, 29 * 4), 0) << "row " << i;
        }
        set_cpu_threads(threads == 1 ? 3 : 1);
        const Tensor other = run(a, m.w, reference);
        set_cpu_threads(threads);
        EXPECT_EQ(std::memcmp(other.raw(), all.raw(), all.nbytes()), 0) << "thread count";
      }
    }
  }
}

// q4_K packed eight rows to a group (the CPU's layout for q4_K, matmul_quant_layout): every
// row's blocks come back byte for byte, and the packed kernels' results equal the unpacked
// ones bit for bit at every M (their tiles of 1-4 activation rows), so a row alone equals
// itself in a batch; the reference reads the packed rows too.
TEST_F(QuantMatmul, PackedQ4kEqualsUnpacked) {
  if (!quant_fast_path(QuantType::q4_k)) GTEST_SKIP() << "no AVX2 fast path on this CPU";
  for (int64_t k : {256, 1024, 4096}) {
    const int64_t n = k == 4096 ? 24 : 136;
    const RandomMatrix m = random_matrix(QuantType::q4_k, n, k, rng_);
    const QuantMatrix p = matmul_quant_layout(m.w);
    ASSERT_TRUE(p.packed);
    EXPECT_EQ(p.nbytes(), n * k / 256 * 148);
    std::vector<uint8_t> scratch(size_t(p.block_row_bytes()));
    for (int64_t j = 0; j < n; ++j)
      ASSERT_EQ(std::memcmp(quant_row_blocks(p, j, scratch.data()),
                            quant_row_blocks(m.w, j, nullptr), size_t(m.w.block_row_bytes())),
                0)
          << "row " << j;
    for (int64_t rows : {1, 2, 3, 4, 5, 7, 16}) {
      SCOPED_TRACE("M=" + std::to_string(rows) + " K=" + std::to_string(k));
      const Tensor a = random_rows(rows, k, rng_);
      const Tensor packed = run(a, p, false);
      EXPECT_EQ(std::memcmp(packed.raw(), run(a, m.w, false).raw(), packed.nbytes()), 0);
      const Tensor ref = run(a, p, true);
      EXPECT_EQ(std::memcmp(ref.raw(), run(a, m.w, true).raw(), ref.nbytes()), 0);
      EXPECT_LE(max_rel(packed, ref, abs_dot(a, m.w)), fast_tol(k));
      for (int64_t i = 0; i < rows; ++i) {
        const Tensor one = run(a.slice0(i, i + 1), p, false);
        EXPECT_EQ(std::memcmp(one.raw(), packed.data<float>() + i * n, size_t(n) * 4), 0)
            << "row " << i;
      }
    }
  }
  // Whole groups slice (a stacked expert's rows); a cut through a group is an error.
  const RandomMatrix m = random_matrix(QuantType::q4_k, 32, 512, rng_);
  const QuantMatrix p = matmul_quant_layout(m.w);
  const Tensor a = random_rows(3, 512, rng_);
  const Tensor whole = run(a, p, false), part = run(a, quant_rows(p, 8, 16), false);
  for (int64_t i = 0; i < 3; ++i)
    EXPECT_EQ(std::memcmp(part.data<float>() + i * 16, whole.data<float>() + i * 32 + 8, 64), 0);
  EXPECT_THROW(quant_rows(p, 4, 8), Error);
  EXPECT_THROW(quant_matrix_to(p, Device::cuda), Error);
  // Other types and row counts stay as they are.
  EXPECT_FALSE(matmul_quant_layout(random_matrix(QuantType::q4_k, 12, 256, rng_).w).packed);
  EXPECT_FALSE(matmul_quant_layout(random_matrix(QuantType::q6_k, 16, 256, rng_).w).packed);
}

TEST_F(QuantMatmul, QuantizeQ8_0RoundTripsWithinHalfAStep) {
  // Gaussian rows with an all-zero block and a block of one value: per 32 values the scale is
  // max|x| / 127 as an f16, every value within half a step of its float, the max at +-127.
  const int64_t rows = 7, cols = 96;
  Tensor w = Tensor::empty({rows, cols}, DType::f32);
  std::normal_distribution<float> g(0.0f, 0.3f);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = g(rng_);
  for (int k = 0; k < 32; ++k) {
    w.data<float>()[k] = 0.0f;               // row 0, block 0
    w.data<float>()[cols + 32 + k] = -2.5f;  // row 1, block 1
  }
  const QuantMatrix q = quantize_q8_0(w);
  ASSERT_EQ(q.type, QuantType::q8_0);
  ASSERT_EQ(q.rows, rows);
  ASSERT_EQ(q.cols, cols);
  std::vector<float> back(static_cast<size_t>(cols), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_blocks(QuantType::q8_0, q.data + r * q.row_bytes(), cols / 32, back.data());
    for (int64_t b = 0; b < cols / 32; ++b) {
      const uint8_t* blk = q.data + r * q.row_bytes() + b * 34;
      float amax = 0;
      for (int k = 0; k < 32; ++k)
        amax = std::max(amax, std::fabs(w.data<float>()[r * cols + b * 32 + k]));
      const float d = quant_f16(blk);
      EXPECT_NEAR(d, amax / 127.0f, amax / 127.0f * 1e-3f + 1e-12f);
      for (int k = 0; k < 32; ++k) {
        const float x = w.data<float>()[r * cols + b * 32 + k];
        EXPECT_LE(std::fabs(back[size_t(b * 32 + k)] - x), 0.5f * d + amax * 1e-3f)
            << "row " << r << " value " << b * 32 + k;
      }
    }
  }
  EXPECT_EQ(quant_f16(q.data), 0.0f);  // the zero block
  const uint8_t* ones = q.data + q.row_bytes() + 34;
  for (int k = 0; k < 32; ++k) EXPECT_EQ(int8_t(ones[2 + k]), -127);
  // matmul_quant over it agrees with the f32 product within the 8-bit error.
  Tensor a = Tensor::empty({3, cols}, DType::f32);
  for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = g(rng_);
  Tensor c = Tensor::empty({3, rows}, DType::f32);
  matmul_quant(a, q, c);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < rows; ++j) {
      double want = 0, scale = 0;
      for (int64_t k = 0; k < cols; ++k) {
        want += double(a.data<float>()[i * cols + k]) * w.data<float>()[j * cols + k];
        scale += std::fabs(double(a.data<float>()[i * cols + k]) * w.data<float>()[j * cols + k]);
      }
      EXPECT_NEAR(c.data<float>()[i * rows + j], want, 2e-2 * scale + 1e-6);
    }
  expect_error([&] { quantize_q8_0(Tensor::empty({2, 40}, DType::f32)); }, {"multiple of 32"});
  expect_error([&] { quantize_q8_0(Tensor::empty({2, 32}, DType::f16)); }, {"f32"});
}

TEST_F(QuantMatmul, BadArguments) {
  const RandomMatrix m = random_matrix(QuantType::q4_k, 4, 512, rng_);
  const Tensor a = random_rows(2, 512, rng_);
  Tensor c = Tensor::empty({2, 4}, DType::f32);
  // K not a multiple of the block size.
  QuantMatrix odd = m.w;
  odd.cols = 500;
  Tensor a_odd = random_rows(2, 500, rng_);
  expect_error([&] { matmul_quant(a_odd, odd, c); }, {"[matmul_quant]", "multiple of the block"});
  expect_error(
      [&] {
        quant_matrix(QuantType::q4_k, 4, 500, m.bytes.data(), 1000, nullptr, Device::cpu, "x");
      },
      {"[x]", "multiple of the block size 256"});
  // Wrong byte count.
  expect_error(
      [&] {
        quant_matrix(QuantType::q4_k, 4, 512, m.bytes.data(), 1151, nullptr, Device::cpu,
                     "matmul_quant");
      },
      {"[matmul_quant]", "needs 1152 bytes, got 1151"});
  // A type with no kernel.
  QuantMatrix bad = m.w;
  bad.type = QuantType(42);
  expect_error([&] { matmul_quant(a, bad, c); }, {"[matmul_quant]", "not a quantized type"},
               ErrorKind::unsupported);
  // Shapes and dtypes.
  const Tensor a_short = random_rows(2, 256, rng_);
  expect_error([&] { matmul_quant(a_short, m.w, c); }, {"[matmul_quant]", "inner dimensions"});
  Tensor c_bad = Tensor::empty({2, 5}, DType::f32);
  expect_error([&] { matmul_quant(a, m.w, c_bad); }, {"[matmul_quant]", "c"});
  const Tensor a16 = a.cast(DType::f16);
  expect_error([&] { matmul_quant(a16, m.w, c); }, {"[matmul_quant]", "a"});
  QuantMatrix on_gpu = m.w;
  on_gpu.device = Device::cuda;
  expect_error([&] { matmul_quant(a, on_gpu, c); }, {"[matmul_quant]", "different devices"});
}

// By hand: ./test_ops --gtest_also_run_disabled_tests --gtest_filter='*Bandwidth*'
// GB/s of weight streamed at M = 1 for 4096 x 4096: hot (one matrix, cache resident) and
// cold (a rotation of matrices larger than the last-level cache the machine reports).
TEST_F(QuantMatmul, DISABLED_Bandwidth) {
  for (int v = 0; v < 6; ++v) {
    // q4_K twice: as ggml stores it, then in the CPU's 8-row groups (matmul_quant_layout).
    const QuantType t = std::array{QuantType::q4_k, QuantType::q4_k, QuantType::q8_0,
                                   QuantType::q4_0, QuantType::q6_k, QuantType::q3_k}[size_t(v)];
    const int64_t n = 4096, k = 4096;
    RandomMatrix one = random_matrix(t, n, k, rng_);
    const QuantMatrix packed = matmul_quant_layout(one.w);
    if (v == 1) {
      one.bytes.assign(packed.data, packed.data + packed.nbytes());
      one.w = packed;
    }
    const int64_t bytes = one.w.nbytes();
    const int copies = int(std::max<int64_t>(2, (int64_t(1200) << 20) / bytes));
    std::vector<uint8_t> big(size_t(bytes * copies));
    for (int i = 0; i < copies; ++i)
      std::memcpy(big.data() + size_t(i) * size_t(bytes), one.bytes.data(), size_t(bytes));
    const Tensor a = random_rows(1, k, rng_);
    Tensor c = Tensor::empty({1, n}, DType::f32);
    auto time = [&](int n_mats, int reps, bool reference) {
      MatmulQuantOptions opt;
      opt.reference = reference;
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < reps; ++r)
        for (int i = 0; i < n_mats; ++i) {
          QuantMatrix w = one.w;
          w.data = big.data() + size_t(i) * size_t(bytes);
          matmul_quant(a, w, c, opt);
        }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return double(bytes) * n_mats * reps / s / 1e9;
    };
    // The machine's own streaming rate now (other work shares these cores): a plain sum of
    // the same bytes, split over the pool as the op splits N.
    auto read_rate = [&]() {
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<uint64_t> part(64);
      const int64_t words = int64_t(big.size() / 8);
      cpu_threads().parallel_for(64, 1, [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c) {
          uint64_t s = 0;
          const auto* p = reinterpret_cast<const uint64_t*>(big.data());
          for (int64_t i = c * words / 64; i < (c + 1) * words / 64; ++i) s += p[i];
          part[size_t(c)] = s;
        }
      });
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_NE(part[0], 1u);  // keeps the sums
      return double(big.size()) / s / 1e9;
    };
    time(1, 3, false);
    const double hot = time(1, 50, false), cold = time(copies, 2, false);
    const double ref = time(1, 2, true), base = read_rate();
    const int threads = cpu_threads().size();
    set_cpu_threads(1);
    const double hot1 = time(1, 20, false), cold1 = time(copies, 1, false);
    set_cpu_threads(threads);
    std::printf(
        "  %s 4096x4096 M=1: %d threads hot %.1f GB/s, cold (%d MB rotation) %.1f GB/s "
        "(plain read %.1f GB/s); 1 thread hot %.1f, cold %.1f; reference %.2f GB/s\n",
        (std::string(quant_type_name(t)) + (one.w.packed ? " x8" : "")).c_str(), threads, hot,
        int(bytes * copies >> 20), cold, base, hot1, cold1, ref);
  }
}

// By hand: ./test_ops --gtest_also_run_disabled_tests --gtest_filter='*Prefill*'
// Integer multiply-adds per second (GMAC/s) of the fast path on qwen3-0.6b's projection
// shapes at prefill (M = 256, weights cache resident per tile) and decode (M = 1).
TEST_F(QuantMatmul, DISABLED_PrefillThroughput) {
  struct Shape {
    int64_t n, k;
  };
  const Shape shapes[] = {{2048, 1024}, {3072, 1024}, {1024, 3072}};
  for (int v = 0; v < 5; ++v) {
    // q4_K as ggml stores it, then packed (matmul_quant_layout).
    const QuantType t = std::array{QuantType::q8_0, QuantType::q4_k, QuantType::q4_k,
                                   QuantType::q6_k, QuantType::q4_0}[size_t(v)];
    for (int64_t rows : {256, 1}) {
      double macs = 0, secs = 0;
      for (const Shape& s : shapes) {
        RandomMatrix m = random_matrix(t, s.n, s.k, rng_);
        if (v == 2) m.w = matmul_quant_layout(m.w);
        const Tensor a = random_rows(rows, s.k, rng_);
        Tensor c = Tensor::empty({rows, s.n}, DType::f32);
        matmul_quant(a, m.w, c);
        // The fastest of several calls: other work shares these cores.
        double best = INFINITY;
        for (int r = 0; r < (rows == 1 ? 100 : 10); ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          matmul_quant(a, m.w, c);
          best = std::min(
              best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        secs += best;
        macs += double(rows) * double(s.n) * double(s.k);
      }
      std::printf("  %s M=%lld: %.1f GMAC/s (%d threads)\n",
                  (std::string(quant_type_name(t)) + (v == 2 ? " x8" : "")).c_str(),
                  (long long)rows, macs / secs / 1e9, cpu_threads().size());
    }
  }
}

}  // namespace
}  // namespace parley
