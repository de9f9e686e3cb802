// Row scatter on CUDA (ops/scatter_rows.h): out[ids[i], :] = src[i, :], one block per id.
// An id outside [0, R) (only possible with ids already on the device) is skipped.
#include "engine/cuda/common.cuh"
#include "engine/ops/scatter_rows.h"

namespace parley::cuda {

namespace {

// U: an unsigned integer of the element's size; rows are copied as raw bits.
template <typename U>
__global__ void scatter_rows_kernel(const U* src, const int32_t* ids, U* out, int64_t rows,
                                    int64_t d) {
  const int64_t id = ids[blockIdx.x];
  if (id < 0 || id >= rows) return;
  const U* from = src + int64_t(blockIdx.x) * d;
  U* to = out + id * d;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) to[j] = from[j];
}

}  // namespace

void scatter_rows(const Tensor& src, const Tensor& ids, Tensor& out) {
  const int64_t n = ids.numel(), rows = out.dim(0), d = out.dim(1);
  if (n == 0 || d == 0) return;
  check_rows(n, "scatter_rows");
  const int threads = threads_for_row(d);
  const int32_t* pid = ids.data<int32_t>();
  switch (dtype_size(src.dtype())) {
    case 4:
      scatter_rows_kernel<uint32_t><<<unsigned(n), threads, 0, stream()>>>(
          src.data<uint32_t>(), pid, out.data<uint32_t>(), rows, d);
      break;
    case 2:
      scatter_rows_kernel<uint16_t><<<unsigned(n), threads, 0, stream()>>>(
          src.data<uint16_t>(), pid, out.data<uint16_t>(), rows, d);
      break;
    default:
      scatter_rows_kernel<uint8_t><<<unsigned(n), threads, 0, stream()>>>(
          src.data<uint8_t>(), pid, out.data<uint8_t>(), rows, d);
  }
  check_launch("scatter_rows");
}

}  // namespace parley::cuda
