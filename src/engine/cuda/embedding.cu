// embedding on CUDA (ops/embedding.h): out[i, :] = table[ids[i], :], one block per id.
// ids are i32 on the device, so they cannot be range-checked before launch without a
// copy back; an id outside [0, V) gives a row of zeros instead of reading out of bounds.
// Launched as a programmatic dependent (common.cuh) like the rest of a decoder step. With
// `add` (a decoder step's positional embedding) the rows are summed in f32 and rounded once,
// as the add op does, in the same launch.
#include "engine/cuda/common.cuh"
#include "engine/ops/embedding.h"

namespace parley::cuda {

namespace {

// U: an unsigned integer of the element's size; rows are copied as raw bits.
template <typename U>
__global__ void embedding_kernel(const U* table, const int32_t* ids, U* out, int64_t vocab,
                                 int64_t d) {
  wait_for_inputs();
  allow_dependents();
  const int64_t id = ids[blockIdx.x];
  U* dst = out + int64_t(blockIdx.x) * d;
  const bool valid = id >= 0 && id < vocab;
  const U* src = table + (valid ? id : 0) * d;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) dst[j] = valid ? src[j] : U(0);
}

// out[i] = table[ids[i]] + add[i * add_stride] (add_stride 0: one row for every id), in T.
template <typename T>
__global__ void embedding_add_kernel(const T* table, const int32_t* ids, const T* add,
                                     int64_t add_stride, T* out, int64_t vocab, int64_t d) {
  wait_for_inputs();
  allow_dependents();
  const int64_t id = ids[blockIdx.x];
  T* dst = out + int64_t(blockIdx.x) * d;
  const T* plus = add + int64_t(blockIdx.x) * add_stride;
  const bool valid = id >= 0 && id < vocab;
  const T* src = table + (valid ? id : 0) * d;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    dst[j] = dev_from_f32<T>((valid ? dev_to_f32(src[j]) : 0.0f) + dev_to_f32(plus[j]));
}

}  // namespace

void embedding(const Tensor& table, const Tensor& ids, Tensor& out, const Tensor* add) {
  const int64_t n = ids.numel(), vocab = table.dim(0), d = table.dim(1);
  if (n == 0 || d == 0) return;
  check_rows(n, "embedding");
  const int threads = threads_for_row(d);
  const int32_t* pid = ids.data<int32_t>();
  if (add) {
    const int64_t stride = add->numel() == d ? 0 : d;
    dispatch_device_float(table.dtype(), "embedding", [&](auto tag) {
      using T = decltype(tag);
      launch_dependent(embedding_add_kernel<T>, dim3(unsigned(n)), dim3(threads), 0,
                       table.data<T>(), pid, add->data<T>(), stride, out.data<T>(), vocab, d);
    });
  } else if (dtype_size(table.dtype()) == 4)
    launch_dependent(embedding_kernel<uint32_t>, dim3(unsigned(n)), dim3(threads), 0,
                     table.data<uint32_t>(), pid, out.data<uint32_t>(), vocab, d);
  else
    launch_dependent(embedding_kernel<uint16_t>, dim3(unsigned(n)), dim3(threads), 0,
                     table.data<uint16_t>(), pid, out.data<uint16_t>(), vocab, d);
  check_launch("embedding");
}

}  // namespace parley::cuda
