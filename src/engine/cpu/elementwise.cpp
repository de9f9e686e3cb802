// CPU element-wise ops: one flat loop per dtype, split over cpu_threads(); math in f32.
#include "engine/ops/elementwise.h"

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "engine/cpu/cpu_common.h"
#include "engine/cpu/vec_math.h"

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
    const auto f = op == UnaryOp::gelu ? gelu_f32 : silu_f32;
    if constexpr (std::is_same_v<T, float>) {
      const float* px = x.data<float>();
      float* po = out.data<float>();
      cpu_threads().parallel_for(x.numel(), kElementGrain, [&](int64_t begin, int64_t end) {
        f(px + begin, po + begin, end - begin);
      });
    } else {  // 16-bit storage: through an f32 buffer per chunk
      const T* px = x.data<T>();
      T* po = out.data<T>();
      cpu_threads().parallel_for(x.numel(), kElementGrain, [&](int64_t begin, int64_t end) {
        std::vector<float> buf(size_t(end - begin));
        load_f32(px + begin, buf.data(), end - begin);
        f(buf.data(), buf.data(), end - begin);
        for (int64_t i = begin; i < end; ++i) po[i] = from_f32<T>(buf[size_t(i - begin)]);
      });
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
        if constexpr (std::is_same_v<S, f16_t> && std::is_same_v<D, float>) {
          static_assert(sizeof(f16_t) == sizeof(uint16_t));
          f16_to_f32_row(reinterpret_cast<const uint16_t*>(src + begin), dst + begin, end - begin);
        } else {
          for (int64_t i = begin; i < end; ++i) dst[i] = from_f32<D>(to_f32(src[i]));
        }
      });
    });
  });
}

}  // namespace parley::cpu
