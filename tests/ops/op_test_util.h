// Helpers for the op harness: the (device, dtype) parameters, fresh random inputs on the
// host with the exact values they hold, copies to and from the device under test, and an
// element-wise comparison that reports the worst mismatches.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/tensor.h"

namespace parley::test {

struct OpParam {
  Device device;
  DType dtype;
};

// Every device this build can run ([cpu] + [cuda] when a GPU is present) x f32, f16, bf16.
std::vector<OpParam> op_params();
std::string op_param_name(const ::testing::TestParamInfo<OpParam>& info);
// So gtest prints "cpu f32" rather than the parameter's bytes.
void PrintTo(const OpParam& p, std::ostream* os);

// Allowed error |got - want| <= abs + rel * |want|.
struct Tolerance {
  double abs, rel;
};
// The harness tolerances (CTranslate2's): f32 1e-5, f16 1e-2, bf16 4e-2, abs and rel.
Tolerance tolerance(DType dtype);
// For a sum of `terms` products: the absolute part grows like sqrt(terms).
Tolerance sum_tolerance(DType dtype, int64_t terms);

// A host tensor and the values it holds, widened to f32 (exactly: the reference sees
// what the op sees, after rounding to the dtype).
struct HostTensor {
  Tensor t;
  std::vector<float> v;
};

uint64_t fresh_seed();

// x: values in f32 order, stored as dtype (rounded); v holds the rounded values.
HostTensor host_tensor(const std::vector<float>& x, const Shape& shape, DType dtype);
// Copies any tensor to the host and widens a float tensor to f32.
std::vector<float> read_floats(const Tensor& t);
std::vector<int32_t> read_i32(const Tensor& t);

// Fails (once, listing the first mismatches) unless every element is within tol;
// NaN must meet NaN and an infinity the same infinity.
void expect_close(const std::vector<float>& got, const std::vector<double>& want, Tolerance tol,
                  const std::string& what);

// Fixture for tests parameterized over OpParam: a fresh seed per test, printed with every
// failure, and helpers that make tensors on the device under test.
class OpTest : public ::testing::TestWithParam<OpParam> {
 protected:
  void SetUp() override;

  Device device() const { return GetParam().device; }
  DType dtype() const { return GetParam().dtype; }

  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng_); }
  int64_t uniform_int(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  // Random values in [lo, hi) stored as `dt` (the test's dtype when omitted).
  HostTensor random(const Shape& shape, float lo = -1.0f, float hi = 1.0f);
  HostTensor random(const Shape& shape, DType dt, float lo = -1.0f, float hi = 1.0f);
  // A copy of a host tensor on the device under test.
  Tensor dev(const Tensor& host) const { return host.to(device()); }
  // An output on the device under test, filled with all-ones bytes (NaN in every float
  // dtype, -1 in integers) so an element the op forgets to write cannot pass.
  Tensor out(const Shape& shape, DType dt) const;
  Tensor out(const Shape& shape) const { return out(shape, dtype()); }

  Tolerance tol() const { return tolerance(dtype()); }

  uint64_t seed_ = 0;
  std::mt19937_64 rng_;

 private:
  std::unique_ptr<::testing::ScopedTrace> trace_;
};

// fn must throw parley::Error of `kind` whose message contains every one of `parts` (the ops'
// argument checks).
inline void expect_error(const std::function<void()>& fn, std::initializer_list<std::string> parts,
                         ErrorKind kind = ErrorKind::invalid_argument) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one containing " << *parts.begin();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message \"" << e.what() << "\" lacks \"" << p << "\"";
  }
}

}  // namespace parley::test
