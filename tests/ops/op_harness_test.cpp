// Op harness: every element-wise, normalization, softmax, layout, gather and selection op
// on every built device and float dtype, against plain double-precision loops written here
// (GEMM-shaped ops are in op_harness_gemm_test.cpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "engine/ops/norm.h"
#include "engine/ops/reduce.h"
#include "engine/ops/softmax.h"
#include "engine/ops/transpose.h"
#include "op_test_util.h"

namespace parley::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// ---------------------------------------------------------------------------- element-wise

class Elementwise : public OpTest {
 protected:
  // a op b for b of each broadcastable shape, out separate and in place.
  template <typename Op, typename Ref>
  void binary(const char* name, Op op, Ref ref) {
    const Shape a_shape{2, 3, 37};
    for (const Shape& b_shape : {Shape{2, 3, 37}, Shape{3, 37}, Shape{37}, Shape{}}) {
      SCOPED_TRACE(std::string(name) + " b " + b_shape.str());
      const HostTensor a = random(a_shape), b = random(b_shape);
      std::vector<double> want(a.v.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] = ref(a.v[i], b.v[i % b.v.size()]);
      const Tensor db = dev(b.t);
      Tensor o = out(a_shape);
      op(dev(a.t), db, o);
      expect_close(read_floats(o), want, tol(), name);
      Tensor inplace = dev(a.t);
      op(inplace, db, inplace);
      expect_close(read_floats(inplace), want, tol(), std::string(name) + " in place");
    }
  }

  // Two shapes: 645 elements, and 544 (a multiple of 8: CUDA's 16-byte vector path).
  template <typename Op, typename Ref>
  void unary(const char* name, Op op, Ref ref, float lo, float hi) {
    for (const Shape& shape : {Shape{5, 129}, Shape{4, 136}}) {
      SCOPED_TRACE(std::string(name) + " " + shape.str());
      const HostTensor x = random(shape, lo, hi);
      std::vector<double> want(x.v.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] = ref(double(x.v[i]));
      Tensor o = out(x.t.shape());
      op(dev(x.t), o);
      expect_close(read_floats(o), want, tol(), name);
      Tensor inplace = dev(x.t);
      op(inplace, inplace);
      expect_close(read_floats(inplace), want, tol(), std::string(name) + " in place");
    }
  }
};

TEST_P(Elementwise, AddBroadcast) {
  binary(
      "add", [](const Tensor& a, const Tensor& b, Tensor& o) { add(a, b, o); },
      [](double x, double y) { return x + y; });
}

TEST_P(Elementwise, MulBroadcast) {
  binary(
      "mul", [](const Tensor& a, const Tensor& b, Tensor& o) { mul(a, b, o); },
      [](double x, double y) { return x * y; });
}

TEST_P(Elementwise, Scale) {
  unary(
      "scale", [](const Tensor& x, Tensor& o) { scale(x, -1.75f, o); },
      [](double x) { return -1.75 * x; }, -3.0f, 3.0f);
}

TEST_P(Elementwise, Gelu) {
  unary(
      "gelu", [](const Tensor& x, Tensor& o) { gelu(x, o); },
      [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }, -5.0f, 5.0f);
}

TEST_P(Elementwise, Silu) {
  unary(
      "silu", [](const Tensor& x, Tensor& o) { silu(x, o); },
      [](double x) { return x / (1.0 + std::exp(-x)); }, -8.0f, 8.0f);
}

INSTANTIATE_TEST_SUITE_P(Ops, Elementwise, ::testing::ValuesIn(op_params()), op_param_name);

// ---------------------------------------------------------------------------- convert

class Convert : public OpTest {};

