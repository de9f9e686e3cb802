// Tensor and Shape: construction, reshape (with -1), slice0, views keeping their owner
// alive, copy_from, cast, and the errors each one raises.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "engine/alloc_stats.h"
#include "engine/tensor.h"

namespace parley {
namespace {

// fn must throw parley::Error of `kind` whose message contains `part`.
template <typename Fn>
void expect_error(Fn fn, const std::string& part, ErrorKind kind = ErrorKind::invalid_argument) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one containing " << part;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

Tensor iota_f32(const Shape& s) {
  Tensor t = Tensor::empty(s, DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(i);
  return t;
}

TEST(Shape, Basics) {
  const Shape s{2, 3, 4};
  EXPECT_EQ(s.ndim(), 3);
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s[-1], 4);
  EXPECT_EQ(s.str(), "[2, 3, 4]");
  EXPECT_EQ(Shape{}.numel(), 1);
  EXPECT_EQ(Shape{}.str(), "[]");
  EXPECT_EQ((Shape{2, 0, 4}.numel()), 0);
  EXPECT_NE(s, (Shape{2, 3}));
  EXPECT_EQ(s, (Shape{2, 3, 4}));
}

TEST(Shape, Errors) {
  expect_error([] { Shape s{2, -3}; }, "negative dimension -3");
  expect_error([] { Shape s{1, 2, 3, 4, 5, 6, 7}; }, "more than 6 dimensions");
  // -1 exists for reshape only.
  expect_error([] { Tensor::empty({2, -1}, DType::f32); }, "[2, -1] has a -1 dimension");
}

TEST(Tensor, EmptyZerosAndDescribe) {
  Tensor z = Tensor::zeros({2, 3}, DType::bf16);
  EXPECT_EQ(z.describe(), "bf16[2, 3] cpu");
  EXPECT_EQ(z.nbytes(), 12u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(z.data<uint16_t>()[i], 0);
  EXPECT_TRUE(z.defined());
  EXPECT_FALSE(Tensor::view(nullptr, {2}, DType::f32, Device::cpu, nullptr).defined());
  EXPECT_TRUE(Tensor::empty({0, 5}, DType::f32).defined());
}

TEST(Tensor, HugeShapeIsResourceExhausted) {
  expect_error(
      [] {
        Tensor::empty({int64_t(1) << 30, int64_t(1) << 30}, DType::f32);
      },
      "larger than 1 TiB", ErrorKind::resource_exhausted);
}

TEST(Tensor, ReshapeSharesMemoryAndInfers) {
  Tensor t = iota_f32({2, 3, 4});
  Tensor r = t.reshape({6, -1});
  EXPECT_EQ(r.shape(), (Shape{6, 4}));
  EXPECT_EQ(r.raw(), t.raw());
  EXPECT_EQ(t.reshape({-1}).shape(), (Shape{24}));
  EXPECT_EQ(t.reshape({2, -1, 2}).shape(), (Shape{2, 6, 2}));
  r.data<float>()[5] = -1.0f;
  EXPECT_EQ(t.data<float>()[5], -1.0f);
}

TEST(Tensor, ReshapeErrors) {
  Tensor t = iota_f32({2, 3, 4});
  expect_error([&] { t.reshape({5, 5}); }, "cannot reshape [2, 3, 4] to [5, 5]");
  expect_error([&] { t.reshape({5, -1}); }, "cannot reshape [2, 3, 4] to [5, -1]");
  expect_error([&] { t.reshape({-1, -1}); }, "two -1 dimensions");
}

TEST(Tensor, Slice0) {
  Tensor t = iota_f32({4, 3});
  Tensor s = t.slice0(1, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(s.data<float>()[0], 3.0f);
  EXPECT_EQ(s.data<float>()[5], 8.0f);
  s.data<float>()[0] = 100.0f;  // writes go to the parent's memory
  EXPECT_EQ(t.data<float>()[3], 100.0f);
  EXPECT_EQ(t.slice0(4, 4).numel(), 0);
  expect_error([&] { t.slice0(3, 5); }, "slice [3, 5) of [4, 3]");
  expect_error([&] { t.slice0(2, 1); }, "slice [2, 1)");
  expect_error([&] { t.slice0(-1, 1); }, "slice [-1, 1)");
}

TEST(Tensor, ViewKeepsOwnerAlive) {
  bool freed = false;
  Tensor v;
  {
    std::shared_ptr<float> owner(new float[8]{0, 1, 2, 3, 4, 5, 6, 7}, [&freed](float* p) {
      freed = true;
      delete[] p;
    });
    v = Tensor::view(owner.get() + 2, {2, 2}, DType::f32, Device::cpu, owner);
  }
  EXPECT_FALSE(freed);  // the view holds the last reference
  EXPECT_EQ(v.data<float>()[3], 5.0f);
  Tensor s = v.slice0(1, 2);  // a slice of the view keeps it too
  v = Tensor();
  EXPECT_FALSE(freed);
  EXPECT_EQ(s.data<float>()[0], 4.0f);
  s = Tensor();
  EXPECT_TRUE(freed);
}

TEST(Tensor, SliceOutlivesParent) {
  const int64_t live_before = alloc_stats().host_bytes_live;
  Tensor s;
  {
    Tensor t = iota_f32({4, 256});
    s = t.slice0(2, 3);
  }
  EXPECT_EQ(s.data<float>()[0], 512.0f);
  EXPECT_EQ(alloc_stats().host_bytes_live, live_before + 4 * 256 * 4);
  s = Tensor();
  EXPECT_EQ(alloc_stats().host_bytes_live, live_before);
}

TEST(Tensor, CopyFrom) {
  Tensor src = iota_f32({3, 5});
  Tensor dst = Tensor::zeros({3, 5}, DType::f32);
  dst.copy_from(src);
  EXPECT_EQ(std::memcmp(dst.raw(), src.raw(), src.nbytes()), 0);
  EXPECT_NE(dst.raw(), src.raw());
  Tensor copy = src.to(Device::cpu);  // a copy, not the same memory
  EXPECT_NE(copy.raw(), src.raw());
  EXPECT_EQ(copy.data<float>()[14], 14.0f);
  Tensor wrong_shape = Tensor::zeros({5, 3}, DType::f32);
  expect_error([&] { wrong_shape.copy_from(src); }, "copy from f32[3, 5] cpu into f32[5, 3] cpu");
  Tensor wrong_dtype = Tensor::zeros({3, 5}, DType::f16);
  expect_error([&] { wrong_dtype.copy_from(src); }, "into f16[3, 5]");
}

TEST(Tensor, Cast) {
  Tensor t = Tensor::empty({3}, DType::f32);
  t.data<float>()[0] = 1.0f;
  t.data<float>()[1] = 1.0f + 1.0f / 512;  // not representable in bf16: a tie, rounds down
  t.data<float>()[2] = -65504.0f;
  Tensor h = t.cast(DType::bf16);
  EXPECT_EQ(h.dtype(), DType::bf16);
  EXPECT_EQ(h.data<uint16_t>()[0], 0x3f80);
  EXPECT_EQ(h.data<uint16_t>()[1], 0x3f80);
  Tensor back = h.cast(DType::f32);
  EXPECT_EQ(back.data<float>()[1], 1.0f);
  EXPECT_EQ(t.cast(DType::f16).data<uint16_t>()[2], 0xfbff);
}

TEST(Tensor, CudaWithoutCudaIsAnError) {
  if (cuda_available()) GTEST_SKIP() << "this build has a GPU";
  Tensor t = iota_f32({2});
  try {
    (void)t.to(Device::cuda);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unsupported) << e.what();
  }
}

}  // namespace
}  // namespace parley
