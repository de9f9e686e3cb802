// Element-wise ops on CUDA (ops/elementwise.h): add/mul with trailing-dims broadcast,
// scale, gelu, silu and dtype conversion. Grid-stride loops, f32 arithmetic.
#include "engine/cuda/common.cuh"
#include "engine/ops/elementwise.h"

namespace parley::cuda {

namespace {

#define PARLEY_GRID_STRIDE(i, n)                                            \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

// b repeats every nb elements of a (b has a's trailing dims; nb == n when shapes match).
template <typename T, BinaryOp kOp>
__global__ void binary_kernel(const T* a, const T* b, T* out, int64_t n, int64_t nb) {
  wait_for_inputs();  // a programmatic dependent inside a decoder step's graph (common.cuh)
  allow_dependents();
  PARLEY_GRID_STRIDE(i, n) {
    const float x = dev_to_f32(a[i]);
    const float y = dev_to_f32(b[nb == n ? i : i % nb]);
    out[i] = dev_from_f32<T>(kOp == BinaryOp::add ? x + y : x * y);
  }
}

template <typename T>
__global__ void scale_kernel(const T* a, float s, T* out, int64_t n) {
  PARLEY_GRID_STRIDE(i, n) { out[i] = dev_from_f32<T>(dev_to_f32(a[i]) * s); }
}

template <typename T, UnaryOp kOp>
__global__ void unary_kernel(const T* x, T* out, int64_t n) {
  PARLEY_GRID_STRIDE(i, n) {
    const float v = dev_to_f32(x[i]);
    const float r = kOp == UnaryOp::gelu ? gelu_erf(v) : v / (1.0f + expf(-v));
    out[i] = dev_from_f32<T>(r);
  }
}

// The same over 16-byte vectors (8 elements of a 16-bit dtype): one load and one store
// instruction per 8 elements (the encoder's GELU runs over [1500, 4 d]).
template <typename T, UnaryOp kOp>
__global__ void unary_vec8_kernel(const T* x, T* out, int64_t n8) {
  PARLEY_GRID_STRIDE(i, n8) {
    uint4 v = reinterpret_cast<const uint4*>(x)[i];
    T* e = reinterpret_cast<T*>(&v);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const float f = dev_to_f32(e[k]);
      e[k] = dev_from_f32<T>(kOp == UnaryOp::gelu ? gelu_erf(f) : f / (1.0f + expf(-f)));
    }
    reinterpret_cast<uint4*>(out)[i] = v;
  }
}

template <typename In, typename Out>
__global__ void convert_kernel(const In* a, Out* out, int64_t n) {
  PARLEY_GRID_STRIDE(i, n) { out[i] = dev_from_f32<Out>(dev_to_f32(a[i])); }
}

#undef PARLEY_GRID_STRIDE

const char* binary_name(BinaryOp op) { return op == BinaryOp::add ? "add" : "mul"; }

}  // namespace

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t n = a.numel(), nb = b.numel();
  if (n == 0) return;
  const char* name = binary_name(op);
  dispatch_device_float(a.dtype(), name, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    launch_dependent(
        op == BinaryOp::add ? binary_kernel<T, BinaryOp::add> : binary_kernel<T, BinaryOp::mul>,
        dim3(grid_for(n)), dim3(kThreads), 0, pa, pb, po, n, nb);
  });
  check_launch(name);
}

void scale(const Tensor& a, float s, Tensor& out) {
  const int64_t n = a.numel();
  if (n == 0) return;
  dispatch_device_float(a.dtype(), "scale", [&](auto tag) {
    using T = decltype(tag);
    scale_kernel<T><<<grid_for(n), kThreads, 0, stream()>>>(a.data<T>(), s, out.data<T>(), n);
  });
  check_launch("scale");
}

void unary(UnaryOp op, const Tensor& x, Tensor& out) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const char* name = op == UnaryOp::gelu ? "gelu" : "silu";
  dispatch_device_float(x.dtype(), name, [&](auto tag) {
    using T = decltype(tag);
    const bool vec8 = sizeof(T) == 2 && n % 8 == 0 &&
                      (reinterpret_cast<uintptr_t>(x.raw()) & 15u) == 0 &&
                      (reinterpret_cast<uintptr_t>(out.raw()) & 15u) == 0;
    if (vec8) {
      const int64_t n8 = n / 8;
      if (op == UnaryOp::gelu)
        unary_vec8_kernel<T, UnaryOp::gelu>
            <<<grid_for(n8), kThreads, 0, stream()>>>(x.data<T>(), out.data<T>(), n8);
      else
        unary_vec8_kernel<T, UnaryOp::silu>
            <<<grid_for(n8), kThreads, 0, stream()>>>(x.data<T>(), out.data<T>(), n8);
      return;
    }
    if (op == UnaryOp::gelu)
      unary_kernel<T, UnaryOp::gelu>
          <<<grid_for(n), kThreads, 0, stream()>>>(x.data<T>(), out.data<T>(), n);
    else
      unary_kernel<T, UnaryOp::silu>
          <<<grid_for(n), kThreads, 0, stream()>>>(x.data<T>(), out.data<T>(), n);
  });
  check_launch(name);
}

// Same dtype (any, i32 and i8 included): a device copy, or nothing when in place.
void convert(const Tensor& a, Tensor& out) {
  const int64_t n = a.numel();
  if (n == 0) return;
  if (a.dtype() == out.dtype()) {
    if (a.raw() != out.raw()) memcpy_d2d(out.raw(), a.raw(), a.nbytes());
    return;
  }
  dispatch_device_float(a.dtype(), "convert", [&](auto in_tag) {
    using In = decltype(in_tag);
    dispatch_device_float(out.dtype(), "convert", [&](auto out_tag) {
      using Out = decltype(out_tag);
      convert_kernel<In, Out>
          <<<grid_for(n), kThreads, 0, stream()>>>(a.data<In>(), out.data<Out>(), n);
    });
  });
  check_launch("convert");
}

}  // namespace parley::cuda