// The expected values come from the scalar conversions in dtype.h, which test_unit checks
// against known bit patterns.
TEST_P(Convert, RoundTripsThroughF32) {
  // Include values that need rounding in every 16-bit format, and specials.
  std::vector<float> x(300);
  for (float& f : x) f = uniform(-70000.0f, 70000.0f) * std::pow(2.0f, -float(uniform_int(0, 30)));
  x[0] = 0.0f;
  x[1] = -0.0f;
  x[2] = kInf;
  x[3] = -kInf;
  x[4] = kNaN;
  x[5] = 1.0f + 1.0f / 4096.0f;  // a tie for f16 (halfway between two f16 values)
  x[6] = 5.9604645e-8f;          // the smallest f16 subnormal
  const HostTensor src = host_tensor(x, {3, 100}, DType::f32);
  Tensor narrow = out({3, 100});
  convert(dev(src.t), narrow);
  std::vector<double> want(x.size());
  dispatch_float(dtype(), "test", [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < x.size(); ++i) want[i] = to_f32(from_f32<T>(x[i]));
  });
  expect_close(read_floats(narrow), want, {0.0, 0.0}, "convert f32 -> dtype");
  Tensor wide = out({3, 100}, DType::f32);
  convert(narrow, wide);
  expect_close(read_floats(wide), want, {0.0, 0.0}, "convert dtype -> f32");
}

TEST_P(Convert, BetweenSixteenBitFormats) {
  const HostTensor x = random({4, 33}, -4.0f, 4.0f);
  for (DType to : {DType::f16, DType::bf16, DType::f32}) {
    SCOPED_TRACE(std::string("to ") + std::string(dtype_name(to)));
    Tensor o = out({4, 33}, to);
    convert(dev(x.t), o);
    std::vector<double> want(x.v.size());
    dispatch_float(to, "test", [&](auto tag) {
      using T = decltype(tag);
      for (size_t i = 0; i < want.size(); ++i) want[i] = to_f32(from_f32<T>(x.v[i]));
    });
    expect_close(read_floats(o), want, {0.0, 0.0}, "convert");
  }
}

TEST_P(Convert, IntegersCopy) {
  Tensor ints = Tensor::empty({17}, DType::i32);
  for (int i = 0; i < 17; ++i) ints.data<int32_t>()[i] = int32_t(uniform_int(-100000, 100000));
  Tensor o = out({17}, DType::i32);
  convert(dev(ints), o);
  const std::vector<int32_t> got = read_i32(o);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), ints.data<int32_t>()));
}

INSTANTIATE_TEST_SUITE_P(Ops, Convert, ::testing::ValuesIn(op_params()), op_param_name);

// ---------------------------------------------------------------------------- norms

class Norm : public OpTest {
 protected:
  // A large eps in some runs, so that dropping it would show. rows 0: x is [3, 5, D].
  void run(bool rms, int64_t d, DType param_dt, float eps, int64_t rows = 0) {
    SCOPED_TRACE(std::string(rms ? "rms_norm" : "layer_norm") + " D " + std::to_string(d) +
                 " params " + std::string(dtype_name(param_dt)) + " eps " + std::to_string(eps) +
                 " rows " + std::to_string(rows));
    const Shape shape = rows ? Shape{rows, d} : Shape{3, 5, d};
    const HostTensor x = random(shape, -1.0f, 3.0f);  // a mean away from zero
    const HostTensor gamma = random({d}, param_dt, 0.5f, 1.5f);
    const HostTensor beta = random({d}, param_dt, -0.5f, 0.5f);
    Tensor o = out(x.t.shape());
    const Tensor dgamma = dev(gamma.t), dbeta = dev(beta.t);
    if (rms)
      rms_norm(dev(x.t), dgamma, eps, o);
    else
      layer_norm(dev(x.t), dgamma, dbeta, eps, o);
    std::vector<double> want(x.v.size());
    for (size_t r = 0; r < x.v.size() / size_t(d); ++r) {
      const float* row = &x.v[r * size_t(d)];
      double mean = 0.0, var = 0.0, ms = 0.0;
      for (int64_t i = 0; i < d; ++i) mean += row[i];
      mean /= double(d);
      for (int64_t i = 0; i < d; ++i) {
        var += (row[i] - mean) * (row[i] - mean);
        ms += double(row[i]) * row[i];
      }
      var /= double(d);
      ms /= double(d);
      for (int64_t i = 0; i < d; ++i) {
        want[r * size_t(d) + size_t(i)] =
            rms ? row[i] / std::sqrt(ms + eps) * gamma.v[size_t(i)]
                : (row[i] - mean) / std::sqrt(var + eps) * gamma.v[size_t(i)] + beta.v[size_t(i)];
      }
    }
    expect_close(read_floats(o), want, tol(), rms ? "rms_norm" : "layer_norm");
  }
};

