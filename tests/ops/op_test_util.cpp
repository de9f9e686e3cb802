#include "op_test_util.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "engine/ops/elementwise.h"

namespace parley::test {

std::vector<OpParam> op_params() {
  std::vector<Device> devices{Device::cpu};
  if (cuda_available()) devices.push_back(Device::cuda);
  std::vector<OpParam> params;
  for (Device d : devices)
    for (DType t : {DType::f32, DType::f16, DType::bf16}) params.push_back({d, t});
  return params;
}

std::string op_param_name(const ::testing::TestParamInfo<OpParam>& info) {
  return std::string(device_name(info.param.device)) + "_" +
         std::string(dtype_name(info.param.dtype));
}

void PrintTo(const OpParam& p, std::ostream* os) {
  *os << device_name(p.device) << " " << dtype_name(p.dtype);
}

Tolerance tolerance(DType dtype) {
  switch (dtype) {
    case DType::f16: return {1e-2, 1e-2};
    case DType::bf16: return {4e-2, 4e-2};
    default: return {1e-5, 1e-5};
  }
}

Tolerance sum_tolerance(DType dtype, int64_t terms) {
  Tolerance t = tolerance(dtype);
  t.abs *= std::sqrt(double(std::max<int64_t>(terms, 1)));
  return t;
}

uint64_t fresh_seed() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ uint64_t(rd());
}

HostTensor host_tensor(const std::vector<float>& x, const Shape& shape, DType dtype) {
  HostTensor h{Tensor::empty(shape, dtype), {}};
  EXPECT_EQ(int64_t(x.size()), shape.numel());
  dispatch_float(dtype, "test", [&](auto tag) {
    using T = decltype(tag);
    T* p = h.t.data<T>();
    for (size_t i = 0; i < x.size(); ++i) p[i] = from_f32<T>(x[i]);
  });
  h.v = read_floats(h.t);
  return h;
}

std::vector<float> read_floats(const Tensor& t) {
  const Tensor host = t.to(Device::cpu);
  std::vector<float> v(size_t(host.numel()));
  dispatch_float(host.dtype(), "test", [&](auto tag) {
    using T = decltype(tag);
    const T* p = host.data<T>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = to_f32(p[i]);
  });
  return v;
}

std::vector<int32_t> read_i32(const Tensor& t) {
  const Tensor host = t.to(Device::cpu);
  EXPECT_EQ(host.dtype(), DType::i32);
  const int32_t* p = host.data<int32_t>();
  return std::vector<int32_t>(p, p + host.numel());
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, Tolerance tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  double worst = 0.0;
  std::ostringstream first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    bool ok;
    if (std::isnan(w))
      ok = std::isnan(g);
    else if (std::isinf(w))
      ok = g == w;
    else
      ok = std::isfinite(g) && std::abs(g - w) <= tol.abs + tol.rel * std::abs(w);
    if (std::isfinite(g) && std::isfinite(w)) worst = std::max(worst, std::abs(g - w));
    if (!ok && bad++ < 5) first << "\n  [" << i << "] got " << g << ", want " << w;
  }
  if (bad)
    ADD_FAILURE() << what << ": " << bad << " of " << got.size()
                  << " elements outside tolerance (abs " << tol.abs << ", rel " << tol.rel
                  << "); max |diff| among finite " << worst << first.str();
}

void OpTest::SetUp() {
  seed_ = fresh_seed();
  rng_.seed(seed_);
  trace_ = std::make_unique<::testing::ScopedTrace>(__FILE__, __LINE__,
                                                    "seed " + std::to_string(seed_) + " on " +
                                                        std::string(device_name(device())) + " " +
                                                        std::string(dtype_name(dtype())));
}

HostTensor OpTest::random(const Shape& shape, float lo, float hi) {
  return random(shape, dtype(), lo, hi);
}

HostTensor OpTest::random(const Shape& shape, DType dt, float lo, float hi) {
  std::vector<float> x(size_t(shape.numel()));
  for (float& f : x) f = uniform(lo, hi);
  return host_tensor(x, shape, dt);
}

Tensor OpTest::out(const Shape& shape, DType dt) const {
  Tensor host = Tensor::empty(shape, dt);
  if (host.nbytes()) std::memset(host.raw(), 0xff, host.nbytes());
  return host.to(device());
}

}  // namespace parley::test
