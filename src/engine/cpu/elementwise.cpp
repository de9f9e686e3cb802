// CPU element-wise ops: one flat loop per dtype, split over cpu_threads(); math in f32.
#include "engine/ops/elementwise.h"

#include <cmath>
#include <cstring>

#include "engine/cpu/cpu_common.h"

namespace parley::cpu {

namespace {

template <typename T, typename F>
void map_unary(const Tensor& x, Tensor& out, F f) {
  const T* px = x.data<T>();
  T* po = out.data<T>();
  cpu_threads().parallel_for(x.numel(), kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) po[i] = from_f32<T>(f(to_f32(px[i])));
  });
}

// b repeats every b.numel() elements of a (b is a's trailing dims).
template <typename T, typename F>
void map_binary(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* po = out.data<T>();
  const int64_t nb = b.numel();
  cpu_threads().parallel_for(a.numel(), kElementGrain, [&](int64_t begin, int64_t end) {
    int64_t j = begin % nb;
    for (int64_t i = begin; i < end; ++i) {
      po[i] = from_f32<T>(f(to_f32(pa[i]), to_f32(pb[j])));
      if (++j == nb) j = 0;
    }
  });
}

}  // namespace

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  dispatch_float(a.dtype(), op == BinaryOp::add ? "add" : "mul", [&](auto tag) {
    using T = decltype(tag);
    if (op == BinaryOp::add)
      map_binary<T>(a, b, out, [](float x, float y) { return x + y; });
    else
      map_binary<T>(a, b, out, [](float x, float y) { return x * y; });
  });
}

void scale(const Tensor& a, float s, Tensor& out) {
  dispatch_float(a.dtype(), "scale", [&](auto tag) {
    map_unary<decltype(tag)>(a, out, [s](float x) { return x * s; });
  });
}

void unary(UnaryOp op, const Tensor& x, Tensor& out) {
  dispatch_float(x.dtype(), op == UnaryOp::gelu ? "gelu" : "silu", [&](auto tag) {
    using T = decltype(tag);
    if (op == UnaryOp::gelu) {
      constexpr float kInvSqrt2 = 0.70710678118654752f;
      map_unary<T>(x, out, [](float v) { return 0.5f * v * (1.0f + std::erf(v * kInvSqrt2)); });
    } else {
      map_unary<T>(x, out, [](float v) { return v / (1.0f + std::exp(-v)); });
    }
  });
}

void convert(const Tensor& a, Tensor& out) {
  if (a.dtype() == out.dtype()) {
    if (a.raw() != out.raw() && a.nbytes()) std::memmove(out.raw(), a.raw(), a.nbytes());
    return;
  }
  dispatch_float(a.dtype(), "convert", [&](auto src_tag) {
    dispatch_float(out.dtype(), "convert", [&](auto dst_tag) {
      using S = decltype(src_tag);
      using D = decltype(dst_tag);
      const S* src = a.data<S>();
      D* dst = out.data<D>();
      cpu_threads().parallel_for(a.numel(), kElementGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) dst[i] = from_f32<D>(to_f32(src[i]));
      });
    });
  });
}

}  // namespace parley::cpu