TEST_P(Norm, LayerNorm) {
  run(false, 384, dtype(), 1e-5f);
  run(false, 37, DType::f32, 0.25f);
}

TEST_P(Norm, RmsNorm) {
  run(true, 384, dtype(), 1e-5f);
  run(true, 37, DType::f32, 0.25f);
}

// A decoder step's few rows: CUDA keeps the row in registers, in 16-byte packs (1280 and
// 384 in every dtype), one element at a time (odd D), or takes the generic kernel (D above
// the register path's 8192).
TEST_P(Norm, DecoderRows) {
  for (int64_t rows = 1; rows <= 5; ++rows)
    for (int64_t d : {1280, 384, 1001, 8200}) {
      run(false, d, dtype(), 1e-5f, rows);
      run(true, d, dtype(), 1e-5f, rows);
    }
  run(false, 1280, DType::f32, 0.25f, 2);
  run(false, 1001, DType::f32, 0.25f, 3);
}

// Many rows (the encoder's 1500, a batched step's): on CUDA a block per row with the row in
// registers in 16-byte packs and gamma and beta read after the statistics (they are held
// from before the wait only up to 8 rows); D from one pack (8) to 2056.
TEST_P(Norm, ManyRows) {
  for (const auto& [rows, d] : std::vector<std::pair<int64_t, int64_t>>{
           {1501, 1280}, {9, 2048}, {33, 1024}, {10, 8}, {13, 2056}, {12, 1000}}) {
    run(false, d, dtype(), 1e-5f, rows);
    run(true, d, dtype(), 1e-5f, rows);
  }
  run(false, 1280, DType::f32, 0.25f, 40);
  run(true, 2048, DType::f32, 0.25f, 17);
}

INSTANTIATE_TEST_SUITE_P(Ops, Norm, ::testing::ValuesIn(op_params()), op_param_name);

// ---------------------------------------------------------------------------- softmax

class Softmax : public OpTest {
 protected:
  void run(bool log) {
    SCOPED_TRACE(log ? "log_softmax" : "softmax");
    const int64_t rows = 12, n = 129;
    std::vector<float> x(size_t(rows * n));
    for (float& f : x) f = uniform(-8.0f, 8.0f);
    for (int64_t r = 0; r < rows; ++r)  // some -inf (a masked logit) in every row ...
      for (int i = 0; i < 10; ++i) x[size_t(r * n + uniform_int(1, n - 1))] = -kInf;
    for (int64_t i = 0; i < n; ++i) x[size_t(5 * n + i)] = -kInf;  // ... and one row of them
    const HostTensor h = host_tensor(x, {3, 4, n}, dtype());
    Tensor o = out(h.t.shape());
    if (log)
      log_softmax(dev(h.t), o);
    else
      softmax(dev(h.t), o);
    std::vector<double> want(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = &h.v[size_t(r * n)];
      double mx = -INFINITY, sum = 0.0;
      for (int64_t i = 0; i < n; ++i) mx = std::max(mx, double(row[i]));
      for (int64_t i = 0; i < n; ++i) sum += std::exp(row[i] - mx);
      for (int64_t i = 0; i < n; ++i) {
        double& w = want[size_t(r * n + i)];
        if (mx == -INFINITY)
          w = NAN;  // PyTorch: a row of -inf gives NaN
        else
          w = log ? row[i] - mx - std::log(sum) : std::exp(row[i] - mx) / sum;
      }
    }
    expect_close(read_floats(o), want, tol(), log ? "log_softmax" : "softmax");
  }
};

