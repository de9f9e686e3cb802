// permute on CUDA (ops/transpose.h): any permutation of up to 6 dims, any dtype. Each
// thread takes output elements, splits the linear index into output coordinates and sums
// them against the input strides of the matching input dims.
#include "engine/cuda/common.cuh"
#include "engine/ops/transpose.h"

namespace parley::cuda {

namespace {

struct PermuteIndex {
  int ndim;
  int64_t out_dims[Shape::kMaxDims];
  int64_t in_strides[Shape::kMaxDims];  // input stride of the dim that lands at output dim i
};

// U: an unsigned integer of the element's size (values move as raw bits).
template <typename U>
__global__ void permute_kernel(const U* x, U* out, PermuteIndex p, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rest = i, src = 0;
    // Unrolled with constant indices so p stays in parameter space (no local-memory copy).
#pragma unroll
    for (int d = Shape::kMaxDims - 1; d >= 0; --d) {
      if (d >= p.ndim) continue;
      const int64_t c = rest % p.out_dims[d];
      rest /= p.out_dims[d];
      src += c * p.in_strides[d];
    }
    out[i] = x[src];
  }
}

template <typename U>
void launch_permute(const Tensor& x, Tensor& out, const PermuteIndex& p, int64_t n) {
  permute_kernel<U><<<grid_for(n), kThreads, 0, stream()>>>(x.data<U>(), out.data<U>(), p, n);
}

}  // namespace

void permute(const Tensor& x, const std::vector<int>& perm, Tensor& out) {
  const int64_t n = x.numel();
  if (n == 0) return;
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == int(i);
  if (identity) {
    memcpy_d2d(out.raw(), x.raw(), x.nbytes());
    return;
  }
  PermuteIndex p{};
  p.ndim = x.ndim();
  int64_t in_strides[Shape::kMaxDims];
  int64_t stride = 1;
  for (int d = x.ndim() - 1; d >= 0; --d) {
    in_strides[d] = stride;
    stride *= x.dim(d);
  }
  for (int d = 0; d < p.ndim; ++d) {
    p.out_dims[d] = x.dim(perm[size_t(d)]);
    p.in_strides[d] = in_strides[perm[size_t(d)]];
  }
  switch (dtype_size(x.dtype())) {
    case 4: launch_permute<uint32_t>(x, out, p, n); break;
    case 2: launch_permute<uint16_t>(x, out, p, n); break;
    default: launch_permute<uint8_t>(x, out, p, n); break;
  }
  check_launch("permute");
}

}  // namespace parley::cuda