TEST_P(Softmax, Softmax) { run(false); }
TEST_P(Softmax, LogSoftmax) { run(true); }

INSTANTIATE_TEST_SUITE_P(Ops, Softmax, ::testing::ValuesIn(op_params()), op_param_name);

// ---------------------------------------------------------------------------- permute

class Permute : public OpTest {
 protected:
  // Compares permute(x) with an index walk in double; any dtype (floats carry the values,
  // integers carry their flat index).
  void run(const Shape& shape, const std::vector<int>& perm, DType dt) {
    std::string p;
    for (int i : perm) p += std::to_string(i) + " ";
    SCOPED_TRACE(std::string(dtype_name(dt)) + shape.str() + " perm " + p);
    const int n = shape.ndim();
    Tensor x = Tensor::empty(shape, dt);
    std::vector<double> vals(size_t(shape.numel()));
    for (size_t i = 0; i < vals.size(); ++i) {
      if (dt == DType::i32) {
        x.data<int32_t>()[i] = int32_t(i) * 7 - 1000;
        vals[i] = double(x.data<int32_t>()[i]);
      } else if (dt == DType::i8) {
        x.data<int8_t>()[i] = int8_t(int(i % 255) - 127);
        vals[i] = double(x.data<int8_t>()[i]);
      }
    }
    if (is_float(dt)) {
      const HostTensor h = random(shape, dt);
      x = h.t;
      vals = widen(h.v);
    }
    const Shape oshape = permuted_shape(shape, perm);
    Tensor o = out(oshape, dt);
    permute(dev(x), perm, o);
    // want[out index] = x[in index], in index[perm[i]] = out index[i].
    std::vector<double> want(vals.size());
    std::vector<int64_t> idx(size_t(n), 0);
    for (size_t flat = 0; flat < want.size(); ++flat) {
      int64_t rest = int64_t(flat), in = 0;
      for (int i = n - 1; i >= 0; --i) {
        idx[size_t(i)] = rest % oshape[i];
        rest /= oshape[i];
      }
      for (int j = 0; j < n; ++j) {
        int64_t coord = 0;
        for (int i = 0; i < n; ++i)
          if (perm[size_t(i)] == j) coord = idx[size_t(i)];
        in = in * shape[j] + coord;
      }
      want[flat] = vals[size_t(in)];
    }
    std::vector<float> got;
    const Tensor host = o.to(Device::cpu);
    if (dt == DType::i32) {
      for (int64_t i = 0; i < host.numel(); ++i) got.push_back(float(host.data<int32_t>()[i]));
    } else if (dt == DType::i8) {
      for (int64_t i = 0; i < host.numel(); ++i) got.push_back(float(host.data<int8_t>()[i]));
    } else {
      got = read_floats(host);
    }
    expect_close(got, want, {0.0, 0.0}, "permute");
  }
};

TEST_P(Permute, ThreeD) {
  for (const std::vector<int>& perm :
       {std::vector<int>{2, 0, 1}, {1, 0, 2}, {0, 2, 1}, {2, 1, 0}, {0, 1, 2}})
    run({3, 4, 5}, perm, dtype());
}

TEST_P(Permute, FourD) {
  // [B, T, H, D] -> [B, H, T, D] is the attention head split.
  for (const std::vector<int>& perm : {std::vector<int>{0, 2, 1, 3}, {3, 1, 0, 2}, {1, 2, 3, 0}})
    run({2, 3, 4, 5}, perm, dtype());
}

TEST_P(Permute, IntegerDtypes) {
  run({2, 3, 4, 5}, {0, 2, 1, 3}, DType::i32);
  run({3, 4, 5}, {2, 0, 1}, DType::i8);
}

TEST_P(Permute, TransposeSwapsTwoDims) {
  const HostTensor x = random({2, 3, 4, 5});
  Tensor o = out({2, 5, 4, 3});
  transpose(dev(x.t), 1, -1, o);
  Tensor via_permute = out({2, 5, 4, 3});
  permute(dev(x.t), {0, 3, 2, 1}, via_permute);
  expect_close(read_floats(o), widen(read_floats(via_permute)), {0.0, 0.0}, "transpose");
  // And one value checked by hand: x[1, 2, 3, 4] lands at o[1, 4, 3, 2].
  EXPECT_EQ(read_floats(o)[size_t(((1 * 5 + 4) * 4 + 3) * 3 + 2)],
            x.v[size_t(((1 * 3 + 2) * 4 + 3) * 5 + 4)]);
}

INSTANTIATE_TEST_SUITE_P(Ops, Permute, ::testing::ValuesIn(op_params()), op_param_name);

// ---------------------------------------------------------------------------- embedding

class Embedding : public OpTest {};

TEST_P(Embedding, Gathers) {
  const int64_t vocab = 50, d = 24;
  const HostTensor table = random({vocab, d});
  Tensor ids = Tensor::empty({3, 5}, DType::i32);
  int32_t* p = ids.data<int32_t>();
  for (int i = 0; i < 15; ++i) p[i] = int32_t(uniform_int(0, vocab - 1));
  p[0] = 0;
  p[14] = int32_t(vocab - 1);
  std::vector<double> want;
  for (int i = 0; i < 15; ++i)
    for (int64_t c = 0; c < d; ++c) want.push_back(table.v[size_t(p[i] * d + c)]);
  const Tensor dtable = dev(table.t), dids = dev(ids);
  Tensor nested = out({3, 5, d});
  embedding(dtable, dids, nested);
  expect_close(read_floats(nested), want, {0.0, 0.0}, "embedding [3, 5, D]");
  Tensor flat = out({15, d});
  embedding(dtable, dids, flat);
  expect_close(read_floats(flat), want, {0.0, 0.0}, "embedding [15, D]");
}

// With `add`: a row per id ([N, D], as a prompt's positions) or one row for all ([D], a
// step's position), summed in f32 and rounded once to the dtype.
TEST_P(Embedding, AddsRows) {
  const int64_t vocab = 40, d = 1280, n = 5;
  const HostTensor table = random({vocab, d});
  Tensor ids = Tensor::empty({n}, DType::i32);
  for (int64_t i = 0; i < n; ++i) ids.data<int32_t>()[i] = int32_t(uniform_int(0, vocab - 1));
  const Tensor dtable = dev(table.t), dids = dev(ids);
  for (const Shape& add_shape : {Shape{n, d}, Shape{d}}) {
    SCOPED_TRACE("add " + add_shape.str());
    const HostTensor plus = random(add_shape);
    std::vector<float> sum;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < d; ++c)
        sum.push_back(table.v[size_t(ids.data<int32_t>()[i] * d + c)] +
                      plus.v[size_t((add_shape.ndim() == 2 ? i * d : 0) + c)]);
    const std::vector<float> rounded = host_tensor(sum, {n, d}, dtype()).v;
    const Tensor dplus = dev(plus.t);
    Tensor o = out({n, d});
    embedding(dtable, dids, o, &dplus);
    expect_close(read_floats(o), std::vector<double>(rounded.begin(), rounded.end()), {0.0, 0.0},
                 "embedding + add");
  }
  Tensor o = out({n, d});
  const Tensor wrong = dev(random({n - 1, d}).t);
  expect_error([&] { embedding(dtable, dids, o, &wrong); }, {"[embedding]", "add"});
  expect_error([&] { embedding(dtable, dids, o, &o); }, {"[embedding]", "add must not share"});
}

TEST_P(Embedding, OutOfRangeIdIsAnError) {
  if (device() != Device::cpu) GTEST_SKIP() << "the range check is documented for CPU ids";
  const HostTensor table = random({10, 4});
  for (int32_t bad : {10, -1}) {
    Tensor ids = Tensor::empty({3}, DType::i32);
    ids.data<int32_t>()[0] = 1;
    ids.data<int32_t>()[1] = bad;
    ids.data<int32_t>()[2] = 2;
    Tensor o = out({3, 4});
    try {
      embedding(table.t, ids, o);
      ADD_FAILURE() << "id " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("[embedding]"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos) << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, Embedding, ::testing::ValuesIn(op_params()), op_param_name);

// ---------------------------------------------------------------------------- argmax, topk

// The documented order: NaN first, then larger values, ties by the lower index.
bool ranks_before(float a, int32_t ia, float b, int32_t ib) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && (!std::isnan(b) || ia < ib);
  return a != b ? a > b : ia < ib;
}

class Select : public OpTest {
 protected:
  // Rows of coarse values (many ties), one row with the maximum twice, one with NaNs.
  HostTensor tied_rows(int64_t rows, int64_t v) {
    std::vector<float> x(size_t(rows * v));
    for (float& f : x) f = float(uniform_int(-8, 8)) * 0.25f;
    x[size_t(0 * v + 3)] = 9.0f;
    x[size_t(0 * v + v - 2)] = 9.0f;
    x[size_t(1 * v + 7)] = kNaN;
    x[size_t(1 * v + 2)] = kNaN;
    return host_tensor(x, {rows, v}, dtype());
  }
};

TEST_P(Select, Argmax) {
  const int64_t rows = 6, v = 1000;
  const HostTensor x = tied_rows(rows, v);
  Tensor o = out({rows}, DType::i32);
  argmax(dev(x.t), o);
  const std::vector<int32_t> got = read_i32(o);
  for (int64_t r = 0; r < rows; ++r) {
    int32_t best = 0;
    for (int32_t i = 1; i < v; ++i)
      if (ranks_before(x.v[size_t(r * v + i)], i, x.v[size_t(r * v + best)], best)) best = i;
    EXPECT_EQ(got[size_t(r)], best) << "row " << r;
  }
  EXPECT_EQ(got[0], 3);  // the first of two equal maxima
  EXPECT_EQ(got[1], 2);  // the first NaN
}

TEST_P(Select, TopK) {
  const int64_t rows = 5, v = 300;
  const HostTensor x = tied_rows(rows, v);
  for (int k : {1, 7, 300}) {
    SCOPED_TRACE("k " + std::to_string(k));
    Tensor values = out({rows, k}), indices = out({rows, k}, DType::i32);
    topk(dev(x.t), k, values, indices);
    const std::vector<float> got_v = read_floats(values);
    const std::vector<int32_t> got_i = read_i32(indices);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int32_t> order(static_cast<size_t>(v));
      std::iota(order.begin(), order.end(), 0);
      const float* row = &x.v[size_t(r * v)];
      std::sort(order.begin(), order.end(),
                [&](int32_t a, int32_t b) { return ranks_before(row[a], a, row[b], b); });
      for (int j = 0; j < k; ++j) {
        const size_t o = size_t(r * k + j);
        EXPECT_EQ(got_i[o], order[size_t(j)]) << "row " << r << " rank " << j;
        const float want = row[order[size_t(j)]];
        if (std::isnan(want))
          EXPECT_TRUE(std::isnan(got_v[o])) << "row " << r << " rank " << j;
        else
          EXPECT_EQ(got_v[o], want) << "row " << r << " rank " << j;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, Select, ::testing::ValuesIn(op_params()), op_param_name);

}  // namespace
}  // namespace parley::test
